package shards

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/rules"
)

// replay applies the changes collected from src at now to dst, as a
// replica or a restart would, and returns the number of records.
func replay(t testing.TB, src, dst *Store, now int64) int {
	t.Helper()
	b, n := src.AppendChanges(nil)
	m, err := dst.ApplyRecords(b, now)
	if err != nil || m != n {
		t.Fatalf("ApplyRecords: %d of %d records, err %v", m, n, err)
	}
	return n
}

func journaled(n int) *Store {
	s := New(n)
	s.EnableJournal()
	return s
}

// TestJournalWritesLogsOnce: a log key changed many times between two
// collections is one record with its latest state (it is listed, not
// encoded per change); a token key is a record per change (encoded while
// hot), until its shard's eager records pass maxEager, after which it too
// is listed once; an unchanged key is no record.
func TestJournalWritesLogsOnce(t *testing.T) {
	s, r := journaled(1), New(16)
	now := int64(1_700_000_000e9)
	p := engine.Params{Limit: 100, Window: 60e9}
	for i := 0; i < 10; i++ {
		s.Check([]byte("log"), engine.Log, p, 1, now+int64(i))
		s.Check([]byte("tok"), engine.Token, p, 1, now+int64(i))
	}
	if n := replay(t, s, r, now+10); n != 11 {
		t.Fatalf("%d records, want 11 (log once, token ten times)", n)
	}
	if n := replay(t, s, r, now+10); n != 0 {
		t.Fatalf("nothing changed, yet %d records", n)
	}
	res, _ := r.Check([]byte("log"), engine.Log, p, 0, now+10)
	if res.Remaining != 90 {
		t.Fatalf("replica: log has %d remaining, want 90", res.Remaining)
	}
	big := engine.Params{Limit: 1 << 40, Window: 3600e9}
	i := 0
	for ; !s.shards[0].lazy; i++ {
		s.Check([]byte("tok"), engine.Token, big, 1, now+20+int64(i))
	}
	for j := 0; j < 100; j++ {
		s.Check([]byte("tok"), engine.Token, big, 1, now+20+int64(i+j))
	}
	end := now + 20 + int64(i+100)
	if n := replay(t, s, r, end); n != i+1 {
		t.Fatalf("%d records, want %d eager ones and one for the key listed after", n, i)
	}
	if d1, d2 := s.Digest(end), r.Digest(end); d1 != d2 {
		t.Fatalf("replica digest %x, leader %x", d2, d1)
	}
}

// TestJournalDeletions: RL.RESET, a reset followed by a new state, a key
// dropped because a check left it as good as fresh, and FLUSHALL all
// reach the replica; an expired key dropped on access needs no record.
func TestJournalDeletions(t *testing.T) {
	s, r := journaled(4), New(4)
	now := int64(1_700_000_000e9)
	p := engine.Params{Limit: 10, Window: 60e9}
	for _, k := range []string{"a", "b", "c", "d"} {
		s.Check([]byte(k), engine.Token, p, 1, now)
	}
	replay(t, s, r, now)
	s.Reset([]byte("a"), now)
	s.Reset([]byte("b"), now)
	s.Check([]byte("b"), engine.Fixed, p, 3, now) // b again, another algorithm
	// c: a larger limit refills its bucket in 60 ms, well before its
	// stored expiry (6 s); a check that cannot pass (cost above the
	// capacity) leaves it full: dropped as fresh. (A peek changes
	// nothing at all.)
	at := now + 1e9
	s.Check([]byte("c"), engine.Token, engine.Params{Limit: 1000, Window: 60e9}, 2000, at)
	if n := replay(t, s, r, at); n != 4 {
		t.Fatalf("%d records, want 4 (a deleted, b deleted then set, c deleted)", n)
	}
	if d1, d2 := s.Digest(at), r.Digest(at); d1 != d2 {
		t.Fatalf("digests differ: %x vs %x", d1, d2)
	}
	if got, _ := r.Reset([]byte("a"), now); got {
		t.Fatal("a survived its RL.RESET on the replica")
	}
	if got, _ := r.Reset([]byte("c"), now); got {
		t.Fatal("c survived being dropped as fresh on the replica")
	}
	// d expires (refilled after 6 s); a check then drops it on access.
	later := now + 60e9
	s.Check([]byte("d"), engine.Token, p, 0, later)
	if n := replay(t, s, r, later); n != 0 {
		t.Fatalf("dropping expired state wrote %d records", n)
	}
	s.Check([]byte("e"), engine.Fixed, p, 1, later)
	s.Flush()
	s.Check([]byte("f"), engine.Fixed, p, 1, later)
	b, n := s.AppendChanges(nil)
	if n != 2 || b[0] != recFlushAll {
		t.Fatalf("after FLUSHALL: %d records starting with kind %d, want flush-all then f", n, b[0])
	}
	if _, err := r.ApplyRecords(b, later); err != nil {
		t.Fatal(err)
	}
	if r.Len() != 1 || s.Digest(later) != r.Digest(later) {
		t.Fatalf("replica holds %d keys (want f only) or digests differ", r.Len())
	}
}

