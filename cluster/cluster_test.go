package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlserver/rlserver/cluster/transport"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/testseed"
	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/shards"
	"github.com/rlserver/rlserver/slots"
)

// testCluster is n nodes of one cluster in this process, each with a data
// directory of its own, on 127.0.0.1 ports.
type testCluster struct {
	t     *testing.T
	mu    sync.Mutex // guards nodes against the load's readers (any, byRESP)
	nodes []*Cluster
	cfgs  []ClusterConfig
	dirs  []string
	disks []*Storage
}

// freePorts reserves n distinct ports on 127.0.0.1.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var lns []net.Listener
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}

// testSecret is the cluster secret of the test clusters, so that every
// test runs the transport's authentication.
const testSecret = "cluster-test-secret"

// testLogger returns the logger of node id: stderr at Info with
// RL_TEST_LOG set, else nil (discard).
func testLogger(id string) *slog.Logger {
	if os.Getenv("RL_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", id)
}

// startCluster starts n nodes and waits until every slot is served.
func startCluster(t *testing.T, n, groups int, mode Consistency) *testCluster {
	t.Helper()
	return startClusterWith(t, n, groups, mode, nil)
}

// startClusterWith is startCluster with mod applied to every node's
// configuration.
func startClusterWith(t *testing.T, n, groups int, mode Consistency, mod func(*ClusterConfig)) *testCluster {
	t.Helper()
	raftAddrs := freePorts(t, n)
	var peers []Peer
	for i := 0; i < n; i++ {
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), Raft: raftAddrs[i]})
	}
	tc := &testCluster{t: t}
	for i := 0; i < n; i++ {
		cfg := ClusterConfig{NodeID: peers[i].ID, RaftAddr: raftAddrs[i], RESPAddr: fmt.Sprintf("127.0.0.1:%d", 20000+i),
			Peers: peers, Groups: groups, Durability: Durability{Consistency: mode, FlushInterval: 2 * time.Millisecond},
			Secret:           testSecret,
			HeartbeatTimeout: 150 * time.Millisecond, ElectionTimeout: 150 * time.Millisecond, LeaderLeaseTimeout: 100 * time.Millisecond,
			NewStore: func(int) *shards.Store { return shards.New(8) }}
		if mod != nil {
			mod(&cfg)
		}
		cfg.Logger = testLogger(peers[i].ID)
		tc.cfgs = append(tc.cfgs, cfg)
		tc.dirs = append(tc.dirs, t.TempDir())
		tc.nodes = append(tc.nodes, nil)
		tc.disks = append(tc.disks, nil)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = tc.open(i)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(tc.close)
	tc.waitBalanced(60 * time.Second) // seconds when idle; a busy machine's missed heartbeats move leads meanwhile
	return tc
}

func (tc *testCluster) open(i int) error {
	disk, err := OpenStorage(tc.dirs[i], StorageOptions{NodeID: tc.cfgs[i].NodeID})
	if err != nil {
		return err
	}
	cfg := tc.cfgs[i]
	cfg.Storage = disk
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := OpenCluster(ctx, cfg)
	if err != nil {
		disk.Close()
		return err
	}
	c.Listening()
	tc.mu.Lock()
	tc.nodes[i], tc.disks[i] = c, disk
	tc.mu.Unlock()
	return disk.MarkInitialised()
}

func (tc *testCluster) close() {
	for i, c := range tc.nodes {
		if c != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			c.Close(ctx)
			cancel()
			tc.disks[i].Close()
			tc.mu.Lock()
			tc.nodes[i] = nil
			tc.mu.Unlock()
		}
	}
}

// kill stops node i as a crash would: no flush, no hand-over.
func (tc *testCluster) kill(i int) {
	c := tc.nodes[i]
	close(c.shutdownCh)
	c.stopRafts()
	c.mux.Close()
	// A crashed process runs nothing more; here the node's goroutines
	// must end before its database closes (a watcher rebuilding a group
	// from the log would read a closed one).
	c.wg.Wait()
	tc.disks[i].Close()
	tc.mu.Lock()
	tc.nodes[i] = nil
	tc.mu.Unlock()
}

