package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/internal/testutil"
)

// BenchmarkClusterJoin measures a join with many live keys: three nodes
// (fast mode, 16 groups) are loaded with -join-keys keys (default
// 1,000,000; RLSERVER_JOIN_KEYS), then 16 clients check random keys in
// pipelines of 16 through ClusterClients, for 5 s of steady state, then
// while a fourth node joins, until every group is served by its preferred
// leader again. It reports the join's duration (join_s: from starting the
// fourth node until the cluster is balanced) and the throughput during
// the join as a fraction of the steady state's (during_ratio).
//
//	go test -run '^$' -bench ClusterJoin -benchtime 1x ./cmd/rlserver
func BenchmarkClusterJoin(b *testing.B) {
	keys := envInt("RLSERVER_JOIN_KEYS", 1000000)
	for i := 0; i < b.N; i++ {
		runJoinBench(b, keys)
	}
}

func runJoinBench(b *testing.B, keys int) {
	tb := testing.TB(b)
	bin := buildBinary(tb)
	procs := clusterProcsN(tb, bin, 3, 16, "--consistency", "fast")
	var addrs []string
	for _, p := range procs {
		addrs = append(addrs, p.resp)
	}
	newClient := func() *redis.ClusterClient {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16, PoolSize: 4,
			ClusterStateReloadInterval: 250 * time.Millisecond, ReadTimeout: 10 * time.Second})
	}
	load := newClient()
	defer load.Close()
	start := time.Now()
	const batch = 1000
	for k := 0; k < keys; k += batch {
		pipe := load.Pipeline()
		for j := k; j < min(k+batch, keys); j++ {
			pipe.Do(context.Background(), "RL.CHECK", fmt.Sprintf("jb:%d", j), "token", 1000, "1h")
		}
		if _, err := pipe.Exec(context.Background()); err != nil {
			b.Fatalf("loading keys: %v", err)
		}
	}
	b.Logf("%d keys loaded in %v", keys, time.Since(start).Round(time.Millisecond))
	var done atomic.Int64
	var errs atomic.Int64
	var lastErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newClient()
			defer c.Close()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				pipe := c.Pipeline()
				for j := 0; j < 16; j++ {
					pipe.Do(context.Background(), "RL.CHECK", fmt.Sprintf("jb:%d", (i*7919+j*104729+w*15485863)%keys), "token", 1000, "1h")
				}
				if _, err := pipe.Exec(context.Background()); err != nil {
					errs.Add(1)
					lastErr.Store(err.Error())
					continue
				}
				done.Add(16)
			}
		}()
	}
	measure := func(d time.Duration) float64 {
		n0, t0 := done.Load(), time.Now()
		time.Sleep(d)
		return float64(done.Load()-n0) / time.Since(t0).Seconds()
	}
	measure(time.Second) // warm up
	steady := measure(5 * time.Second)
	n0, t0 := done.Load(), time.Now()
	n4 := startProc(tb, bin, tb.TempDir(), "--node-id", "n4", "--raft-addr", testutil.FreeAddr(tb), "--join", procs[0].resp,
		"--consistency", "fast")
	deadline := time.Now().Add(10 * time.Minute)
	for {
		r, err := report(procs[0], "")
		if err == nil && len(r.Nodes) == 4 && leadsGroups(tb, procs[0], "n4") && r.IsBalanced() && allPlaced(r) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the join did not finish in 10 minutes\n%s", n4.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(t0)
	during := float64(done.Load()-n0) / took.Seconds()
	close(stop)
	wg.Wait()
	b.Logf("steady %.0f checks/s; join of a fourth node with %d keys took %v, %.0f checks/s meanwhile (%.2fx); %d pipelines failed (last: %v)",
		steady, keys, took.Round(time.Millisecond), during, during/steady, errs.Load(), lastErr.Load())
	b.ReportMetric(took.Seconds(), "join_s")
	b.ReportMetric(during/steady, "during_ratio")
	b.ReportMetric(steady, "steady_checks/s")
}

// allPlaced reports whether every group's replicas are exactly its voters
// (no replica still moving).
func allPlaced(r cluster.Report) bool {
	for _, g := range r.Groups {
		if len(g.Replicas) != len(g.Voters) {
			return false
		}
	}
	return true
}

// envInt returns the integer in environment variable name, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
