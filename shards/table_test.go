package shards

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/rlserver/rlserver/engine"
)

// TestTableMatchesMap drives a table and a map with the same random adds,
// rewrites (growing and shrinking records), removes and sweeps, over keys
// of many lengths including ones that get their own page, and checks after
// every step that both hold the same keys and states. It prints its seed;
// replay one with -seed.
func TestTableMatchesMap(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { tableModel(t, seed, 20000) })
	}
}

func tableModel(t *testing.T, seed uint64, steps int) {
	r := rand.New(rand.NewPCG(seed, 7))
	var tab table
	model := map[string]entry{}
	var names []string
	for i := 0; i < 3000; i++ {
		n := r.IntN(40)
		if i%500 == 0 {
			n = bigRecord + r.IntN(3000)
		}
		names = append(names, fmt.Sprintf("%d:%s", i, strings.Repeat("k", n)))
	}
	randEntry := func() entry {
		e := entry{algo: engine.Algo(1 + r.IntN(engine.NumAlgos-1))}
		e.st.T = r.Int64N(1<<62) - 1<<61
		e.expires = e.st.T + r.Int64N(1<<40)
		e.st.N = r.Int64N(1 << uint(r.IntN(50)))
		e.st.P = r.Int64N(1 << uint(r.IntN(50)))
		if e.algo == engine.Log {
			e.st.Log = &engine.Ring{}
			e.st.Log.Push(engine.Entry{At: 1, Cost: 1})
		}
		return e
	}
	for step := 0; step < steps; step++ {
		key := names[r.IntN(len(names))]
		tag := tagOf(xxhash.Sum64String(key))
		i := tab.find([]byte(key), tag)
		_, ok := model[key]
		if (i >= 0) != ok {
			t.Fatalf("seed %d step %d: find(%.20q) = %d, model has it: %v", seed, step, key, i, ok)
		}
		switch op := r.IntN(10); {
		case !ok:
			e := randEntry()
			tab.add([]byte(key), tag, &e)
			model[key] = e
		case op < 5:
			var got entry
			tab.decode(i, &got)
			e := randEntry()
			e.algo, e.st.Log, e.ring, e.ringCap = got.algo, got.st.Log, got.ring, got.ringCap
			e.slot = i
			tab.rewrite(i, []byte(key), &e)
			model[key] = e
		case op < 9:
			tab.remove(i)
			delete(model, key)
		default:
			cut := r.Int64N(1<<62) - 1<<61
			tab.sweep(cut, 1+r.IntN(50))
			for k, e := range model {
				if j := tab.find([]byte(k), tagOf(xxhash.Sum64String(k))); j < 0 {
					if e.expires > cut {
						t.Fatalf("seed %d step %d: sweep at %d removed %.20q expiring at %d", seed, step, cut, k, e.expires)
					}
					delete(model, k)
				}
			}
		}
		if step%97 == 0 || step == steps-1 {
			checkTable(t, &tab, model, fmt.Sprintf("seed %d step %d", seed, step))
		}
	}
}

func checkTable(t *testing.T, tab *table, model map[string]entry, at string) {
	t.Helper()
	if tab.n != len(model) {
		t.Fatalf("%s: table has %d keys, model %d", at, tab.n, len(model))
	}
	for k, want := range model {
		i := tab.find([]byte(k), tagOf(xxhash.Sum64String(k)))
		if i < 0 {
			t.Fatalf("%s: %.20q missing", at, k)
		}
		var got entry
		tab.decode(i, &got)
		if got.algo != want.algo || got.expires != want.expires || got.st.T != want.st.T ||
			got.st.N != want.st.N || got.st.P != want.st.P || got.st.Log != want.st.Log {
			t.Fatalf("%s: %.20q = %+v, want %+v", at, k, got, want)
		}
	}
	var live int64
	for _, s := range tab.slots {
		if s != 0 {
			live += int64(recordLen(tab.record(uint32(s))))
		}
	}
	if live+tab.freeBytes > tab.pageBytes {
		t.Fatalf("%s: %d live + %d free bytes exceed %d page bytes", at, live, tab.freeBytes, tab.pageBytes)
	}
	if len(model) == 0 && tab.memory() != 0 {
		t.Fatalf("%s: empty table holds %d bytes", at, tab.memory())
	}
}