// waitServed waits until every live node sees a leader for every slot
// and every group is served by one live node.
func (tc *testCluster) waitServed(d time.Duration) {
	tc.t.Helper()
	testutil.WaitFor(tc.t, d, "every slot served", func() bool {
		for _, c := range tc.nodes {
			if c != nil && !c.View().OK {
				return false
			}
		}
		return tc.servedOnce(false)
	})
}

// waitBalanced waits until every group is served by its preferred
// leader, so that no leadership moves during a test.
func (tc *testCluster) waitBalanced(d time.Duration) {
	tc.t.Helper()
	tc.waitServed(d)
	testutil.WaitFor(tc.t, d, "leaders balanced", func() bool { return tc.servedOnce(true) })
}

// servedOnce reports whether every group is served by exactly one live
// node (its preferred leader, if preferred is set).
func (tc *testCluster) servedOnce(preferred bool) bool {
	c0 := tc.any()
	place := c0.placement()
	for g := 1; g <= c0.numGroups(); g++ {
		n := 0
		for _, c := range tc.nodes {
			if c == nil || c.replica(g) == nil || !c.replica(g).phase.serving() {
				continue
			}
			n++
			if preferred && place[g][0] != c.cfg.NodeID {
				return false
			}
		}
		if n != 1 {
			return false
		}
	}
	return true
}

// byRESP returns the live node whose client address is addr.
func (tc *testCluster) byRESP(addr string) *Cluster {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	for _, c := range tc.nodes {
		if c != nil && c.cfg.RESPAddr == addr {
			return c
		}
	}
	return nil
}

// check runs a check on the node that serves key, following MOVED and
// retrying TRYAGAIN/CLUSTERDOWN as a cluster client does, until deadline.
// In strong mode it returns, as the server replies, only once the check's
// change is committed; if the change may have been lost (the group's lead
// moved first), it returns that error.
func (tc *testCluster) check(key string, a engine.Algo, p engine.Params, cost int64, deadline time.Time) (engine.Result, error) {
	c := tc.any()
	for {
		r, err := c.Check([]byte(key), a, p, cost, time.Now().UnixNano())
		var moved *MovedError
		switch {
		case err == nil && c.Strong():
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			err = c.app.wait(c.Pending(), ctx.Done())
			cancel()
			return r, err
		case err == nil:
			return r, nil
		case errors.As(err, &moved):
			if next := tc.byRESP(moved.Addr); next != nil {
				c = next
				continue
			}
		case !Transient(err) && !errors.Is(err, ErrClusterDown) && !errors.Is(err, ErrLostLead):
			return r, err
		}
		if time.Now().After(deadline) {
			return r, err
		}
		time.Sleep(2 * time.Millisecond)
		c = tc.any()
	}
}

// settle waits for check's change to be committed on the node that made
// it (all live nodes), as a strong-mode reply does.
func (tc *testCluster) settle() {
	for _, c := range tc.nodes {
		if c != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			c.Sync(ctx)
			cancel()
		}
	}
}

// leadsLost sums the leads the live nodes lost without handing them over.
func (tc *testCluster) leadsLost() int64 {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	var n uint64
	for _, c := range tc.nodes {
		if c != nil {
			n += c.app.leadsLost.Load()
		}
	}
	return int64(n)
}

func (tc *testCluster) any() *Cluster {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	for _, c := range tc.nodes {
		if c != nil {
			return c
		}
	}
	tc.t.Fatal("no live node")
	return nil
}

// TestClusterRoutesAndConverges: three nodes, 8 groups. Every key is
// served by exactly one node (the others answer MOVED to it); after
// concurrent load on all six algorithms, every group's replicas have
// applied the same entries and hold the same state.
func TestClusterRoutesAndConverges(t *testing.T) {
	for _, mode := range []Consistency{Fast, Strong} {
		t.Run(mode.String(), func(t *testing.T) {
			tc := startCluster(t, 3, 8, mode)
			for i := 0; i < 200; i++ {
				key := []byte(fmt.Sprint("route:", i))
				served := 0
				for _, c := range tc.nodes {
					_, err := c.Check(key, engine.Fixed, hour, 0, time.Now().UnixNano())
					var moved *MovedError
					switch {
					case err == nil:
						served++
					case errors.As(err, &moved):
						if moved.Slot != slots.Of(key) || tc.byRESP(moved.Addr) == nil {
							t.Fatalf("%s: %v", key, err)
						}
					default:
						t.Fatalf("%s: %v", key, err)
					}
				}
				if served != 1 {
					t.Fatalf("%s served by %d nodes", key, served)
				}
			}
			load(t, tc, 16, 400)
			tc.settle()
			assertConverged(t, tc)
		})
	}
}

