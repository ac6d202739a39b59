package shards

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/rules"
)

var hotNow = int64(1_700_000_000) * int64(1e9)

// within reports whether got is within frac of want.
func within(got, want uint64, frac float64) bool {
	d := float64(got) - float64(want)
	return d <= frac*float64(want) && -d <= frac*float64(want)
}

// TestHotKeysFindsTheHotKey: one key checked 3,000 times among fifty
// checked 20 times each comes first, counted within 10%, with its denials.
func TestHotKeysFindsTheHotKey(t *testing.T) {
	s := New(0)
	p := engine.Params{Limit: 1000, Window: 60e9}
	for i := 0; i < 3000; i++ {
		s.Check([]byte("hot"), engine.Fixed, p, 1, hotNow+int64(i)*1e6)
		if i%60 == 0 {
			k := i / 60 // 50 other keys, 20 checks each, spread over the run
			for j := 0; j < 20; j++ {
				s.Check(fmt.Appendf(nil, "cold:%d", k), engine.Fixed, p, 1, hotNow+int64(i)*1e6)
			}
		}
	}
	got := s.HotKeys(context.Background(), 3, hotNow+3e9)
	if len(got) != 3 || got[0].Key != "hot" {
		t.Fatalf("HotKeys(3) = %+v, want hot first of 3", got)
	}
	if !within(got[0].Checks, 3000, 0.1) || !within(got[0].Denied, 2000, 0.1) {
		t.Errorf("hot: %+v, want about 3000 checks, 2000 denied", got[0])
	}
	if got[1].Checks > 20 || got[2].Checks > 20 {
		t.Errorf("cold keys over-counted: %+v", got[1:])
	}
	if all := s.HotKeys(context.Background(), 1000, hotNow+3e9); len(all) != 51 {
		t.Errorf("HotKeys(1000) has %d rows, want 51", len(all))
	}
}

// TestHotKeysUnderNoise: a key with 1% of the checks among a stream of
// many cold keys is found, counted within 10%, with few shards (a cluster
// group's store) and many.
func TestHotKeysUnderNoise(t *testing.T) {
	for _, shards := range []int{16, 256} {
		t.Run(fmt.Sprint(shards), func(t *testing.T) {
			rng := newRand(t)
			s := New(shards)
			p := engine.Params{Limit: 1 << 40, Window: 60e9}
			const total = 400_000
			var hot uint64
			warm := map[string]uint64{} // ten keys of 0.5% each
			for i := 0; i < total; i++ {
				now := hotNow + int64(i)*100_000 // 40 s in all
				var k string
				switch r := rng.IntN(1000); {
				case r < 10:
					k = "hot"
					hot++
				case r < 60:
					k = fmt.Sprintf("warm:%d", r%10)
					warm[k]++
				default:
					k = fmt.Sprintf("cold:%d", rng.IntN(200_000))
				}
				s.Check([]byte(k), engine.Token, p, 1, now)
			}
			got := s.HotKeys(context.Background(), 11, hotNow+int64(total)*100_000)
			if len(got) == 0 || got[0].Key != "hot" || !within(got[0].Checks, hot, 0.1) {
				t.Fatalf("HotKeys = %+v, want hot first with about %d checks", got, hot)
			}
			t.Logf("hot: %d checks counted of %d", got[0].Checks, hot)
			for _, r := range got[1:] {
				if want, ok := warm[r.Key]; !ok || !within(r.Checks, want, 0.2) {
					t.Errorf("row %+v: want a warm key with about %d checks", r, want)
				}
			}
		})
	}
}

