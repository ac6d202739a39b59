package shards

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rlserver/rlserver/engine"
)

// refundNow is a clock reading 840 s into an hour (1,700,000,040 s).
const refundNow = int64(1_700_000_040) * sec

// peekKey returns key's allowance under a and p without charging it.
func peekKey(t testing.TB, s *Store, key string, a engine.Algo, p engine.Params, now int64) engine.Result {
	t.Helper()
	r, err := s.Check([]byte(key), a, p, 0, now)
	if err != nil {
		t.Fatalf("peek %s: %v", key, err)
	}
	return r
}

// mustCheck charges key on s and fails unless the check is allowed.
func mustCheck(t testing.TB, s *Store, key string, a engine.Algo, p engine.Params, cost, now int64) {
	t.Helper()
	if r, err := s.Check([]byte(key), a, p, cost, now); err != nil || !r.Allowed {
		t.Fatalf("check %s cost %d: %+v, %v", key, cost, r, err)
	}
}

// refundOps returns the ops of TestRefundAllUndoesCheckAll for algorithm
// a: a key charged before, a new key, a shadow counter that is full (its
// op denies, so it is not charged) and a shadow counter with room.
func refundOps(a engine.Algo, p engine.Params) []Op {
	return []Op{
		{Key: []byte("old"), Algo: a, Params: p},
		{Key: []byte("new"), Algo: a, Params: p},
		{Key: []byte("shadow-full"), Algo: engine.Fixed, Params: engine.Params{Limit: 1, Window: 60 * sec}, Shadow: true},
		{Key: []byte("shadow-room"), Algo: a, Params: p, Shadow: true},
	}
}

// TestRefundAllUndoesCheckAll: for every algorithm, CheckAll then RefundAll
// leaves the store deciding as a twin store that never saw the check,
// given back at the instant of the charge, and for the window algorithms
// also later; a shadow op that denied is not given back; keys left as
// good as fresh are dropped; and a replica that applies the journal holds
// the same state.
func TestRefundAllUndoesCheckAll(t *testing.T) {
	for _, a := range algos {
		for _, later := range []int64{0, 1500e6} {
			if later > 0 && a.Bucket() {
				continue // later refunds of buckets may give back less: see the engine
			}
			t.Run(fmt.Sprintf("%v+%dms", a, later/1e6), func(t *testing.T) { undoCheckAll(t, a, later) })
		}
	}
}

func undoCheckAll(t *testing.T, a engine.Algo, later int64) {
	s, twin, replica := journaled(8), New(8), New(3)
	p := engine.Params{Limit: 5, Window: 60 * sec}
	ops := refundOps(a, p)
	for _, st := range []*Store{s, twin} {
		mustCheck(t, st, "old", a, p, 2, refundNow-10*sec)
		mustCheck(t, st, "shadow-full", engine.Fixed, ops[2].Params, 1, refundNow-10*sec)
	}
	at := refundNow - 10*sec + 3*sec // for the log: an entry other than old's
	ok, err := s.CheckAll(ops, 2, at)
	if !ok || err != nil || ops[2].Result.Allowed || !ops[3].Result.Allowed {
		t.Fatalf("CheckAll: %v, %v, %+v", ok, err, ops)
	}
	replay(t, s, replica, at)
	now := at + later
	if err := s.RefundAll(ops, 2, at, now); err != nil {
		t.Fatal(err)
	}
	if s.Len() != twin.Len() {
		t.Fatalf("%d keys after the refund, the twin %d: fresh keys not dropped", s.Len(), twin.Len())
	}
	replay(t, s, replica, now)
	if s.Digest(now) != replica.Digest(now) || replica.Len() != s.Len() {
		t.Fatalf("the replica holds another state (%d keys, %d on the leader)", replica.Len(), s.Len())
	}
	for _, step := range []int64{0, sec, 30 * sec, 61 * sec} {
		now += step
		for _, op := range ops {
			sameDecisions(t, s, twin, string(op.Key), op.Algo, op.Params, now)
		}
	}
}