// load runs clients goroutines, each making n random checks of all six
// algorithms, resets and throttles through the cluster.
func load(t *testing.T, tc *testCluster, clients, n int) {
	seed := testseed.Rand(t).Uint64()
	algos := []engine.Algo{engine.Fixed, engine.Sliding, engine.Log, engine.Token, engine.Leaky, engine.GCRA}
	var wg sync.WaitGroup
	var failed atomic.Value
	for g := 0; g < clients; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			for i := 0; i < n; i++ {
				k := rng.IntN(300)
				a := algos[k%len(algos)]
				p := engine.Params{Limit: 1 + rng.Int64N(20), Window: (1 + rng.Int64N(10)) * 1e9}
				_, err := tc.check(fmt.Sprint("load:", k), a, p, rng.Int64N(3), time.Now().Add(5*time.Second))
				if errors.Is(err, ErrLostLead) && tc.leadsLost() > 0 {
					continue // a lead lost to a missed heartbeat: the outcome is unknown, the replicas converge all the same
				}
				if err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("load: %v", err)
	}
}

// assertConverged waits until every group's replicas report the same
// applied index, then compares their digests at one time.
func assertConverged(t *testing.T, tc *testCluster) {
	t.Helper()
	at := time.Now().UnixNano() // one time for every replica's digest
	testutil.WaitFor(t, 10*time.Second, "replicas to apply the same entries", func() bool {
		applied := map[int]uint64{}
		for _, c := range tc.nodes {
			if c == nil {
				continue
			}
			for _, gs := range c.status(0).Groups {
				if prev, ok := applied[gs.ID]; ok && prev != gs.Applied {
					return false
				}
				applied[gs.ID] = gs.Applied
			}
		}
		return true
	})
	digests := map[int]string{}
	keys := 0
	for _, c := range tc.nodes {
		if c == nil {
			continue
		}
		for _, gs := range c.status(at).Groups {
			if prev, ok := digests[gs.ID]; ok && prev != gs.Digest {
				t.Fatalf("group %d: replicas differ: digest %s on one, %s on %s", gs.ID, prev, gs.Digest, c.cfg.NodeID)
			}
			digests[gs.ID] = gs.Digest
			if gs.State == "Leader" {
				keys += gs.Keys
			}
		}
	}
	if keys == 0 {
		t.Fatal("no keys: the comparison proves nothing")
	}
}

// TestFailoverForgetsNothingStrong: in strong mode, 200 keys charged 5
// times each (fixed, 5 per 366 days: see noRollover), then the node
// leading the most groups crashes: once the others lead every group, every
// key's sixth check is denied.
func TestFailoverForgetsNothingStrong(t *testing.T) {
	tc := startCluster(t, 3, 8, Strong)
	p := engine.Params{Limit: 5, Window: noRollover}
	for i := 0; i < 200; i++ {
		// Charge the key until a reply says it is spent: five allowed, or
		// fewer and then a denial when a TRYAGAIN (a lead lost to a missed
		// heartbeat on a busy machine) left a charge's outcome unknown.
		for acked := 1; ; acked++ {
			r, err := tc.check(fmt.Sprint("k", i), engine.Fixed, p, 1, time.Now().Add(5*time.Second))
			switch {
			case errors.Is(err, ErrLostLead) && tc.leadsLost() > 0:
				acked--
				continue
			case err != nil || acked > 5 && r.Allowed:
				t.Fatalf("k%d check %d: %+v %v", i, acked, r, err)
			}
			if !r.Allowed || r.Remaining == 0 {
				break
			}
		}
	}
	tc.settle()
	victim := tc.mostLeader()
	start := time.Now()
	tc.kill(victim)
	for i := 0; i < 200; i++ {
		r, err := tc.check(fmt.Sprint("k", i), engine.Fixed, p, 1, start.Add(10*time.Second))
		for errors.Is(err, ErrLostLead) && tc.leadsLost() > 0 && time.Since(start) < 10*time.Second {
			r, err = tc.check(fmt.Sprint("k", i), engine.Fixed, p, 1, start.Add(10*time.Second)) // a denial charges nothing: ask again
		}
		if err != nil || r.Allowed {
			t.Fatalf("k%d sixth check after the crash: %+v %v: a charge was forgotten", i, r, err)
		}
	}
	took := time.Since(start)
	t.Logf("every key served again %v after the crash of the node leading the most groups", took.Round(time.Millisecond))
	// The goal is 2 s (heartbeat timeout 150 ms); the bound holds on a busy
	// machine and still catches a failover that waits for a timeout of its
	// own (a lease, a dial) or never comes.
	if took > 6*time.Second {
		t.Errorf("full service took %v after the crash; want at most 6 s (goal 2 s, heartbeat timeout 150ms)", took)
	}
}

