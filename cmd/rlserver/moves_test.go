package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/internal/testutil"
)

// TestPlannedMovesShowClientsNoErrors: what a cluster does by itself or on
// an operator's request must show a Redis Cluster client with its default
// options no error and lose or double no admission (docs/cluster.md, "Planned moves are invisible
// to clients").
// go-redis's ClusterClient and redis-py's RedisCluster, both with default
// options, check at a steady rate through, in one cluster: its forming
// (the clients start as soon as the nodes listen), a SIGTERM of the node
// leading the most groups and its restart with --data-dir alone, a
// rolling restart of all three nodes (SIGTERM, restart, leads back), a
// fourth node joining, and a node leaving and then stopping. Every error
// either client sees fails the test, with the phase it came in; then
// every key's charge (RL.PEEK) must equal the admissions acknowledged. In
// strong mode; TestLongPlannedMoves, in make test-long, in fast and in
// strong mode.
func TestPlannedMovesShowClientsNoErrors(t *testing.T) {
	alone(t)
	testPlannedMoves(t, "strong")
}

// TestLongPlannedMoves is TestPlannedMovesShowClientsNoErrors in fast and
// in strong mode: make test-long runs it.
func TestLongPlannedMoves(t *testing.T) {
	testutil.LongOnly(t)
	testPlannedMoves(t, "fast", "strong")
}

// testPlannedMoves runs the planned moves in each mode given.
func testPlannedMoves(t *testing.T, modes ...string) {
	bin := buildBinary(t)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			plannedMoves(t, bin, mode)
		})
	}
}

func plannedMoves(t *testing.T, bin, mode string) {
	ph := &phases{}
	ph.begin("forming")
	procs := startNodes(t, bin, 3, 8, "--consistency", mode)
	addrs := respAddrs(procs)
	goL := startGoLoad(t, "go", addrs, 8, 240, 2*time.Millisecond)
	pyL := startPyLoad(t, "py", addrs, 60, 300)
	waitBalanced(t, procs, 30*time.Second)
	time.Sleep(time.Second)

	ph.begin("sigterm of the node leading the most groups")
	i := mostLeader(t, procs)
	procs[i].stop()
	waitServedBy(t, procs[(i+1)%3], procs[i].resp, time.Now().Add(10*time.Second))
	ph.begin("its restart with --data-dir alone")
	procs[i] = restartProc(t, procs[i])
	waitBalanced(t, procs, 30*time.Second)

	for j := range procs {
		ph.begin(fmt.Sprintf("rolling restart: n%d", j+1))
		procs[j].stop()
		procs[j] = restartProc(t, procs[j])
		waitBalanced(t, procs, 30*time.Second)
	}

	ph.begin("join of n4")
	n4 := startProc(t, bin, t.TempDir(), "--node-id", "n4", "--raft-addr", testutil.FreeAddr(t), "--join", procs[0].resp,
		"--consistency", mode)
	all := append(procs[:3:3], n4)
	testutil.WaitFor(t, 40*time.Second, "n4 leads groups and leaders are balanced", func() bool {
		r, err := report(procs[0], "")
		return err == nil && leadsIn(r, "n4") > 0 && r.IsBalanced()
	})

	ph.begin("leave of n2")
	if err := procs[0].client.Do(context.Background(), "RL.CLUSTER.LEAVE", "n2").Err(); err != nil {
		t.Fatalf("RL.CLUSTER.LEAVE n2: %v", err)
	}
	testutil.WaitFor(t, 40*time.Second, "n2 forgotten and leaders balanced", func() bool {
		r, err := report(procs[0], "")
		return err == nil && !hasNode(r, "n2") && r.IsBalanced()
	})
	ph.begin("n2 stopped after leaving")
	procs[1].stop()
	time.Sleep(time.Second)

	ph.begin("end")
	results := []loadResult{goL.stop(), pyL.stop()}
	assertNoErrorsAndCounted(t, []string{all[0].resp, all[2].resp, all[3].resp}, ph, leadsLost(t), results...)
}

// startNodes starts n nodes of a new cluster of groups groups at once,
// and returns as soon as each answers PING: the cluster is still forming.
func startNodes(t testing.TB, bin string, n, groups int, extra ...string) []*proc {
	t.Helper()
	var ids, raft, peers []string
	for i := 0; i < n; i++ {
		ids = append(ids, fmt.Sprintf("n%d", i+1))
		raft = append(raft, testutil.FreeAddr(t))
		peers = append(peers, ids[i]+"="+raft[i])
	}
	procs := make([]*proc, n)
	errs := make([]error, n)
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			flags := append([]string{"--node-id", ids[i], "--raft-addr", raft[i], "--peers", strings.Join(peers, ","),
				"--groups", fmt.Sprint(groups)}, extra...)
			procs[i], errs[i] = startProcErr(t, bin, dirs[i], flags...)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil { // a node did not start
		t.Fatal(err)
	}
	return procs
}

func respAddrs(procs []*proc) []string {
	var out []string
	for _, p := range procs {
		out = append(out, p.resp)
	}
	return out
}

// leadsIn returns how many groups node name leads in r.
func leadsIn(r cluster.Report, name string) int {
	for _, n := range r.Nodes {
		if n.Name == name {
			return n.Leads
		}
	}
	return 0
}
