package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rlserver/rlserver/bench/load"
	"github.com/rlserver/rlserver/bench/nodes"
)

// Run is one kill and what followed it. Times are in seconds after the
// SIGKILL; latencies in µs.
type Run struct {
	Run         int     `json:"run"`
	Victim      string  `json:"victim"`
	VictimLeads int     `json:"victim_leads"` // groups it led
	Groups      int     `json:"groups"`
	Keys        int     `json:"keys"` // over all workers
	SteadyRPS   float64 `json:"steady_rps"`
	SteadyP50   float64 `json:"steady_p50_us"`
	SteadyP99   float64 `json:"steady_p99_us"`
	// ServedAfter is (a): every group with a ready replica on a live node,
	// as GET /cluster on a survivor shows.
	ServedAfter float64 `json:"served_after_s"`
	// FirstAfter is the first successful reply for a key of a group the
	// victim led.
	FirstAfter float64 `json:"first_answer_after_s"`
	// FullAfter is (b): every worker has had a successful reply for every
	// key it checks.
	FullAfter float64 `json:"full_service_after_s"`
	Completed bool    `json:"completed"` // (a) and (b) came within -timeout
	// Errors are (c), what the clients met between the kill and (b).
	Errors      load.StatsSnapshot `json:"errors"`
	OtherErrors uint64             `json:"other_error_replies"`
	FirstOther  string             `json:"first_other_error,omitempty"`
	CleanStop   bool               `json:"survivors_exit_0"`
	StopError   string             `json:"stop_error,omitempty"`
}

func runOnce(o options, dir string, n int) (Run, error) {
	r := Run{Run: n}
	logf, err := os.Create(dir + ".log")
	if err != nil {
		return r, err
	}
	defer logf.Close()
	ns, err := nodes.Start(nodes.Spec{Bin: o.rlserver, Dir: dir, Nodes: 3, Log: logf, Cluster: true, Flags: o.nodeFlags()})
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	defer nodes.StopAll(ns) // after a failure; a no-op once stopped
	rep, err := nodes.WaitBalanced(ns[0], 30*time.Second)
	if err != nil {
		return r, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var addrs []string
	for _, nd := range ns {
		addrs = append(addrs, nd.RESP)
	}
	cl, err := load.NewCluster(ctx, addrs, "")
	if err != nil {
		return r, err
	}
	ld := newLoad(o, cl, rep)
	r.Groups, r.Keys = len(rep.Groups), ld.keys()
	var wg sync.WaitGroup
	for _, w := range ld.workers {
		wg.Add(1)
		go func() { defer wg.Done(); w.loop(ctx) }()
	}
	defer wg.Wait()
	defer cancel()
	time.Sleep(o.warmup)
	if r.SteadyRPS, r.SteadyP50, r.SteadyP99, err = ld.steady(o.steady); err != nil {
		return r, err
	}
	if err := r.kill(o, ld, ns, cl); err != nil {
		return r, err
	}
	cancel()
	wg.Wait()
	r.stopSurvivors(ns, dir)
	return r, nil
}

// kill kills the node leading the most groups and measures what follows.
func (r *Run) kill(o options, ld *loadGen, ns []*nodes.Node, cl *load.Cluster) error {
	rep, err := nodes.GetReport(ns[0].HTTP)
	if err != nil {
		return err
	}
	r.Victim, r.VictimLeads = rep.MostLeader()
	var victim, survivor *nodes.Node
	for _, nd := range ns {
		if nd.Name == r.Victim {
			victim = nd
		} else if survivor == nil {
			survivor = nd
		}
	}
	if victim == nil || survivor == nil {
		return fmt.Errorf("no node leads a group: %+v", rep.Nodes)
	}
	ld.markVictim(rep, r.Victim)
	before, otherBefore := cl.Stats.Snapshot(), ld.otherErrors()
	killed := time.Now()
	ld.killAt.Store(int64(killed.Sub(ld.base)))
	victim.Kill()
	deadline := killed.Add(o.timeout)
	served := make(chan time.Time, 1)
	go func() { served <- waitServed(survivor, r.Victim, deadline) }()
	full := ld.waitFull(deadline)
	a := <-served
	r.Errors = cl.Stats.Snapshot().Sub(before)
	r.OtherErrors, r.FirstOther = ld.otherErrors()-otherBefore, ld.firstOther()
	r.Completed = !a.IsZero() && !full.IsZero()
	if !a.IsZero() {
		r.ServedAfter = a.Sub(killed).Seconds()
	}
	if !full.IsZero() {
		r.FullAfter = full.Sub(killed).Seconds()
	}
	if first := ld.firstVictimAnswer(); first > 0 {
		r.FirstAfter = (time.Duration(first) - killed.Sub(ld.base)).Seconds()
	}
	return nil
}

// waitServed polls nd's GET /cluster until every group has a ready
// replica on a node other than dead, and returns when (zero at the
// deadline).
func waitServed(nd *nodes.Node, dead string, deadline time.Time) time.Time {
	for time.Now().Before(deadline) {
		if rep, err := nodes.GetReport(nd.HTTP); err == nil && rep.ServedWithout(dead) {
			return time.Now()
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Time{}
}

// stopSurvivors stops the live nodes with SIGTERM; each must exit with 0.
func (r *Run) stopSurvivors(ns []*nodes.Node, dir string) {
	var live []*nodes.Node
	for _, nd := range ns {
		if nd.Name != r.Victim {
			live = append(live, nd)
		}
	}
	err := nodes.StopAll(live)
	r.CleanStop = err == nil
	if err != nil {
		r.StopError = err.Error()
		fmt.Fprintf(os.Stderr, "failover: run %d: %v (log: %s)\n", r.Run, err, filepath.Base(dir)+".log")
	}
}

func (r Run) line() string {
	return fmt.Sprintf("run %d: killed %s (led %d of %d groups); steady %.0f rps, p99 %.0f µs; served after %.3f s, "+
		"full service after %.3f s; %d MOVED, %d TRYAGAIN, %d CLUSTERDOWN, %d connection errors, %d other; survivors exit 0: %v",
		r.Run, r.Victim, r.VictimLeads, r.Groups, r.SteadyRPS, r.SteadyP99, r.ServedAfter, r.FullAfter,
		r.Errors.Redirects, r.Errors.TryAgain, r.Errors.ClusterDown, r.Errors.ConnErrors, r.OtherErrors, r.CleanStop)
}