// mostLeader returns the index of the live node that leads the most groups.
func (tc *testCluster) mostLeader() int {
	best, most := 0, -1
	for i, c := range tc.nodes {
		if c == nil {
			continue
		}
		n := 0
		for _, g := range c.hostedGroups() {
			if g != nil && g.phase.serving() {
				n++
			}
		}
		if n > most {
			best, most = i, n
		}
	}
	return best
}

// TestCheckRulesAcrossGroups: a user rule and an ip rule whose counters
// live in different groups; 32 concurrent clients spread over the three
// nodes check both, 10 times each (fixed windows of 366 days: see
// noRollover). With a narrower user rule (50 against 70) exactly 50 are
// admitted, whatever the interleaving: the narrower rule is charged first,
// so the wider one sees only what it admitted and never denies. With equal
// limits (50 and 50) a charge given back may turn a concurrent request
// away: at least 50-31 are admitted (the documented bound, limit less the
// other requests in flight), never more than 50. Either way the ip rule's
// counter is charged once per admission. A lead lost to a missed heartbeat
// meanwhile (a machine too busy for the tests' lease) skips the counts: a
// check answered TRYAGAIN after it may or may not have charged (it once
// admitted 52, once charged the ip rule 27 times for 20 admissions).
func TestCheckRulesAcrossGroups(t *testing.T) {
	for _, tt := range []struct {
		name            string
		userLim, ipLim  int64
		atLeast, atMost int64
	}{
		{"narrower user rule", 50, 70, 50, 50},
		{"equal limits", 50, 50, 50 - 31, 50},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := startCluster(t, 3, 8, Fast)
			c0 := tc.nodes[0]
			for _, r := range []rules.Rule{
				{ID: "per-user", Target: "*", Tier: "*", KeyType: "user", Algo: "fixed", Limit: tt.userLim, Window: noRolloverRule},
				{ID: "per-ip", Target: "*", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: tt.ipLim, Window: noRolloverRule},
			} {
				if _, err := c0.SetRule(r); err != nil {
					t.Fatal(err)
				}
			}
			user, ip := "u1", "10.0.0.1"
			if c0.groupOf(slots.Of([]byte("per-user:"+user))) == c0.groupOf(slots.Of([]byte("per-ip:"+ip))) {
				t.Fatal("the two counters share a group: pick other values")
			}
			testutil.WaitFor(t, 5*time.Second, "the rules on every node", func() bool {
				for _, c := range tc.nodes {
					if c.RuleCount() != 2 {
						return false
					}
				}
				return true
			})
			lostBefore := tc.leadsLost()
			var admitted, unknown atomic.Int64
			var wg sync.WaitGroup
			for g := 0; g < 32; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := tc.nodes[g%3]
					for i := 0; i < 10; i++ {
						q := &rules.Query{}
						q.Reset()
						q.Target, q.Tier, q.Cost = []byte("/x"), []byte("free"), 1
						q.AddID([]byte("user"), []byte(user))
						q.AddID([]byte("ip"), []byte(ip))
						for {
							err := c.CheckRules(q, time.Now().UnixNano())
							if err == nil {
								break
							}
							if !strings.HasPrefix(err.Error(), "TRYAGAIN") {
								t.Errorf("CheckRules: %v", err)
								return
							}
							if errors.Is(err, ErrLostLead) {
								unknown.Add(1) // charged or not: the retry may charge again
							}
							time.Sleep(time.Millisecond)
						}
						if q.Allowed {
							admitted.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			got := admitted.Load()
			t.Logf("admitted %d of 320 (limits %d and %d)", got, tt.userLim, tt.ipLim)
			// A lead lost to a missed heartbeat (a fault: the machine too
			// busy for the tests' 100 ms lease) answers TRYAGAIN with the
			// outcome unknown, and fast mode may forget what the lost
			// leader acknowledged: the exact counts hold only without one.
			if lost := tc.leadsLost() - lostBefore; lost > 0 {
				t.Skipf("%d leads lost to missed heartbeats, %d checks answered with the outcome unknown: fast mode's bounds after a fault apply (TestClusterKill9FastBounded), not this test's exact counts", lost, unknown.Load())
			}
			if got < tt.atLeast || got > tt.atMost {
				t.Fatalf("admitted %d of 320, want %d to %d", got, tt.atLeast, tt.atMost)
			}
			r, err := tc.check("per-ip:"+ip, engine.Fixed, engine.Params{Limit: tt.ipLim, Window: noRollover}, 0, time.Now().Add(5*time.Second))
			if err != nil || r.Remaining != tt.ipLim-got {
				t.Fatalf("the ip rule's counter: %+v %v, want %d remaining (charged once per admission)", r, err, tt.ipLim-got)
			}
		})
	}
}

