package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/rlproc"
	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/slots"
)

// churnCount returns $name as a count, or def.
func churnCount(t *testing.T, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive count", name, v)
		}
		return n
	}
	return def
}

// assertNoPanic fails the test if a node's log holds a panic or a fatal
// error.
func assertNoPanic(t *testing.T, p *proc) {
	t.Helper()
	logs := p.logs.String()
	for _, bad := range []string{"panic:", "fatal error:", "SIGSEGV"} {
		if strings.Contains(logs, bad) {
			t.Fatalf("node at %s: %q in its log:\n%s", p.resp, bad, logs)
		}
	}
}

// keyPerGroup returns a key in each of groups groups' slot ranges.
func keyPerGroup(groups int) []string {
	out := make([]string, groups)
	found := 0
	for i := 0; found < groups; i++ {
		k := fmt.Sprintf("churn:%d", i)
		g := slots.Of([]byte(k)) * groups / slots.Count
		if out[g] == "" {
			out[g] = k
			found++
		}
	}
	return out
}

// TestClusterStartsNeverCrash: a new three-node cluster is started
// $RLSERVER_CHURN_STARTS times (3 by default; TestLongClusterStarts, in
// make test-long, 30); each time every node
// starts without a crash, every group gets a leader, a key of every group
// is checked through a ClusterClient with default options without an
// error, and the nodes stop with SIGTERM and exit 0. (Two of five new
// clusters lost a node on their first start before the node refused
// internal calls until its groups were open.)
func TestClusterStartsNeverCrash(t *testing.T) {
	alone(t)
	testClusterStarts(t, churnCount(t, "RLSERVER_CHURN_STARTS", 3))
}

// TestLongClusterStarts is TestClusterStartsNeverCrash with 30 new
// clusters: make test-long runs it.
func TestLongClusterStarts(t *testing.T) {
	testutil.LongOnly(t)
	testClusterStarts(t, churnCount(t, "RLSERVER_CHURN_STARTS", 30))
}

// testClusterStarts starts a new three-node cluster n times.
func testClusterStarts(t *testing.T, n int) {
	bin := buildBinary(t)
	keys := keyPerGroup(8)
	var took []time.Duration
	for round := 0; round < n; round++ {
		start := time.Now()
		procs := startNodes(t, bin, 3, 8)
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: respAddrs(procs)})
		for _, k := range keys {
			if err := c.Do(context.Background(), "RL.CHECK", k, "fixed", 10, "1m").Err(); err != nil {
				t.Fatalf("start %d: RL.CHECK %s: %v", round+1, k, err)
			}
		}
		took = append(took, time.Since(start))
		c.Close()
		for _, p := range procs {
			p.stop()
			assertNoPanic(t, p)
		}
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("%d new clusters: every node up and a key of every group checked %v after start (median; max %v)",
		n, took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
}

// TestClusterRestartsNeverCrash: three nodes in strong mode under a steady
// load from a ClusterClient with default options; each node in turn is
// stopped — kill -9 and SIGTERM alternating — and started again with
// --data-dir alone, $RLSERVER_CHURN_RESTARTS times each (2 by default,
// so that each node is killed once and stopped once; 30 in
// TestLongClusterRestarts, which make test-long runs).
// Every restart must come up without a crash and serve again (every group
// led by a node that serves it, the restarted node answering), every exit
// after SIGTERM is 0, and at the end no acknowledged admission is lost
// (strong mode): each key is charged at least what was acknowledged, and
// in all at most that plus the checks whose outcome the client could not
// know (an error, or one in flight at a kill, which go-redis retries).
// The errors the client sees are reported by kind of restart, with how
// long after the stop the last one came: the failover window as a default
// client sees it.
func TestClusterRestartsNeverCrash(t *testing.T) {
	alone(t)
	testClusterRestarts(t, churnCount(t, "RLSERVER_CHURN_RESTARTS", 2))
}