// TestHotKeysWindow: checks older than the window fall out; the window
// keeps between 45 and 60 seconds of them.
func TestHotKeysWindow(t *testing.T) {
	s := New(0)
	p := engine.Params{Limit: 1000, Window: 1e9}
	start := (hotNow / hotGenNs) * hotGenNs // a generation's start
	for i := 0; i < 100; i++ {
		s.Check([]byte("old"), engine.Token, p, 1, start)
	}
	for i := 0; i < 10; i++ {
		s.Check([]byte("new"), engine.Token, p, 1, start+50e9)
	}
	rows := func(at int64) map[string]uint64 {
		m := map[string]uint64{}
		for _, r := range s.HotKeys(context.Background(), 10, at) {
			m[r.Key] = r.Checks
		}
		return m
	}
	if m := rows(start + 59e9); m["old"] != 100 || m["new"] != 10 {
		t.Errorf("at 59 s: %v, want old 100 and new 10", m)
	}
	if m := rows(start + 61e9); m["old"] != 0 || m["new"] != 10 {
		t.Errorf("at 61 s: %v, want only new", m)
	}
	if m := rows(start + 121e9); len(m) != 0 {
		t.Errorf("at 121 s: %v, want nothing", m)
	}
	// Checks move the generations on: the old key's generation is reused.
	for i := 0; i < 5; i++ {
		s.Check([]byte("later"), engine.Token, p, 1, start+200e9+int64(i)*hotGenNs)
	}
	if m := rows(start + 260e9); len(m) != 1 || m["later"] != 4 {
		t.Errorf("at 260 s: %v, want later 4 (the four generations back to 215 s)", m)
	}
}

// TestHotKeysEveryCheckPath: Throttle, CheckAll, CheckRules and a
// transaction's checks are counted; peeks, refusals and WRONGTYPE are not.
func TestHotKeysEveryCheckPath(t *testing.T) {
	s := New(0)
	p := engine.Params{Limit: 2, Window: 60e9}
	for i := 0; i < 3; i++ {
		if _, err := s.Throttle([]byte("cell"), 1, 1, 60, 1, hotNow); err != nil {
			t.Fatal(err)
		}
	}
	s.Throttle([]byte("cell"), 1, 1, 60, 0, hotNow) // a peek
	ops := []Op{{Key: []byte("a"), Algo: engine.Fixed, Params: p}, {Key: []byte("b"), Algo: engine.Fixed, Params: engine.Params{Limit: 1, Window: 60e9}}}
	for i := 0; i < 2; i++ {
		if _, err := s.CheckAll(ops, 1, hotNow); err != nil {
			t.Fatal(err)
		}
	}
	s.CheckAll(ops, 0, hotNow)                            // a peek
	s.Check([]byte("a"), engine.Token, p, 1, hotNow)      // WRONGTYPE
	s.Check([]byte("peeked"), engine.Token, p, 0, hotNow) // a peek
	if err := s.CreateRule(rules.Rule{ID: "r", Target: "*", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 5, Window: "1m"}); err != nil {
		t.Fatal(err)
	}
	q := &rules.Query{Target: []byte("/x"), Tier: []byte("free"), Cost: 1}
	q.AddID([]byte("ip"), []byte("1.2.3.4"))
	if err := s.CheckRules(q, hotNow); err != nil || len(q.Evals) != 1 {
		t.Fatalf("CheckRules: %v, %d evaluations", err, len(q.Evals))
	}
	ruleKey := string(q.Evals[0].Key)
	s.Transact(TxPlan{Keys: [][]byte{[]byte("tx")}}, func(tx *Tx) {
		tx.Check([]byte("tx"), engine.Fixed, p, 1, hotNow)
	})
	got := map[string]HotKey{}
	for _, r := range s.HotKeys(context.Background(), 100, hotNow) {
		got[r.Key] = r
	}
	want := map[string]HotKey{
		"cell":  {Key: "cell", Checks: 3, Denied: 1},
		"a":     {Key: "a", Checks: 2, Denied: 0},
		"b":     {Key: "b", Checks: 2, Denied: 1},
		ruleKey: {Key: ruleKey, Checks: 1},
		"tx":    {Key: "tx", Checks: 1},
	}
	if len(got) != len(want) {
		t.Errorf("HotKeys = %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%q: %+v, want %+v", k, got[k], w)
		}
	}
}

// TestHotKeysOff: a Store made with NoHotKeys reports nothing.
func TestHotKeysOff(t *testing.T) {
	s := NewStore(Options{NoHotKeys: true})
	s.Check([]byte("k"), engine.Token, engine.Params{Limit: 5, Window: 1e9}, 1, hotNow)
	if got := s.HotKeys(context.Background(), 10, hotNow); len(got) != 0 {
		t.Errorf("HotKeys = %v, want none", got)
	}
}