// TestJoinAndLeaveUnderLoad: three nodes in strong mode serve a steady
// load while a fourth joins and then one of the first three leaves. The
// load sees no error but redirects and retries (MOVED, TRYAGAIN); every
// admission acknowledged is counted at the end; the fourth node leads
// groups, the one that left holds none and is forgotten.
func TestJoinAndLeaveUnderLoad(t *testing.T) {
	tc := startCluster(t, 3, 8, Strong)
	lostBefore := tc.leadsLost()
	l := startStrongLoad(tc, "jl")
	// A fourth node joins through node 1.
	tc.add(t, func(ctx context.Context, me NodeInfo) (int, error) { return tc.nodes[0].Join(ctx, me) })
	testutil.WaitFor(t, 30*time.Second, "the new node to lead groups", func() bool { return leads(tc.nodes[3]) > 0 })
	t.Logf("%s: n4 leads groups; n2 leaves", time.Now().Format("15:04:05.000"))
	// Node 2 leaves.
	if err := tc.nodes[1].Leave(context.Background(), "n2"); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "n2 to hold no group and be forgotten", func() bool {
		_, known := tc.nodes[0].meta.Current().Nodes["n2"]
		return len(tc.nodes[1].hostedGroups()) == 0 && !known
	})
	t.Logf("%s: n2 left", time.Now().Format("15:04:05.000"))
	l.stop()
	if f := l.fails.Load(); f > 0 {
		t.Errorf("%d checks failed (after retrying for 10s) while the nodes moved; the first: %v", f, l.firstErr.Load())
	}
	// A planned move loses no lead: a change in flight is committed before
	// the lead is handed over. Only a lead lost to a missed heartbeat (a
	// fault: the machine too busy for the tests' 100 ms lease) may answer
	// TRYAGAIN with the outcome unknown.
	switch lost, unplanned := l.lostLead.Load(), tc.leadsLost()-lostBefore; {
	case lost > 0 && unplanned == 0:
		t.Errorf("%d checks answered %v while the nodes moved, and no lead was lost unplanned", lost, ErrLostLead)
	case lost > 0:
		t.Logf("%d checks answered TRYAGAIN (outcome unknown) after %d leads were lost to missed heartbeats, not to the moves", lost, unplanned)
	}
	tc.kill(1) // n2 left; stop it
	tc.waitServed(10 * time.Second)
	total, _ := l.assertCounted(t)
	if total < 300 {
		t.Fatalf("only %d admissions during the moves: the test proves little", total)
	}
	t.Logf("%d admissions acknowledged while a node joined and another left; every one counted", total)
	for _, c := range tc.nodes {
		if c != nil {
			t.Logf("%s leads %d groups, hosts %d", c.cfg.NodeID, leads(c), len(c.hostedGroups()))
		}
	}
	// The balancer spreads the leads again (every 2s, a group at most every
	// 5s); leads lost to missed heartbeats on a loaded machine may have left
	// the joined node with fewer for a while (a fresh-clone run: n4 led 1
	// when the load stopped, after 2 such losses).
	testutil.WaitFor(t, 30*time.Second, "the node that joined to lead at least 2 groups of 8",
		func() bool { return leads(tc.nodes[3]) >= 2 })
}