// TestJournalRules: rule changes reach the replica in order, and FLUSHALL
// keeps them.
func TestJournalRules(t *testing.T) {
	s, r := journaled(2), New(2)
	rule := rules.Rule{ID: "r1", Target: "*", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 5, Window: "1m"}
	s.SetRule(rule)
	rule.Limit = 7
	s.SetRule(rule)
	s.SetRule(rules.Rule{ID: "r2", Target: "/x", Tier: "*", KeyType: "user", Algo: "gcra", Limit: 1, Window: "1s"})
	s.DeleteRule("r2")
	s.Flush()
	replay(t, s, r, 1e18)
	if got, ok := r.Rule("r1"); !ok || got.Limit != 7 || r.RuleCount() != 1 {
		t.Fatalf("replica rules: %v (r1 %+v), want r1 with limit 7 only", r.Rules(), got)
	}
}

// TestJournalReplicaMatchesRandomOps: random checks of every algorithm,
// throttles, resets, rule checks, rule changes and flushes on a journaled
// Store, collected at random moments and applied to a replica with
// another shard count: after the last collection both hold the same state,
// and so does a third Store restored from a snapshot of the first.
func TestJournalReplicaMatchesRandomOps(t *testing.T) {
	// One in 50 operations collects; with one collection at the end,
	// shards pass maxEager and list keys lazily.
	for _, every := range []int{50, 1 << 30} {
		t.Run(fmt.Sprint("collect every ", every), func(t *testing.T) { randomReplica(t, every) })
	}
}

func randomReplica(t *testing.T, every int) {
	rng := newRand(t)
	s, r := journaled(2), New(32)
	now := int64(1_700_000_000e9)
	keys := make([][]byte, 40)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("k%02d", i))
	}
	s.SetRule(rules.Rule{ID: "u", Target: "*", Tier: "*", KeyType: "user", Algo: "sliding", Limit: 20, Window: "10s"})
	lazy := false
	for step := 0; step < 40000; step++ {
		now += rng.Int64N(50e6)
		randomOp(rng, s, keys, now, every < 1000)
		lazy = lazy || s.shards[0].lazy || s.shards[1].lazy
		if rng.IntN(every) == 0 {
			replay(t, s, r, now)
		}
	}
	if every > 1000 && !lazy {
		t.Fatal("no shard went lazy: the test misses that path")
	}
	replay(t, s, r, now)
	for _, at := range []int64{now, now + 5e9, now + 3600e9} {
		if d1, d2 := s.Digest(at), r.Digest(at); d1 != d2 {
			t.Fatalf("digest at +%ds: leader %x, replica %x", (at-now)/1e9, d1, d2)
		}
	}
	c := New(4)
	c.ApplyRecords(snapshotRecords(s, now), now)
	if d1, d2 := s.Digest(now), c.Digest(now); d1 != d2 {
		t.Fatalf("restored from records: digest %x, want %x", d2, d1)
	}
}

// snapshotRecords returns the records of every rule and live key of s.
func snapshotRecords(s *Store, now int64) []byte {
	b, _ := s.AppendRules(nil)
	for i := 0; i < s.Shards(); i++ {
		b, _ = s.AppendShard(i, b, now)
	}
	return b
}

var (
	algos  = []engine.Algo{engine.Fixed, engine.Sliding, engine.Log, engine.Token, engine.Leaky, engine.GCRA}
	params = []engine.Params{{Limit: 5, Window: 1e9}, {Limit: 40, Window: 10e9}, {Limit: 3, Window: 2e9, Burst: 6}}
)

// randomOp runs one random operation on s at now; FLUSHALL only if
// flushes.
func randomOp(rng *rand.Rand, s *Store, keys [][]byte, now int64, flushes bool) {
	k := keys[rng.IntN(len(keys))]
	switch x := rng.IntN(100); {
	case x < 70:
		// Each key keeps one algorithm (by its index) so that most checks
		// are not WRONGTYPE; parameters and costs vary.
		a := algos[int(k[2]-'0')%len(algos)]
		p := params[rng.IntN(len(params))]
		if !a.Bucket() {
			p.Burst = 0
		}
		s.Check(k, a, p, rng.Int64N(4), now)
	case x < 78:
		s.Throttle(k, rng.Int64N(10), 1+rng.Int64N(20), 1+rng.Int64N(5), rng.Int64N(3), now)
	case x < 84:
		s.Reset(k, now)
	case x < 94:
		q := &rules.Query{}
		q.Reset()
		q.Target, q.Tier, q.Cost = []byte("/a"), []byte("free"), 1
		q.AddID([]byte("user"), k)
		s.CheckRules(q, now)
	case x < 97:
		s.SetRule(rules.Rule{ID: "u", Target: "*", Tier: "*", KeyType: "user",
			Algo: []string{"sliding", "token"}[rng.IntN(2)], Limit: 10 + rng.Int64N(20), Window: "10s"})
	case x < 98:
		s.DeleteRule("u")
	case x < 99 && flushes:
		s.Flush()
	default:
		s.Sweep(now, 8)
	}
}

