package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/testseed"
	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/shards"
)

// storage is a Raft group's storage that outlives the nodes opened on it,
// as a data directory does.
type storage struct {
	logs   raft.LogStore
	stable raft.StableStore
	snaps  raft.SnapshotStore
}

func memStorage() *storage {
	return &storage{logs: raft.NewInmemStore(), stable: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()}
}

// fakeClock is a settable clock for entries and checks.
type fakeClock struct{ ns atomic.Int64 }

func newClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(1_750_000_000e9)
	return c
}
func (c *fakeClock) now() int64            { return c.ns.Load() }
func (c *fakeClock) advance(d int64) int64 { return c.ns.Add(d) }

func open(t testing.TB, st *storage, clock *fakeClock, mod func(*Config)) *Node {
	t.Helper()
	cfg := Config{Store: shards.New(16), Logs: st.logs, Stable: st.stable, Snapshots: st.snaps,
		Durability: Durability{Clock: clock.now, FlushInterval: time.Millisecond}}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return n
}

func closeNode(t testing.TB, n *Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

var hour = engine.Params{Limit: 10, Window: 3600e9}

// TestRestartKeepsState: 7 checks of fixed 10 per hour, a clean stop, a
// new node on the same storage: the next check has 2 remaining. Rules
// survive too.
func TestRestartKeepsState(t *testing.T) {
	st, clock := memStorage(), newClock()
	n := open(t, st, clock, nil)
	for i := 0; i < 7; i++ {
		if r, err := n.Check([]byte("k"), engine.Fixed, hour, 1, clock.now()); err != nil || !r.Allowed {
			t.Fatalf("check %d: %+v %v", i, r, err)
		}
	}
	if _, err := n.SetRule(rules.Rule{ID: "r", Target: "*", Tier: "*", KeyType: "ip", Algo: "token", Limit: 5, Window: "1m"}); err != nil {
		t.Fatal(err)
	}
	closeNode(t, n)
	n = open(t, st, clock, nil)
	defer closeNode(t, n)
	r, err := n.Check([]byte("k"), engine.Fixed, hour, 1, clock.now())
	if err != nil || r.Remaining != 2 {
		t.Fatalf("after restart: remaining %d (err %v), want 2", r.Remaining, err)
	}
	if _, ok := n.Rule("r"); !ok {
		t.Fatal("the rule did not survive the restart")
	}
}

// TestReplayReproducesState: 32 goroutines run every kind of change while
// the applier flushes; after a clean stop, a fresh node replaying the log
// from its first entry holds the same state, byte for byte (digest).
func TestReplayReproducesState(t *testing.T) {
	st, clock := memStorage(), newClock()
	n := open(t, st, clock, func(c *Config) { c.SnapshotEntries = 1 << 40 })
	randomLoad(t, n, clock, 300, 1500)
	closeNode(t, n)
	end := clock.now()
	if n.Len() == 0 {
		t.Fatal("no state: the test proves nothing")
	}
	replica := open(t, st, clock, nil)
	defer closeNode(t, replica)
	for _, at := range []int64{end, end + 10e9} {
		if got, live := replica.Digest(at), n.Digest(at); got != live {
			t.Fatalf("replayed digest at +%ds %x, live %x (%d vs %d keys)", (at-end)/1e9, got, live, replica.Len(), n.Len())
		}
	}
}

// randomLoad runs 32 goroutines, each making perG random changes through n
// to keys of nkeys names, with a replayable seed.
func randomLoad(t *testing.T, n *Node, clock *fakeClock, nkeys, perG int) {
	keys := make([][]byte, nkeys)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("key:%03d", i))
	}
	seed := testseed.Rand(t).Uint64()
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			for i := 0; i < perG; i++ {
				randomChange(rng, n, keys, clock.advance(rng.Int64N(2e5)))
			}
		}(g)
	}
	wg.Wait()
}