// TestMemoryPerKey reports the bytes per key of a store of 100,000 keys
// per algorithm, as the benchmark comparison does for a million, and for
// the log with one and with ten entries per key (six seconds apart, as
// RL.CHECK key log 100 60 leaves them at 100,000 keys and about 16,000
// checks a second).
func TestMemoryPerKey(t *testing.T) {
	for _, c := range []struct {
		a       engine.Algo
		entries int
		max     float64
	}{
		{engine.Fixed, 1, 50},
		{engine.Token, 1, 50},
		{engine.GCRA, 1, 50},
		{engine.Log, 1, 200},
		{engine.Log, 10, 400},
	} {
		s := New(16) // 6,250 keys per shard: the partly filled last page is noise
		p := engine.Params{Limit: 100, Window: 60e9}
		now := int64(1_700_000_000e9)
		const n = 100000
		for j := 0; j < c.entries; j++ {
			for i := 0; i < n; i++ {
				s.Check([]byte(fmt.Sprintf("key:%012d", i)), c.a, p, 1, now+int64(j)*6e9)
			}
		}
		per := float64(s.MemoryBytes()) / n
		t.Logf("%s, %d entries: %.1f bytes per key (16-byte names)", c.a, c.entries, per)
		if per > c.max {
			t.Errorf("%s, %d entries: %.1f bytes per key, want at most %.0f", c.a, c.entries, per, c.max)
		}
	}
}

// BenchmarkCheckNewKeys measures inserting keys: index growth and record
// allocation.
func BenchmarkCheckNewKeys(b *testing.B) {
	s := New(0)
	p := engine.Params{Limit: 100, Window: 60e9}
	key := []byte("key:000000000000")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		n := i
		for j := len(key) - 1; j >= 4; j-- {
			key[j] = byte('0' + n%10)
			n /= 10
		}
		s.Check(key, engine.Token, p, 1, int64(1_700_000_000e9))
	}
}

// BenchmarkCheckRandom measures checks on 100,000 warm keys in random
// order, as the server sees them: most accesses miss the CPU caches.
func BenchmarkCheckRandom(b *testing.B) {
	for _, a := range []engine.Algo{engine.Fixed, engine.Token, engine.GCRA} {
		b.Run(a.String(), func(b *testing.B) {
			s := New(0)
			p := engine.Params{Limit: 1 << 40, Window: 60e9}
			now := int64(1_700_000_000e9)
			keys := make([][]byte, 100000)
			for i := range keys {
				keys[i] = []byte(fmt.Sprintf("key:%012d", i))
				s.Check(keys[i], a, p, 1, now)
			}
			order := rand.New(rand.NewPCG(1, 2)).Perm(len(keys))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.Check(keys[order[i%len(order)]], a, p, 1, now+int64(i))
			}
		})
	}
}

// TestCompaction frees most records of a table, in sizes that are never
// asked for again, and checks that the pages shrink and every remaining
// key keeps its state.
func TestCompaction(t *testing.T) {
	var tab table
	model := map[string]entry{}
	for i := 0; i < 5000; i++ {
		key := fmt.Sprintf("%d:%s", i, strings.Repeat("x", i%40))
		e := entry{algo: engine.Fixed, expires: int64(i) + 100, st: engine.State{T: int64(i), N: int64(i)}}
		tab.add([]byte(key), tagOf(xxhash.Sum64String(key)), &e)
		model[key] = e
	}
	before := tab.pageBytes
	for key := range model {
		if len(model) <= 500 {
			break
		}
		tab.remove(tab.find([]byte(key), tagOf(xxhash.Sum64String(key))))
		delete(model, key)
	}
	if tab.pageBytes*4 > before {
		t.Fatalf("pages hold %d bytes after freeing 90%% of %d", tab.pageBytes, before)
	}
	checkTable(t, &tab, model, "after compaction")
}