// sameDecisions checks key on s and twin with cost 0 and then 1 until
// denied (at most 8 times), at now, and fails if any result differs.
func sameDecisions(t *testing.T, s, twin *Store, key string, a engine.Algo, p engine.Params, now int64) {
	t.Helper()
	for i, cost := range []int64{0, 1, 1, 1, 1, 1, 1, 1, 1} {
		got, err1 := s.Check([]byte(key), a, p, cost, now)
		want, err2 := twin.Check([]byte(key), a, p, cost, now)
		if got != want || err1 != nil || err2 != nil {
			t.Fatalf("%s (%v) check %d at +%dms: %+v (%v), the twin %+v (%v)", key, a, i, (now-refundNow)/1e6, got, err1, want, err2)
		}
		if cost > 0 && !got.Allowed {
			return
		}
	}
}

// TestRefundAllSkipsOtherKeys: a key reset and taken by another algorithm
// since the check is skipped, the rest given back; a key that Replace
// moved to the op's algorithm is given back (and, as fresh, dropped); a
// denied check and a check of cost 0 give nothing back; duplicate keys
// are an error.
func TestRefundAllSkipsOtherKeys(t *testing.T) {
	s := journaled(4)
	p := engine.Params{Limit: 5, Window: 60 * sec}
	mustCheck(t, s, "replaced", engine.Token, p, 1, refundNow)
	ops := []Op{
		{Key: []byte("kept"), Algo: engine.Fixed, Params: p},
		{Key: []byte("retyped"), Algo: engine.Fixed, Params: p},
		{Key: []byte("replaced"), Algo: engine.Fixed, Params: p, Replace: true},
	}
	if ok, err := s.CheckAll(ops, 2, refundNow); !ok || err != nil {
		t.Fatalf("CheckAll: %v %v", ok, err)
	}
	s.Reset([]byte("retyped"), refundNow)
	mustCheck(t, s, "retyped", engine.GCRA, p, 3, refundNow)
	if err := s.RefundAll(ops, 2, refundNow, refundNow); err != nil {
		t.Fatalf("RefundAll with a key of another type: %v", err)
	}
	if r := peekKey(t, s, "retyped", engine.GCRA, p, refundNow); r.Remaining != 2 {
		t.Fatalf("the retyped key was refunded: %+v", r)
	}
	if s.Len() != 1 {
		t.Fatalf("%d keys, want only retyped (kept and replaced as fresh)", s.Len())
	}
	// A denied check: kept has room, the narrow key denies.
	one := engine.Params{Limit: 1, Window: 60 * sec}
	mustCheck(t, s, "kept", engine.Fixed, p, 4, refundNow)
	mustCheck(t, s, "narrow", engine.Fixed, one, 1, refundNow)
	narrow := []Op{ops[0], {Key: []byte("narrow"), Algo: engine.Fixed, Params: one}}
	if ok, _ := s.CheckAll(narrow, 1, refundNow); ok || !narrow[0].Result.Allowed {
		t.Fatalf("the narrow check was allowed or reported kept's denial: %+v", narrow)
	}
	before := s.Digest(refundNow)
	if err := s.RefundAll(narrow, 1, refundNow, refundNow); err != nil || s.Digest(refundNow) != before {
		t.Fatalf("a denied check was given back: %v", err)
	}
	if err := s.RefundAll(ops[:1], 0, refundNow, refundNow); err != nil || s.Digest(refundNow) != before {
		t.Fatalf("a check of cost 0 was given back: %v", err)
	}
	dup := []Op{ops[0], ops[0]}
	if err := s.RefundAll(dup, 1, refundNow, refundNow); !errors.Is(err, ErrDuplicateKey) || s.Digest(refundNow) != before {
		t.Fatalf("duplicate keys: %v", err)
	}
}

// TestRefundAllConcurrent: goroutines run requests as a cluster's
// coordinator does: CheckAll on this store (a counter of every algorithm,
// limit 100 an hour, and a shadow counter that never denies), then a coin
// stands for a later group's decision (one in four allows), and a denied
// request is given back with RefundAll. The requests admitted in the end
// never exceed the limit, and the counters hold exactly them (when the
// clock moves, the refunds of the buckets, gcra and the log may fall
// short, so at least them; the log's because a shard's clock may be past
// the time its caller charged at). A replica that applied the journal
// meanwhile holds the same state. With a frozen clock every refund is
// exact.
func TestRefundAllConcurrent(t *testing.T) {
	seed := newRand(t).Uint64()
	for _, frozen := range []bool{true, false} {
		t.Run(fmt.Sprint("frozen=", frozen), func(t *testing.T) { concurrentRefunds(t, seed, frozen) })
	}
}