// randomChange runs one random state change through n at now.
func randomChange(rng *rand.Rand, n *Node, keys [][]byte, now int64) {
	algos := []engine.Algo{engine.Fixed, engine.Sliding, engine.Log, engine.Token, engine.Leaky, engine.GCRA}
	k := keys[rng.IntN(len(keys))]
	a := algos[int(k[len(k)-1])%len(algos)]
	p := engine.Params{Limit: 1 + rng.Int64N(20), Window: (1 + rng.Int64N(10)) * 1e9}
	switch x := rng.IntN(1000); {
	case x < 800:
		n.Check(k, a, p, rng.Int64N(3), now)
	case x < 850:
		n.Throttle(k, rng.Int64N(10), 1+rng.Int64N(20), 1+rng.Int64N(5), rng.Int64N(3), now)
	case x < 900:
		n.Reset(k, now)
	case x < 980:
		q := &rules.Query{}
		q.Reset()
		q.Target, q.Tier, q.Cost = []byte("/api"), []byte("free"), 1
		q.AddID([]byte("user"), k)
		n.CheckRules(q, now)
	case x < 995:
		n.SetRule(rules.Rule{ID: fmt.Sprint("r", rng.IntN(3)), Target: "*", Tier: "*", KeyType: "user",
			Algo: a.String(), Limit: 5 + rng.Int64N(10), Window: "10s"})
	case x < 998:
		n.DeleteRule(fmt.Sprint("r", rng.IntN(3)))
	default:
		n.Flush()
	}
}

// TestSnapshotThenTail: state restored from a snapshot and the entries
// after it equals the state before the stop, and the log was compacted.
func TestSnapshotThenTail(t *testing.T) {
	st, clock := memStorage(), newClock()
	n := open(t, st, clock, func(c *Config) { c.TrailingLogs = 1 })
	p := engine.Params{Limit: 1000, Window: 3600e9}
	for i := 0; i < 200; i++ {
		n.Check([]byte(fmt.Sprint("a", i)), engine.Token, p, 1, clock.advance(1e6))
	}
	syncNode(t, n)
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		n.Check([]byte(fmt.Sprint("a", i)), engine.Token, p, 2, clock.advance(1e6))
		n.Check([]byte(fmt.Sprint("b", i)), engine.Log, p, 1, clock.advance(1e6))
	}
	closeNode(t, n)
	first, _ := st.logs.FirstIndex()
	if first <= 1 {
		t.Fatalf("first log index %d: the snapshot did not compact the log", first)
	}
	m := open(t, st, clock, nil)
	defer closeNode(t, m)
	if d1, d2 := n.Digest(clock.now()), m.Digest(clock.now()); d1 != d2 || m.Len() != 300 {
		t.Fatalf("restored %d keys, digest %x, want 300 keys and %x", m.Len(), d2, d1)
	}
}

func syncNode(t testing.TB, n *Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

// TestCommittedCoversEarlierChanges: Pending after a change is committed
// only once an entry holding that change is in the log.
func TestCommittedCoversEarlierChanges(t *testing.T) {
	st, clock := memStorage(), newClock()
	n := open(t, st, clock, func(c *Config) { c.FlushInterval = time.Hour; c.Consistency = Strong })
	defer closeNode(t, n)
	n.Check([]byte("k"), engine.Fixed, hour, 1, clock.now())
	seq := n.Pending()
	if ok, err := n.Committed(seq); ok || err != nil {
		t.Fatalf("committed before any flush (ok %v, err %v)", ok, err)
	}
	before, _ := st.logs.LastIndex()
	done := make(chan struct{})
	n.OnCommit(func() {
		if ok, _ := n.Committed(seq); ok {
			select {
			case <-done:
			default:
				close(done)
			}
		}
	})
	n.Kick()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no commit after Kick")
	}
	after, _ := st.logs.LastIndex()
	var l raft.Log
	if after <= before || st.logs.GetLog(after, &l) != nil {
		t.Fatalf("log went from %d to %d entries", before, after)
	}
	e, err := decodeEntry(l.Data)
	if err != nil || e.origin != n.fsm.origin.Load() {
		t.Fatalf("last entry: %v (origin %x, node %x)", err, e.origin, n.fsm.origin.Load())
	}
	r := shards.New(1)
	if _, err := r.ApplyRecords(e.records, e.now); err != nil || r.Len() != 1 {
		t.Fatalf("the entry does not hold the change: %d keys, %v", r.Len(), err)
	}
}

// failingLogs refuses StoreLogs while fail is set, as a full disk would;
// if hold is set, a refusal waits until hold is closed, as a slow disk's.
type failingLogs struct {
	raft.LogStore
	fail atomic.Bool
	hold chan struct{}
}

var errDiskFull = errors.New("no space left on device")

func (f *failingLogs) StoreLogs(logs []*raft.Log) error {
	if f.fail.Load() {
		if f.hold != nil {
			<-f.hold
		}
		return errDiskFull
	}
	return f.LogStore.StoreLogs(logs)
}

func (f *failingLogs) StoreLog(l *raft.Log) error { return f.StoreLogs([]*raft.Log{l}) }