// leads returns the groups c serves.
func leads(c *Cluster) int {
	n := 0
	for _, g := range c.hostedGroups() {
		if g.phase.serving() {
			n++
		}
	}
	return n
}

// add starts one more node, which joins the cluster with join.
func (tc *testCluster) add(t *testing.T, join func(context.Context, NodeInfo) (int, error)) {
	i := len(tc.nodes)
	cfg := tc.cfgs[0]
	cfg.NodeID, cfg.Peers, cfg.Join = fmt.Sprintf("n%d", i+1), nil, join
	if cfg.Logger != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", cfg.NodeID)
	}
	cfg.RaftAddr = freePorts(t, 1)[0]
	cfg.RaftAdvertise = ""
	cfg.RESPAddr = fmt.Sprintf("127.0.0.1:%d", 20000+i)
	tc.cfgs = append(tc.cfgs, cfg)
	tc.dirs = append(tc.dirs, t.TempDir())
	tc.mu.Lock()
	tc.nodes = append(tc.nodes, nil)
	tc.mu.Unlock()
	tc.disks = append(tc.disks, nil)
	if err := tc.open(i); err != nil {
		t.Fatal(err)
	}
}

// TestProxyServesEveryKeyOnEveryNode: with Proxy, every node answers every
// key, forwarding the keys of groups it does not lead, and the counts are
// exact: 12 clients, four on each node, charge 30 keys of all six
// algorithms (limit 100 per 366 days, see noRollover; 5 checks each per
// client): every check is allowed and each key ends with exactly 60
// charged. Should a lead be lost to a missed heartbeat (a machine too busy
// for the tests' 100 ms lease), strong mode may answer TRYAGAIN with the
// outcome unknown — a key then holds between its acknowledged and its
// attempted charges, never more (a forwarded change is not run twice) — and
// fast mode may forget what the lost leader acknowledged last.
func TestProxyServesEveryKeyOnEveryNode(t *testing.T) {
	for _, mode := range []Consistency{Fast, Strong} {
		t.Run(mode.String(), func(t *testing.T) {
			tc := startClusterWith(t, 3, 8, mode, func(c *ClusterConfig) { c.Proxy = true })
			algos := []engine.Algo{engine.Fixed, engine.Sliding, engine.Log, engine.Token, engine.Leaky, engine.GCRA}
			p := engine.Params{Limit: 100, Window: noRollover}
			var wg sync.WaitGroup
			var denied, failed atomic.Int64
			var unsure [30]atomic.Int64 // TRYAGAIN after a lost lead: the outcome is unknown
			var firstErr atomic.Value
			for w := 0; w < 12; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := tc.nodes[w%3]
					for i := 0; i < 5; i++ {
						for k := 0; k < 30; k++ {
							r, err := c.Check([]byte(fmt.Sprint("px:", k)), algos[k%6], p, 1, time.Now().UnixNano())
							if err == nil && mode == Strong {
								// A key served here is answered at once; the
								// server holds the reply until it is committed.
								ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
								err = c.Sync(ctx)
								cancel()
							}
							switch {
							case errors.Is(err, ErrLostLead):
								unsure[k].Add(1)
							case err != nil:
								failed.Add(1)
								firstErr.CompareAndSwap(nil, err.Error())
							case !r.Allowed:
								denied.Add(1)
							}
						}
					}
				}()
			}
			wg.Wait()
			if failed.Load() > 0 || denied.Load() > 0 {
				t.Fatalf("%d checks failed (the first: %v) and %d were denied; want every one allowed", failed.Load(), firstErr.Load(), denied.Load())
			}
			tc.settle()
			lost := tc.leadsLost()
			for k := 0; k < 30; k++ {
				u := unsure[k].Load()
				if u > 0 && lost == 0 {
					t.Fatalf("px:%d: %d checks answered TRYAGAIN, and no lead was lost", k, u)
				}
				for _, c := range tc.nodes {
					r, err := c.Check([]byte(fmt.Sprint("px:", k)), algos[k%6], p, 0, time.Now().UnixNano())
					if err != nil {
						t.Fatalf("px:%d on %s: %v", k, c.cfg.NodeID, err)
					}
					charged, acked := 100-r.Remaining, 60-u
					switch {
					case lost == 0 && charged != 60:
						t.Fatalf("px:%d on %s: %+v, want 40 remaining (60 charged)", k, c.cfg.NodeID, r)
					case charged > 60:
						t.Fatalf("px:%d on %s: %d charged of 60 checks: a change ran twice", k, c.cfg.NodeID, charged)
					case mode == Strong && charged < acked:
						t.Fatalf("px:%d on %s: %d charged, %d acknowledged: strong mode forgot one", k, c.cfg.NodeID, charged, acked)
					case charged != 60:
						t.Logf("px:%d on %s: %d charged of 60 (%d acknowledged) after %d leads lost to missed heartbeats", k, c.cfg.NodeID, charged, acked, lost)
					}
				}
			}
		})
	}
}