// TestLongClusterRestarts is TestClusterRestartsNeverCrash with 30
// restarts of each node: make test-long runs it.
func TestLongClusterRestarts(t *testing.T) {
	testutil.LongOnly(t)
	testClusterRestarts(t, churnCount(t, "RLSERVER_CHURN_RESTARTS", 30))
}

// testClusterRestarts restarts each of three nodes under load n times.
func testClusterRestarts(t *testing.T, n int) {
	bin := buildBinary(t)
	procs := clusterProcs(t, bin, 3, "--consistency", "strong")
	addrs := respAddrs(procs)
	ph := &phases{}
	load := startGoLoad(t, "churn", addrs, churnWorkers, 120, 2*time.Millisecond)
	var stops []time.Time
	var kinds []string
	for round := 0; round < n; round++ {
		for i := range procs {
			kind := "sigterm"
			if (round*len(procs)+i)%2 == 0 {
				kind = "kill"
			}
			ph.begin(fmt.Sprintf("%s %d of n%d", kind, round+1, i+1))
			stops, kinds = append(stops, time.Now()), append(kinds, kind)
			if kind == "kill" {
				procs[i].kill()
			} else {
				procs[i].stop()
			}
			assertNoPanic(t, procs[i])
			dumpLogs(t, fmt.Sprintf("n%d-%02d", i+1, round), procs[i])
			procs[i] = restartProc(t, procs[i])
			testutil.WaitFor(t, 20*time.Second, fmt.Sprintf("n%d serving again after %s %d", i+1, kind, round+1), func() bool {
				r, err := report(procs[i], "")
				return err == nil && r.OK && r.ServedWithout("") && len(r.Errors) == 0
			})
			if kind == "kill" {
				// The client's retries of checks it sent the killed node
				// may fail a little after it is back: they are the kill's.
				// After failed dials go-redis's pool answers its last dial
				// error until a background dial, once a second, succeeds:
				// a quiet second and a half, so that none of those is
				// taken for the next SIGTERM's.
				if !load.quiet(1500*time.Millisecond, 6*time.Second) {
					t.Logf("the client still saw errors 6 s after kill %d of n%d: later ones count as the next restart's", round+1, i+1)
				}
			}
		}
	}
	time.Sleep(time.Second)
	res := load.stop()
	for _, p := range procs {
		assertNoPanic(t, p)
	}
	last := map[int]time.Duration{} // restart → its last error, after the stop
	errs := map[string]int{}
	for _, e := range res.errs {
		j := sort.Search(len(stops), func(j int) bool { return stops[j].After(e.at) }) - 1
		if j < 0 {
			t.Errorf("an error before any restart: %s", e.err)
			continue
		}
		if errs[kinds[j]]++; errs[kinds[j]] <= 5 {
			t.Logf("error %v after %s (%s): %s%s", e.at.Sub(stops[j]).Round(time.Millisecond), ph.of(e.at),
				e.at.Format("15:04:05.000"), e.err, whose(addrs, e.err))
		}
		last[j] = max(last[j], e.at.Sub(stops[j]))
	}
	var killWindows []time.Duration
	for j, d := range last {
		if kinds[j] == "kill" {
			killWindows = append(killWindows, d)
		}
	}
	sort.Slice(killWindows, func(i, j int) bool { return killWindows[i] < killWindows[j] })
	total, maybe := assertNothingLost(t, addrs, res, countOf(kinds, "kill"), churnWorkers)
	t.Logf("%d restarts (%d kill -9, %d SIGTERM), %d checks, %d admissions acknowledged, all counted (%d more charged, of %d unknown outcomes)",
		len(stops), countOf(kinds, "kill"), countOf(kinds, "sigterm"), res.checks, total, maybe, len(res.errs))
	t.Logf("errors seen by the client: after SIGTERM %d, after kill -9 %d", errs["sigterm"], errs["kill"])
	if len(killWindows) > 0 {
		t.Logf("kill -9 restarts with errors: %d of %d; last error after the kill: median %v, max %v",
			len(killWindows), countOf(kinds, "kill"), killWindows[len(killWindows)/2].Round(time.Millisecond),
			killWindows[len(killWindows)-1].Round(time.Millisecond))
	}
	if errs["sigterm"] > 0 {
		t.Errorf("the client saw %d errors after SIGTERMs: a planned restart must show none", errs["sigterm"])
	}
}