// TestJournalConcurrent: 32 goroutines change a journaled Store while a
// collector applies its changes to a replica, as the flusher does; after a
// last collection the replica holds the same state.
func TestJournalConcurrent(t *testing.T) {
	s, r := journaled(16), New(16)
	base := int64(1_700_000_000e9)
	keys := make([][]byte, 200)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("k%03d", i))
	}
	var clock sync.Mutex
	now := base
	tick := func() int64 {
		clock.Lock()
		defer clock.Unlock()
		now += 1e5
		return now
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				replay(t, s, r, tick())
			}
		}
	}()
	var wg sync.WaitGroup
	seed := newRand(t).Uint64()
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			for i := 0; i < 2000; i++ {
				randomOp(rng, s, keys, tick(), true)
			}
		}(g)
	}
	wg.Wait()
	close(stop)
	<-done
	end := tick()
	replay(t, s, r, end)
	if d1, d2 := s.Digest(end), r.Digest(end); d1 != d2 {
		t.Fatalf("digest: leader %x, replica %x (%d vs %d keys)", d1, d2, s.Len(), r.Len())
	}
}

// TestJournaledCheckDoesNotAllocate: listing changes costs no allocation
// once the journal's buffer has grown.
func TestJournaledCheckDoesNotAllocate(t *testing.T) {
	s := journaled(1)
	now := int64(1_700_000_000e9)
	keys := make([][]byte, 64)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("key:%02d", i))
	}
	p := engine.Params{Limit: 1 << 30, Window: 3600e9}
	var buf []byte
	round := func() {
		for _, k := range keys {
			now++
			s.Check(k, engine.Token, p, 1, now)
		}
		buf, _ = s.AppendChanges(buf[:0])
	}
	round()
	if n := testing.AllocsPerRun(100, round); n != 0 {
		t.Fatalf("%v allocations per round of 64 checks and a collection", n)
	}
}

// TestApplyRecordsRejectsCorruptInput: truncated and unknown records are
// errors that say where, never a panic.
func TestApplyRecordsRejectsCorruptInput(t *testing.T) {
	s := journaled(2)
	now := int64(1_700_000_000e9)
	s.Check([]byte("k"), engine.Log, engine.Params{Limit: 5, Window: 60e9}, 2, now)
	s.SetRule(rules.Rule{ID: "r", Target: "*", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 5, Window: "1m"})
	good, total := s.AppendChanges(nil)
	for cut := 1; cut < len(good); cut++ {
		// A cut between two records is valid input of fewer records.
		if n, err := New(1).ApplyRecords(good[:cut], now); err == nil && n >= total {
			t.Fatalf("records cut at %d of %d bytes: %d records and no error", cut, len(good), n)
		}
	}
	for _, bad := range [][]byte{{0}, {9}, {recSet, 1, 'k', 0, 7}, {recRuleSet, 2, '{', '}'}} {
		if _, err := New(1).ApplyRecords(bad, now); err == nil {
			t.Fatalf("%v: no error", bad)
		}
	}
}

// FuzzApplyRecords: any input is applied or refused without a panic, and
// what is applied can be written out and read back to the same state.
func FuzzApplyRecords(f *testing.F) {
	s := journaled(2)
	now := int64(1_700_000_000e9)
	for i, a := range algos {
		s.Check([]byte{'k', byte('0' + i)}, a, engine.Params{Limit: 5, Window: 60e9}, 2, now)
	}
	s.Reset([]byte("k0"), now)
	seed, _ := s.AppendChanges(nil)
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		r := New(2)
		r.ApplyRecords(b, now)
		c := New(4)
		if _, err := c.ApplyRecords(snapshotRecords(r, now), now); err != nil {
			t.Fatalf("records written by a Store do not apply: %v", err)
		}
		if c.Digest(now) != r.Digest(now) {
			t.Fatal("round trip changed the state")
		}
	})
}