func concurrentRefunds(t *testing.T, seed uint64, frozen bool) {
	s, replica := journaled(16), New(4)
	p := engine.Params{Limit: 100, Window: 3600 * sec}
	shadow := engine.Params{Limit: 1000, Window: 3600 * sec}
	var clock atomic.Int64
	clock.Store(refundNow)
	tick := func() int64 {
		if frozen {
			return clock.Load()
		}
		return clock.Add(1000)
	}
	stop, collected := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(collected)
		for {
			select {
			case <-stop:
				return
			default:
				replay(t, s, replica, tick())
			}
		}
	}()
	var admitted, refunded atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			ops := make([]Op, 0, len(algos)+1)
			for _, a := range algos {
				ops = append(ops, Op{Key: []byte(a.String()), Algo: a, Params: p})
			}
			ops = append(ops, Op{Key: []byte("shadow"), Algo: engine.Fixed, Params: shadow, Shadow: true})
			for i := 0; i < 200; i++ {
				coordinate(t, rng, s, ops, tick, &admitted, &refunded)
			}
		}(g)
	}
	wg.Wait()
	close(stop)
	<-collected
	end := tick()
	n := admitted.Load()
	t.Logf("%d admitted, %d given back", n, refunded.Load())
	if n > p.Limit || n == 0 || refunded.Load() == 0 {
		t.Fatalf("%d admitted of limit %d, %d refunded", n, p.Limit, refunded.Load())
	}
	for _, a := range algos {
		r := peekKey(t, s, a.String(), a, p, end)
		exact := frozen || a == engine.Fixed || a == engine.Sliding
		if r.Remaining > p.Limit-n || (exact && r.Remaining != p.Limit-n) {
			t.Errorf("%v: %d remaining after %d admitted of %d", a, r.Remaining, n, p.Limit)
		}
	}
	if r := peekKey(t, s, "shadow", engine.Fixed, shadow, end); r.Remaining != shadow.Limit-n {
		t.Errorf("shadow: %d remaining after %d admitted", r.Remaining, n)
	}
	replay(t, s, replica, end)
	if s.Digest(end) != replica.Digest(end) {
		t.Fatal("the replica holds another state")
	}
}

// coordinate runs one request: CheckAll, a coin for the next group, and
// RefundAll if it denies.
func coordinate(t *testing.T, rng *rand.Rand, s *Store, ops []Op, tick func() int64, admitted, refunded *atomic.Int64) {
	at := tick()
	ok, err := s.CheckAll(ops, 1, at)
	if err != nil {
		t.Error(err)
		return
	}
	switch {
	case !ok:
	case rng.IntN(4) == 0:
		admitted.Add(1)
	default:
		if err := s.RefundAll(ops, 1, at, tick()); err != nil {
			t.Error(err)
		}
		refunded.Add(1)
	}
}

// TestRefundAllDoesNotAllocate: a CheckAll and its RefundAll on keys that
// keep state allocate nothing.
func TestRefundAllDoesNotAllocate(t *testing.T) {
	s := New(16)
	ops := make([]Op, len(algos))
	for i, a := range algos {
		ops[i] = Op{Key: []byte(fmt.Sprint("key", i)), Algo: a, Params: engine.Params{Limit: 1 << 20, Window: 60 * sec}}
	}
	s.CheckAll(ops, 1, refundNow) // kept: the refunds below leave this
	n := testing.AllocsPerRun(1000, func() {
		if ok, err := s.CheckAll(ops, 1, refundNow); !ok || err != nil {
			t.Fatal("denied")
		}
		if err := s.RefundAll(ops, 1, refundNow, refundNow); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("CheckAll and RefundAll allocate %v times per call", n)
	}
}