// whose names the node whose address err names, if any: " (n2's address)".
func whose(addrs []string, err string) string {
	for k, a := range addrs {
		if strings.Contains(err, a) {
			return fmt.Sprintf(" (n%d's address)", k+1)
		}
	}
	return ""
}

// dumpLogs writes p's log to $RLSERVER_TEST_DUMP/name.log, if set, and
// the time the test's errors are stamped with.
func dumpLogs(t *testing.T, name string, p *proc) {
	if dir := os.Getenv("RLSERVER_TEST_DUMP"); dir != "" {
		os.WriteFile(filepath.Join(dir, name+".log"), []byte(p.logs.String()), 0o644)
	}
}

// churnWorkers is the number of goroutines of the restarts' load.
const churnWorkers = 6

func countOf(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// TestKill9WindowAsDefaultClientsSeeIt measures what an unplanned loss
// costs the clients users run with their default options: three nodes in
// strong mode, go-redis's ClusterClient and redis-py's RedisCluster at a
// steady rate, and the node leading the most groups killed with SIGKILL
// and left down. go-redis may see errors only within kill9Window of the
// kill (the failover, then the MOVED that tells it to reload its slot
// map: see server.Nudger). redis-py 4.3.4 (Debian 12's python3-redis)
// cannot reload its map while a node it knew is down (NodesManager.
// initialize deep-copies its connection arguments, which hold the client
// itself, lock included: "cannot pickle '_thread.lock' object"), so it
// fails the lost node's slots until the node returns: its errors are
// logged, not asserted, and the README says so.
func TestKill9WindowAsDefaultClientsSeeIt(t *testing.T) {
	alone(t)
	bin := buildBinary(t)
	procs := clusterProcs(t, bin, 3, "--consistency", "strong")
	addrs := respAddrs(procs)
	goL := startGoLoad(t, "go", addrs, 6, 120, 2*time.Millisecond)
	pyL := startPyLoad(t, "py", addrs, 60, 300)
	time.Sleep(time.Second)
	victim := mostLeader(t, procs)
	killed := time.Now()
	procs[victim].kill()
	served := waitServedBy(t, procs[(victim+1)%3], procs[victim].resp, killed.Add(10*time.Second))
	time.Sleep(5 * time.Second)
	results := []loadResult{goL.stop(), pyL.stop()}
	t.Logf("every group led by a live node %v after the kill", served.Sub(killed).Round(time.Millisecond))
	for _, r := range results {
		var last time.Duration
		for _, e := range r.errs {
			last = max(last, e.at.Sub(killed))
		}
		t.Logf("%s: %d checks, %d errors after the kill, the last %v after it", r.name, r.checks, len(r.errs), last.Round(time.Millisecond))
		for i, e := range r.errs {
			if i < 3 {
				t.Logf("  %v %s", e.at.Sub(killed).Round(time.Millisecond), e.err)
			}
		}
		if r.name == "go" && last > kill9Window {
			t.Errorf("go-redis saw errors until %v after the kill, beyond the %v the README states", last, kill9Window)
		}
	}
}

// kill9Window bounds how long after a kill -9 a go-redis ClusterClient
// with default options may see errors (README, "Failover").
const kill9Window = 3 * time.Second

// TestIdleCPU: idle processes cost little. A three-node cluster of 16
// groups (make cluster's) with no clients: each node's CPU must stay under
// idleCPUBound of one core. A single durable node, fast or strong, with no
// clients (after some checks, so that its applier has had changes to
// write and gone quiet since): under idleNodeCPUBound; its applier and
// disk guard sleep while nothing changes, and raft's lease check runs
// twice a second. The five processes are measured over the same 5 s,
// each its own CPU (/proc/<pid>/stat): idle, they do not disturb each
// other's figure, and one window takes the time of one. A new cluster
// settles over its first half minute (leads balanced, first snapshots:
// on the 2-core machine each node used 8-9 % of a core in its first 5 s,
// 6-7 % 10 to 15 s in, 4-6 % 35 to 40 s in), so the window opens 10 s
// after it formed. The figures are logged (the closing note of issue 17
// quotes them).
func TestIdleCPU(t *testing.T) {
	alone(t)
	bin := buildBinary(t)
	var idle []idleProc
	cluster := clusterProcsN(t, bin, 3, 16)
	formed := time.Now()
	for i, p := range cluster {
		idle = append(idle, idleProc{p, fmt.Sprintf("cluster node n%d", i+1), idleCPUBound})
	}
	for _, mode := range []string{"fast", "strong"} {
		p := startProc(t, bin, t.TempDir(), "--consistency", mode, "--grpc", "", "--disk-ballast", "0")
		for i := range 100 {
			p.do("RL.CHECK", fmt.Sprintf("idle:%d", i), "token", 100, 60)
		}
		idle = append(idle, idleProc{p, "the single " + mode + " node", idleNodeCPUBound})
	}
	// The single nodes' disk guard pollers go quiet after a second.
	time.Sleep(max(time.Until(formed.Add(10*time.Second)), 2*time.Second))
	assertIdleCPU(t, idle)
}

// idleProc is a process TestIdleCPU measures: its name in the log and
// its bound, as a share of a core.
type idleProc struct {
	p     *proc
	name  string
	bound float64
}

// assertIdleCPU measures each process's CPU (/proc/<pid>/stat) over 5 s
// and fails the test for each that used more than its bound of one core.
func assertIdleCPU(t *testing.T, procs []idleProc) {
	t.Helper()
	const window = 5 * time.Second
	before := make([]time.Duration, len(procs))
	for i, ip := range procs {
		before[i] = rlproc.CPUOf(ip.p.process.Pid())
	}
	time.Sleep(window)
	for i, ip := range procs {
		share := float64(rlproc.CPUOf(ip.p.process.Pid())-before[i]) / float64(window)
		t.Logf("%s idle: %.2f%% of a core", ip.name, 100*share)
		if share > ip.bound {
			t.Errorf("%s used %.2f%% of a core idle, more than %.0f%%", ip.name, 100*share, 100*ip.bound)
		}
	}
}

// idleNodeCPUBound bounds an idle single node's CPU, as a share of a core.
// Measured on the development machine (2 cores, busy with other work):
// about 0.2-0.4%, where it was 1.1-2.2% before the applier and the disk
// guard slept while idle (an idle redis-server: well under 1%). The bound
// leaves room for a busy CI machine: it catches a loop that spins or polls
// faster than the applier's old 10 ms pace, not a small regression (the
// figure is logged for that).
const idleNodeCPUBound = 0.02

// idleCPUBound bounds an idle cluster node's CPU, as a share of a core.
// Measured on 2026-11-29, quiet: 5.6-7 % of a core 10-15 s after the
// cluster formed (TestIdleCPU's window), 4-6 % 35-40 s in, 3.9 % in a CPU
// profile 15-35 s in (issue 31's goal is 2 %). Measured when the bound was
// set (2 cores, other work running): 3-4% alone; before the
// heartbeats were coalesced per node pair and idle appends answered
// locally (package cluster/pulse), 11-15% alone and 18-20% beside the
// package's other tests — raft's heartbeats, every tenth of the heartbeat
// timeout per follower of each of the 17 groups, and its idle
// commit-index appends, each a msgpack RPC over the Raft port. The bound
// fails a return to that (or a spinning loop) with room for a busy CI
// machine.
const idleCPUBound = 0.10