// BenchmarkCheckBatch measures pipelined-like batches of 16 checks on
// random keys, with and without Prefetch first.
func BenchmarkCheckBatch(b *testing.B) {
	for _, n := range []int{100000, 1000000} {
		s := New(0)
		p := engine.Params{Limit: 1 << 40, Window: 3600e9}
		now := int64(1_700_000_000e9)
		keys := make([][]byte, n)
		for i := range keys {
			keys[i] = []byte(fmt.Sprintf("key:%012d", i))
			s.Check(keys[i], engine.Token, p, 1, now)
		}
		order := rand.New(rand.NewPCG(1, 2)).Perm(len(keys))
		for _, pre := range []bool{false, true} {
			b.Run(fmt.Sprintf("keys=%d/prefetch=%v", n, pre), func(b *testing.B) {
				batch := make([][]byte, 16)
				for i := 0; i < b.N; i += 16 {
					for j := range batch {
						batch[j] = keys[order[(i+j)%len(order)]]
					}
					if pre {
						s.Prefetch(batch)
					}
					for _, k := range batch {
						s.Check(k, engine.Token, p, 1, now+int64(i))
					}
				}
			})
		}
	}
}

// BenchmarkLogBatch is BenchmarkCheckBatch for the log algorithm, whose
// entries are two pointers away from the record.
func BenchmarkLogBatch(b *testing.B) {
	s := New(0)
	p := engine.Params{Limit: 1000, Window: 3600e9}
	now := int64(1_700_000_000e9)
	keys := make([][]byte, 100000)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("key:%012d", i))
		for j := 0; j < 5; j++ {
			s.Check(keys[i], engine.Log, p, 1, now+int64(j))
		}
	}
	order := rand.New(rand.NewPCG(1, 2)).Perm(len(keys))
	for _, pre := range []bool{false, true} {
		b.Run(fmt.Sprintf("prefetch=%v", pre), func(b *testing.B) {
			batch := make([][]byte, 16)
			for i := 0; i < b.N; i += 16 {
				for j := range batch {
					batch[j] = keys[order[(i+j)%len(order)]]
				}
				if pre {
					s.Prefetch(batch)
				}
				for _, k := range batch {
					s.Check(k, engine.Log, p, 0, now+10)
				}
			}
		})
	}
}

// BenchmarkLogRandom measures RL.CHECK key:N log 100 60 on 100,000 keys
// in uniform random order, one check at a time, with the clock advancing
// so that a key holds about the given number of entries in its window (the
// server benchmark's workload). The store is warmed for two windows first
// and stays warm across the benchmark's runs.
func BenchmarkLogRandom(b *testing.B) {
	for _, entries := range []int{1, 10} {
		s := New(0)
		p := engine.Params{Limit: 100, Window: 60e9}
		keys := make([][]byte, 100000)
		for i := range keys {
			keys[i] = []byte(fmt.Sprintf("key:%d", i))
		}
		step := p.Window / int64(entries*len(keys))
		now := int64(1_700_000_000e9)
		rng := rand.New(rand.NewPCG(1, 2))
		check := func() {
			s.Check(keys[rng.IntN(len(keys))], engine.Log, p, 1, now)
			now += step
		}
		for i := 0; i < 2*entries*len(keys); i++ {
			check()
		}
		b.Run(fmt.Sprintf("entries=%d", entries), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				check()
			}
		})
	}
}

// TestExpiredStateActsFresh: a key whose state expired answers as a fresh
// key for its own algorithm (reusing its record, and for the log its ring,
// without allocating) and for another algorithm.
func TestExpiredStateActsFresh(t *testing.T) {
	for _, a := range []engine.Algo{engine.Fixed, engine.Sliding, engine.Log, engine.Token, engine.Leaky, engine.GCRA} {
		s := New(1)
		p := engine.Params{Limit: 3, Window: 1e9}
		now := int64(1_700_000_000e9)
		key := []byte("k")
		for i := 0; i < 3; i++ {
			s.Check(key, a, p, 1, now)
		}
		later := now + 10e9
		fresh, _ := New(1).Check(key, a, p, 1, later)
		if got, _ := s.Check(key, a, p, 1, later); got != fresh {
			t.Errorf("%s: after expiry %+v, fresh key %+v", a, got, fresh)
		}
		allocs := testing.AllocsPerRun(10, func() {
			later += 10e9
			s.Check(key, a, p, 1, later)
		})
		if allocs != 0 || s.Len() != 1 {
			t.Errorf("%s: reuse allocated %v times, Len %d", a, allocs, s.Len())
		}
		other := engine.Fixed
		if a == engine.Fixed {
			other = engine.GCRA
		}
		if _, err := s.Check(key, other, p, 1, later+10e9); err != nil {
			t.Errorf("%s: expired key refused %s: %v", a, other, err)
		}
	}
}
