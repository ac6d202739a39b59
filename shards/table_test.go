package shards

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/testutil"
)

// TestTableMatchesMap drives a table and a map with the same random adds,
// rewrites (growing and shrinking records, moving logs inline and out to
// rings), removes and sweeps, over keys of many lengths including ones that
// get their own page, and checks every few steps that both hold the same
// keys and states. It runs seeds 1 to 5, each a subtest named for its seed;
// run another with -seed (or RL_SEED). The table is one goroutine's, in
// which the race detector finds nothing: under it each seed takes 5,000
// steps instead of 20,000, a quarter of the time.
func TestTableMatchesMap(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5}
	if s := testSeed(t); s != 0 {
		seeds = []uint64{s}
	}
	steps := 20000
	if testutil.Race {
		steps = 5000
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { tableModel(t, seed, steps) })
	}
}

// randLog returns a log of 0 to 3*spillAt entries with gaps and costs of
// every width, and rarely (one gap of 2^61) a span too long to be inline.
func randLog(r *rand.Rand) *engine.Ring {
	log := &engine.Ring{}
	at := r.Int64N(1<<62) - 1<<61
	long := false
	for n := r.IntN(3*spillAt + 1); n > 0; n-- {
		log.Push(engine.Entry{At: at, Cost: 1 + r.Int64N(1<<uint(r.IntN(49)))})
		gap := 1 + r.Int64N(1<<uint(r.IntN(56)))
		if !long && r.IntN(200) == 0 {
			gap, long = 1<<61, true
		}
		at += gap
	}
	return log
}

// logEntries returns the entries of l, oldest first.
func logEntries(l *engine.Ring) []engine.Entry {
	var out []engine.Entry
	for i := 0; l != nil && i < l.Len(); i++ {
		out = append(out, l.At(i))
	}
	return out
}

// modelEntry is what the table model expects of a key.
type modelEntry struct {
	algo    engine.Algo
	expires int64
	st      engine.State // without Log
	log     []engine.Entry
}

func toModel(e *entry) modelEntry {
	m := modelEntry{algo: e.algo, expires: e.expires, st: e.st, log: logEntries(e.st.Log)}
	m.st.Log = nil
	return m
}