// TestRaftListenerRefusesStrangers: with a secret, a node's Raft listener
// serves no internal call (here: a rule's creation through the meta
// group) to a caller without it or with another, and the rule is not
// created; the same call with the secret creates it.
func TestRaftListenerRefusesStrangers(t *testing.T) {
	tc := startCluster(t, 3, 2, Fast)
	addr := tc.nodes[0].RaftAddr().String()
	body := []byte(`{"op":"rule.set","rule":{"id":"via-raft-port","target":"*","tier":"*","key_type":"ip","algo":"fixed","limit":1,"window":"1h"}}`)
	for _, secret := range []string{"", "guess"} {
		m, err := transport.Listen("127.0.0.1:0", transport.Options{Secret: secretBytes(secret)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = m.Call(ctx, addr, callMetaApply, body)
		cancel()
		m.Close()
		if !errors.Is(err, transport.ErrUnreachable) {
			t.Fatalf("secret %q: meta.apply answered %v, want ErrUnreachable", secret, err)
		}
	}
	for _, c := range tc.nodes {
		for _, r := range c.Rules() {
			if r.ID == "via-raft-port" {
				t.Fatalf("node %s holds the rule a stranger sent", c.cfg.NodeID)
			}
		}
	}
	m, err := transport.Listen("127.0.0.1:0", transport.Options{Secret: []byte(testSecret)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if rep, err := m.Call(ctx, addr, callMetaApply, body); err != nil || !strings.Contains(string(rep), `"err":""`) {
		t.Fatalf("a caller with the secret: %s, %v", rep, err)
	}
	testutil.WaitFor(t, 5*time.Second, "the rule sent with the secret on every node", func() bool {
		for _, c := range tc.nodes {
			found := false
			for _, r := range c.Rules() {
				found = found || r.ID == "via-raft-port"
			}
			if !found {
				return false
			}
		}
		return true
	})
}

// TestUnplannedLeadLossForgetsNothingStrong: in strong mode, leads move
// under load behind the nodes' backs — raft's own leadership transfer,
// which the applier and the watcher learn of only when entries fail and
// raft reports the new leader, as after a missed heartbeat. Every
// admission a client was told of is counted at the end; a check whose
// outcome was unknown (TRYAGAIN) is counted at most once.
func TestUnplannedLeadLossForgetsNothingStrong(t *testing.T) {
	tc := startCluster(t, 3, 8, Strong)
	l := startStrongLoad(tc, "ul")
	moves := 0
	for round := 0; round < 12; round++ {
		time.Sleep(150 * time.Millisecond)
		for _, c := range tc.nodes {
			for _, g := range c.hostedGroups() {
				if g != nil && g.phase.serving() && round%len(tc.nodes) == int(g.id)%len(tc.nodes) {
					if g.raft.LeadershipTransfer().Error() == nil {
						moves++
					}
				}
			}
		}
	}
	time.Sleep(300 * time.Millisecond)
	l.stop()
	if moves == 0 {
		t.Fatal("no lead moved: the test proves nothing")
	}
	if err := l.firstErr.Load(); err != nil {
		t.Logf("besides TRYAGAIN, checks failed with: %v", err)
	}
	tc.waitServed(10 * time.Second)
	total, unsure := l.assertCounted(t)
	t.Logf("%d leads moved behind the nodes' backs; %d admissions acknowledged, %d outcomes unknown; every acknowledged one counted", moves, total, unsure)
}

// strongLoad is 8 workers checking 40 keys each (fixed, no limit in
// practice) in a loop through a test cluster in strong mode, each waiting
// for its check to be committed, and what they were told: admissions
// acknowledged, and outcomes unknown (TRYAGAIN after a lost lead, or
// another error after retrying for 10 s).
type strongLoad struct {
	tc       *testCluster
	prefix   string
	counts   [8][40]struct{ ok, unsure int64 }
	done     chan struct{}
	wg       sync.WaitGroup
	fails    atomic.Int64 // errors other than ErrLostLead
	lostLead atomic.Int64
	firstErr atomic.Value
}

// startStrongLoad starts a strongLoad on keys prefix:w:k.
func startStrongLoad(tc *testCluster, prefix string) *strongLoad {
	l := &strongLoad{tc: tc, prefix: prefix, done: make(chan struct{})}
	for w := range l.counts {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.done:
					return
				default:
				}
				k := i % len(l.counts[w])
				r, err := tc.check(l.key(w, k), engine.Fixed, strongLoadParams, 1, time.Now().Add(10*time.Second))
				c := &l.counts[w][k]
				switch {
				case errors.Is(err, ErrLostLead):
					c.unsure++
					l.lostLead.Add(1)
				case err != nil:
					c.unsure++
					l.fails.Add(1)
					l.firstErr.CompareAndSwap(nil, fmt.Sprintf("%s at %s", err, time.Now().Format("15:04:05.000")))
				case r.Allowed:
					c.ok++
				}
			}
		}()
	}
	return l
}

// strongLoadParams: a limit no test reaches, in a window that does not
// end during one (see noRollover).
var strongLoadParams = engine.Params{Limit: 1 << 40, Window: noRollover}

// noRollover is the window of the fixed and sliding keys of the tests that
// run on the wall clock: the longest, 366 days (noRolloverRule as a rule's
// window). Those windows are aligned to the Unix epoch, so a test whose
// charges and checks straddle a window's end sees its counts reset:
// TestJoinAndLeaveUnderLoad failed so in CI when its one-hour window ended
// at 07:00:00 UTC mid-test ("jl:0:0 is charged 13, but 29 admissions were
// acknowledged"). The next 366-day boundary is 2027-02-13; the chance that
// a test straddles one is its length over 366 days. Token, leaky and gcra
// keys refill at limit per 366 days: nothing during a test.
const (
	noRollover     = engine.MaxWindow
	noRolloverRule = "366d"
)

func (l *strongLoad) key(w, k int) string { return fmt.Sprintf("%s:%d:%d", l.prefix, w, k) }

// stop stops the workers and waits for them.
func (l *strongLoad) stop() {
	close(l.done)
	l.wg.Wait()
}

// assertCounted fails t unless every key is charged at least the
// admissions acknowledged and at most those and the unknown outcomes;
// it returns the admissions acknowledged and the outcomes unknown.
func (l *strongLoad) assertCounted(t *testing.T) (acked, unsure int64) {
	t.Helper()
	for w := range l.counts {
		for k := range l.counts[w] {
			r, err := l.tc.check(l.key(w, k), engine.Fixed, strongLoadParams, 0, time.Now().Add(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			used, c := strongLoadParams.Limit-r.Remaining, l.counts[w][k]
			if used < c.ok || used > c.ok+c.unsure {
				t.Errorf("%s is charged %d, but %d admissions were acknowledged (%d unsure)", l.key(w, k), used, c.ok, c.unsure)
			}
			acked, unsure = acked+c.ok, unsure+c.unsure
		}
	}
	return acked, unsure
}