// TestJournalFlushInTransaction: FLUSHALL inside MULTI/EXEC reaches the
// replica like FLUSHALL outside it, ordered with the changes around it.
func TestJournalFlushInTransaction(t *testing.T) {
	s, r := journaled(4), New(4)
	now := int64(1_700_000_000e9)
	p := engine.Params{Limit: 10, Window: 60e9}
	s.Check([]byte("before"), engine.Fixed, p, 1, now)
	replay(t, s, r, now)
	s.Transact(TxPlan{All: true}, func(tx *Tx) {
		tx.Check([]byte("dropped"), engine.Fixed, p, 1, now)
		if err := tx.Flush(); err != nil {
			t.Fatal(err)
		}
		tx.Check([]byte("kept"), engine.Fixed, p, 1, now)
	})
	b, n := s.AppendChanges(nil)
	if n != 2 || b[0] != recFlushAll {
		t.Fatalf("%d records starting with kind %d, want flush-all then kept", n, b[0])
	}
	if _, err := r.ApplyRecords(b, now); err != nil || r.Len() != 1 || s.Digest(now) != r.Digest(now) {
		t.Fatalf("replica: %d keys, err %v, or another digest", r.Len(), err)
	}
}

// BenchmarkJournaledCheckRandom is BenchmarkCheckRandom's token case with
// the journal on and collected every 3,000 checks (a 5 ms flush interval
// at 600,000 checks per second), so that the difference between the two is
// what journaling costs a check.
func BenchmarkJournaledCheckRandom(b *testing.B) {
	for _, journal := range []bool{false, true} {
		b.Run(fmt.Sprint("journal=", journal), func(b *testing.B) {
			s := New(0)
			if journal {
				s.EnableJournal()
			}
			p := engine.Params{Limit: 1 << 40, Window: 60e9}
			now := int64(1_700_000_000e9)
			keys := make([][]byte, 100000)
			for i := range keys {
				keys[i] = []byte(fmt.Sprintf("key:%012d", i))
				s.Check(keys[i], engine.Token, p, 1, now)
			}
			var buf []byte
			buf, _ = s.AppendChanges(buf[:0])
			order := rand.New(rand.NewPCG(1, 2)).Perm(len(keys))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.Check(keys[order[i%len(order)]], engine.Token, p, 1, now+int64(i))
				if journal && i%3000 == 2999 {
					buf, _ = s.AppendChanges(buf[:0])
				}
			}
		})
	}
}

// TestJournalEvictions: keys evicted under MaxMemory are gone on the
// replica too, so both hold the same state.
func TestJournalEvictions(t *testing.T) {
	s := NewStore(Options{Shards: 2, MaxMemory: 64 << 10, Policy: VolatileTTL})
	s.EnableJournal()
	r := New(8)
	now := int64(1_700_000_000e9)
	for i := 0; i < 20000; i++ {
		s.Check([]byte(fmt.Sprintf("key:%06d", i)), engine.Token, engine.Params{Limit: 100, Window: 3600e9}, 1, now+int64(i))
		if i%500 == 499 {
			replay(t, s, r, now+int64(i))
		}
	}
	end := now + 20000
	replay(t, s, r, end)
	if s.Evicted() == 0 {
		t.Fatal("nothing was evicted: the test proves nothing")
	}
	if r.Len() != s.Len() || s.Digest(end) != r.Digest(end) {
		t.Fatalf("after %d evictions: replica %d keys, leader %d, or another digest", s.Evicted(), r.Len(), s.Len())
	}
}

// TestOnChangeOncePerCollection: OnChange's fn runs at the journal's first
// change after a collection began — a check, a reset of a key in another
// shard, a rule change, a flush — and not again until the next collection.
func TestOnChangeOncePerCollection(t *testing.T) {
	s := journaled(4)
	calls := 0
	s.OnChange(func() { calls++ })
	now := int64(1_700_000_000e9)
	p := engine.Params{Limit: 100, Window: 60e9}
	changes := []func(){
		func() { s.Check([]byte("a"), engine.Token, p, 1, now) },
		func() {
			for i := range 64 { // some land in another shard than "a"
				s.Check(fmt.Appendf(nil, "k%d", i), engine.Token, p, 1, now)
			}
			s.Reset([]byte("a"), now)
		},
		func() {
			if _, err := s.SetRule(rules.Rule{ID: "r", Target: "*", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 1, Window: "1s"}); err != nil {
				t.Fatal(err)
			}
		},
		func() { s.Flush() },
	}
	for i, change := range changes {
		change()
		change()
		if calls != i+1 {
			t.Fatalf("change %d: fn ran %d times in all, want %d", i, calls, i+1)
		}
		if _, n := s.AppendChanges(nil); n == 0 {
			t.Fatalf("change %d: nothing collected", i)
		}
	}
	s.AppendChanges(nil)
	if calls != len(changes) {
		t.Fatalf("a collection with nothing to collect ran fn: %d calls", calls)
	}
	s.OnChange(nil)
	s.Check([]byte("b"), engine.Token, p, 1, now)
	if calls != len(changes) {
		t.Fatalf("fn ran after OnChange(nil)")
	}
}