func tableModel(t *testing.T, seed uint64, steps int) {
	r := rand.New(rand.NewPCG(seed, 7))
	var tab table
	model := map[string]modelEntry{}
	var names []string
	for i := 0; i < 3000; i++ {
		n := r.IntN(40)
		if i%500 == 0 {
			n = bigRecord + r.IntN(3000)
		}
		names = append(names, fmt.Sprintf("%d:%s", i, strings.Repeat("k", n)))
	}
	randEntry := func(a engine.Algo) entry {
		e := entry{algo: a}
		e.st.T = r.Int64N(1<<62) - 1<<61
		e.expires = e.st.T + r.Int64N(1<<40)
		e.st.N = r.Int64N(1 << uint(r.IntN(50)))
		e.st.P = r.Int64N(1 << uint(r.IntN(50)))
		if e.algo == engine.Log { // the engine uses none of T, N and P
			e.st = engine.State{Log: randLog(r)}
		}
		return e
	}
	// changeLog changes a decoded log in place, as a check does: it trims
	// the oldest entries and appends newer ones.
	changeLog := func(l *engine.Ring) {
		if l.Len() > 0 {
			l.TrimBefore(l.At(r.IntN(l.Len())).At - 1 + r.Int64N(2))
		}
		at := int64(-1 << 61)
		if l.Len() > 0 {
			at = l.Last().At
		}
		for n := r.IntN(2 * spillAt); n > 0; n-- {
			at += r.Int64N(1 << 30)
			l.Push(engine.Entry{At: at, Cost: 1 + r.Int64N(3)})
		}
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
			e := randEntry(engine.Algo(1 + r.IntN(engine.NumAlgos-1)))
			m := toModel(&e)
			tab.add([]byte(key), tag, &e)
			model[key] = m
		case op < 5:
			var got entry
			tab.decode(i, &got)
			e := randEntry(got.algo)
			e.spilled, e.ring, e.ringCap = got.spilled, got.ring, got.ringCap
			e.slot, e.size = i, got.size
			if e.algo == engine.Log {
				e.st = got.st
				if r.IntN(2) == 0 {
					e.st.Log = randLog(r)
				} else {
					changeLog(e.st.Log)
				}
			}
			m := toModel(&e)
			tab.rewrite(i, []byte(key), &e)
			model[key] = m
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

func checkTable(t *testing.T, tab *table, model map[string]modelEntry, at string) {
	t.Helper()
	if tab.n != len(model) {
		t.Fatalf("%s: table has %d keys, model %d", at, tab.n, len(model))
	}
	for k, want := range model {
		i := tab.find([]byte(k), tagOf(xxhash.Sum64String(k)))
		if i < 0 {
			t.Fatalf("%s: %.20q missing", at, k)
		}
		var e entry
		tab.decode(i, &e)
		if got := toModel(&e); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %.20q = %+v, want %+v", at, k, got, want)
		}
	}
	checkLayout(t, tab, at)
}

// checkLayout checks the table's accounting against its records: every
// spilled log's ring and its capacity, no inline log longer than spillAt,
// and the free and live bytes within the pages.
func checkLayout(t *testing.T, tab *table, at string) {
	t.Helper()
	var live, rings int64
	for i, s := range tab.slots {
		if s == 0 {
			continue
		}
		rec := tab.record(uint32(s))
		live += int64(recordLen(rec))
		var e entry
		if tab.decode(i, &e) != recordLen(rec) {
			t.Fatalf("%s: slot %d: decode and recordLen disagree", at, i)
		}
		switch n := logLen(&e); {
		case e.spilled:
			if e.st.Log != tab.rings[e.ring] || int(e.ringCap) != e.st.Log.Cap() {
				t.Fatalf("%s: slot %d: ring %d, capacity %d, accounted %d", at, i, e.ring, e.st.Log.Cap(), e.ringCap)
			}
			rings += ringOverhead + int64(e.ringCap)*entryBytes
		case n > spillAt:
			t.Fatalf("%s: slot %d: %d entries inline", at, i, n)
		}
	}
	if rings != tab.ringBytes {
		t.Fatalf("%s: rings of the records take %d bytes, accounted %d", at, rings, tab.ringBytes)
	}
	if live+tab.freeBytes > tab.pageBytes {
		t.Fatalf("%s: %d live + %d free bytes exceed %d page bytes", at, live, tab.freeBytes, tab.pageBytes)
	}
	if tab.n == 0 && tab.memory() != 0 {
		t.Fatalf("%s: empty table holds %d bytes", at, tab.memory())
	}
}

// TestMemoryPerKey reports the bytes per key of a store of 100,000 keys
// per algorithm, as the benchmark comparison does for a million, and for
// the log with 1, 10 and 40 entries per key, spread over the window (ten
// are six seconds apart, as RL.CHECK key log 100 60 leaves them at 100,000
// keys and about 16,000 checks a second). Under the race detector, which
// finds nothing in one goroutine's inserts and runs them twenty times
// slower, it measures 25,000 keys in 4 shards: as many keys per shard, the
// same pages, a quarter of the time.
func TestMemoryPerKey(t *testing.T) {
	shards, n := 16, 100000
	if testutil.Race {
		shards, n = 4, 25000
	}
	for _, c := range []struct {
		a       engine.Algo
		entries int
		max     float64
	}{
		{engine.Fixed, 1, 50},
		{engine.Token, 1, 50},
		{engine.GCRA, 1, 50},
		{engine.Log, 1, 55},    // the entries inline in the record
		{engine.Log, 10, 120},  // 80 bytes of record, the rest free space of growing them
		{engine.Log, 40, 1250}, // spilled to a ring of 64 entries
	} {
		s := New(shards) // 6,250 keys per shard: the partly filled last page is noise
		p := engine.Params{Limit: 100, Window: 60e9}
		now := int64(1_700_000_000e9)
		for j := 0; j < c.entries; j++ {
			for i := 0; i < n; i++ {
				s.Check([]byte(fmt.Sprintf("key:%012d", i)), c.a, p, 1, now+int64(j)*(60e9/int64(c.entries)))
			}
		}
		per := float64(s.MemoryBytes()) / float64(n)
		t.Logf("%s, %d entries: %.1f bytes per key (16-byte names, %d keys)", c.a, c.entries, per, n)
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
	model := map[string]modelEntry{}
	for i := 0; i < 5000; i++ {
		key := fmt.Sprintf("%d:%s", i, strings.Repeat("x", i%40))
		e := entry{algo: engine.Fixed, expires: int64(i) + 100, st: engine.State{T: int64(i), N: int64(i)}}
		tab.add([]byte(key), tagOf(xxhash.Sum64String(key)), &e)
		model[key] = toModel(&e)
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

// BenchmarkLogBatch is BenchmarkCheckBatch for the log algorithm, on keys
// of five entries, kept inline in their records.
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
	benchLogBatches(b, s, keys, p, now+10)
}

// BenchmarkLogBatchTen is BenchmarkLogBatch for keys of ten entries six
// seconds apart, whose records are 88 bytes and often span two cache
// lines.
func BenchmarkLogBatchTen(b *testing.B) {
	s := New(0)
	p := engine.Params{Limit: 1000, Window: 3600e9}
	now := int64(1_700_000_000e9)
	keys := make([][]byte, 100000)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("key:%012d", i))
	}
	for j := 0; j < 10; j++ {
		for _, k := range keys {
			s.Check(k, engine.Log, p, 1, now+int64(j)*6e9)
		}
	}
	now += 60e9
	benchLogBatches(b, s, keys, p, now)
}

// benchLogBatches peeks (cost 0) at the log keys in batches of 16 in a
// fixed random order, with and without Prefetch, at time now.
func benchLogBatches(b *testing.B, s *Store, keys [][]byte, p engine.Params, now int64) {
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
					s.Check(k, engine.Log, p, 0, now)
				}
			}
		})
	}
}

// BenchmarkLogRandom measures RL.CHECK key:N log 100 60 on 100,000 keys
// in uniform random order, one check at a time, with the clock advancing
// so that a key holds about the given number of entries in its window (the
// server benchmark's workload). The store is warmed for two windows first
// and stays warm across the benchmark's runs. It reports the store's
// memory per key, free space not yet compacted included.
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
			b.ReportMetric(float64(s.MemoryBytes())/float64(len(keys)), "B/key")
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