// TestMergeHotKeys sums per key and keeps the n most checked.
func TestMergeHotKeys(t *testing.T) {
	got := MergeHotKeys(2,
		[]HotKey{{"a", 5, 1}, {"b", 4, 0}, {"c", 1, 0}},
		[]HotKey{{"c", 9, 2}, {"b", 1, 1}})
	want := []HotKey{{"c", 10, 2}, {"a", 5, 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("MergeHotKeys = %v, want %v", got, want)
	}
}

// TestCheckWithSketchDoesNotAllocate: recording allocates nothing, also
// when keys take monitored slots and generations begin, from the first
// minute on (the keys are within hotKeyRoom): 10,000 checks and throttles
// over 50 s allocate no more with the sketch than without it (a GCRA
// record that grows may take a new page either way).
func TestCheckWithSketchDoesNotAllocate(t *testing.T) {
	run := func(s *Store) uint64 {
		p := engine.Params{Limit: 1 << 30, Window: 60e9}
		ks := keys(1000)
		cells := make([][]byte, len(ks))
		for i, k := range ks { // the keys' state: the table grows
			s.Check(k, engine.Token, p, 1, hotNow)
			cells[i] = append([]byte("cell:"), k...)
			s.Throttle(cells[i], 1000, 1000, 3600, 1, hotNow)
		}
		// AllocsPerRun divides and rounds down, and warms up first:
		// count every allocation of the whole run instead.
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := 0; i < 5000; i++ { // 50 s: four generations begin
			s.Check(ks[i%len(ks)], engine.Token, p, 1, hotNow+int64(i)*10e6)
			s.Throttle(cells[i%len(cells)], 1000, 1000, 3600, 1, hotNow+int64(i)*10e6)
		}
		runtime.ReadMemStats(&after)
		return after.Mallocs - before.Mallocs
	}
	on, off := ^uint64(0), ^uint64(0)
	for range 3 { // the least of three: the runtime allocates a few now and then
		on = min(on, run(New(4)))
		off = min(off, run(NewStore(Options{Shards: 4, NoHotKeys: true})))
	}
	if on > off+2 {
		t.Errorf("10,000 checks allocated %d times with the sketch, %d without", on, off)
	}
}

// BenchmarkCheckHotKeys compares Store.Check with the sketch on and off,
// on 100,000 keys (a cold key on almost every check: the sketch's dearest
// case) and on one.
func BenchmarkCheckHotKeys(b *testing.B) {
	for _, n := range []int{100_000, 1} {
		for _, off := range []bool{false, true} {
			b.Run(fmt.Sprintf("keys=%d/off=%v", n, off), func(b *testing.B) {
				s := NewStore(Options{NoHotKeys: off})
				ks := keys(n)
				p := engine.Params{Limit: 1 << 40, Window: 60e9}
				for _, k := range ks {
					s.Check(k, engine.Token, p, 1, hotNow)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					s.Check(ks[(i*7919)%len(ks)], engine.Token, p, 1, hotNow+int64(i)*1000)
				}
			})
		}
	}
}

// BenchmarkCheckHotKeysPaired is BenchmarkCheckHotKeys on 100,000 keys
// with the two stores taking turns, 1,024 checks each, and the median
// ratio of their times reported as sketch-overhead-%: slow drifts of a
// shared machine's load cancel out within a turn.
func BenchmarkCheckHotKeysPaired(b *testing.B) {
	const turn = 1024
	on, off := NewStore(Options{}), NewStore(Options{NoHotKeys: true})
	ks := keys(100_000)
	p := engine.Params{Limit: 1 << 40, Window: 60e9}
	for _, k := range ks {
		on.Check(k, engine.Token, p, 1, hotNow)
		off.Check(k, engine.Token, p, 1, hotNow)
	}
	var ratios []float64
	j := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += turn {
		var d [2]time.Duration
		for _, s := range [2]int{(i / turn) % 2, 1 - (i/turn)%2} {
			st := on
			if s == 1 {
				st = off
			}
			t := time.Now()
			for n := 0; n < turn; n++ {
				st.Check(ks[(j+n*7919)%len(ks)], engine.Token, p, 1, hotNow+int64(i+n)*1000)
			}
			d[s] = time.Since(t)
		}
		j += turn * 7919
		ratios = append(ratios, float64(d[0])/float64(d[1]))
	}
	slices.Sort(ratios)
	b.ReportMetric((ratios[len(ratios)/2]-1)*100, "sketch-overhead-%")
}