// TestRefusedWrites: while the log refuses writes, waiting callers get
// MISCONF, and so do new changes; once it takes writes again, the changes
// made before are written and the node serves again.
func TestRefusedWrites(t *testing.T) {
	st, clock := memStorage(), newClock()
	logs := &failingLogs{LogStore: st.logs}
	st.logs = logs
	n := open(t, st, clock, nil)
	n.Check([]byte("before"), engine.Fixed, hour, 3, clock.now())
	syncNode(t, n)
	logs.fail.Store(true)
	n.Check([]byte("during"), engine.Fixed, hour, 4, clock.now())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Sync(ctx); !errors.Is(err, ErrPersistence) {
		t.Fatalf("Sync while the log refuses: %v, want ErrPersistence", err)
	}
	if _, err := n.Check([]byte("x"), engine.Fixed, hour, 1, clock.now()); !errors.Is(err, ErrPersistence) {
		t.Fatalf("Check while the log refuses: %v", err)
	}
	if info := n.PersistenceInfo(); !contains(info, "rl_log_status", "refusing") {
		t.Fatalf("INFO persistence: %v", info)
	}
	logs.fail.Store(false)
	testutil.WaitForErr(t, 10*time.Second, "the node to serve again once the log takes writes", n.refuse)
	syncNode(t, n)
	closeNode(t, n)
	m := open(t, st, clock, nil)
	defer closeNode(t, m)
	if r, _ := m.Check([]byte("during"), engine.Fixed, hour, 0, clock.now()); r.Remaining != 6 {
		t.Fatalf("the change made while the log refused: remaining %d, want 6", r.Remaining)
	}
}

// TestRefusedWritesBehindEmptyEpochs: epochs sealed with no change while
// a refused entry waits for the disk queue behind it; once the log takes
// the entry again, the node serves again (it once refused for good).
func TestRefusedWritesBehindEmptyEpochs(t *testing.T) {
	st, clock := memStorage(), newClock()
	logs := &failingLogs{LogStore: st.logs, hold: make(chan struct{})}
	st.logs = logs
	n := open(t, st, clock, nil)
	defer closeNode(t, n)
	syncNode(t, n)
	logs.fail.Store(true)
	n.Check([]byte("during"), engine.Fixed, hour, 4, clock.now())
	sealed := n.app.open.Load()
	deadline := time.Now().Add(10 * time.Second) // for the three waits
	testutil.WaitFor(t, time.Until(deadline), "epochs sealed behind the held entry", func() bool {
		if n.app.open.Load() >= sealed+3 { // the entry, then empty epochs
			return true
		}
		n.app.Kick()
		return false
	})
	close(logs.hold)
	testutil.WaitFor(t, time.Until(deadline), "the refused entry to be reported", func() bool {
		return n.refuse() != nil // the refusal reaches the applier
	})
	logs.fail.Store(false)
	testutil.WaitForErr(t, time.Until(deadline), "the node to serve again once the log takes writes", n.refuse)
	if r, err := n.Check([]byte("during"), engine.Fixed, hour, 0, clock.now()); err != nil || r.Remaining != 6 {
		t.Fatalf("after the log takes writes: remaining %d, %v; want 6", r.Remaining, err)
	}
}

func contains(kv []string, k, v string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == k {
			return kv[i+1] == v
		}
	}
	return false
}

// TestIdleApplierSleeps: a fast node whose store does not change seals no
// epochs (its applier sleeps instead of flushing every interval), and the
// first change after that is committed all the same, with no kick, as the
// ticker would have (the store's OnChange wakes the applier).
func TestIdleApplierSleeps(t *testing.T) {
	st, clock := memStorage(), newClock()
	n := open(t, st, clock, func(c *Config) { c.FlushInterval = 2 * time.Millisecond })
	defer closeNode(t, n)
	committed := func(what string) {
		t.Helper()
		seq := n.Pending()
		testutil.WaitFor(t, 10*time.Second, what+" to be committed without a kick", func() bool {
			ok, err := n.Committed(seq)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			return ok
		})
	}
	n.Check([]byte("a"), engine.Fixed, hour, 1, clock.now())
	committed("the first change")
	for range 3 {
		n.Check([]byte("b"), engine.Fixed, hour, 1, clock.now())
		committed("a change after a quiet spell")
		before := n.app.open.Load()
		time.Sleep(200 * time.Millisecond) // 100 flush intervals
		if after := n.app.open.Load(); after > before+2 {
			t.Fatalf("an idle node sealed %d epochs in 100 flush intervals", after-before)
		}
	}
}
