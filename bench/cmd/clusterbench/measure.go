package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/rlserver/rlserver/bench/load"
	"github.com/rlserver/rlserver/bench/nodes"
)

// setup is one configuration of servers.
type setup struct {
	Name        string `json:"name"` // "single fast", "cluster strong", ...
	Cluster     bool   `json:"cluster"`
	Consistency string `json:"consistency"`
}

var setups = []setup{
	{"single fast", false, "fast"}, {"cluster fast", true, "fast"},
	{"single strong", false, "strong"}, {"cluster strong", true, "strong"},
}

const (
	toolRL = "rlbench"
	toolRB = "redis-benchmark"
)

// Sample is one run of one client against one configuration.
type Sample struct {
	Setup      string    `json:"setup"`
	Tool       string    `json:"tool"`
	Round      int       `json:"round"`
	Args       string    `json:"args"`
	RPS        float64   `json:"rps"`
	P50        float64   `json:"p50_us"`
	P99        float64   `json:"p99_us"`
	P999       float64   `json:"p999_us,omitempty"` // rlbench only
	Replies    uint64    `json:"replies"`
	ServerCPU  float64   `json:"server_cpu_us_per_request"` // summed over the processes
	NodeCPU    []float64 `json:"node_cpu_us_per_request"`   // each process's, busiest first
	ClientCPU  float64   `json:"client_cpu_us_per_request"`
	IdleCores  float64   `json:"idle_cores"` // the configuration's CPU while ready and idle, in cores
	Errors     uint64    `json:"errors"`     // error replies (rlbench only: redis-benchmark does not count them)
	FirstError string    `json:"first_error,omitempty"`
	Redirects  uint64    `json:"redirects"`
	Retries    uint64    `json:"retries"` // TRYAGAIN, CLUSTERDOWN, connection errors
}

// bench runs the rounds.
type bench struct {
	o          options
	dir        string
	log        io.Writer
	profiles   *strings.Builder
	lastRPS    map[string]float64 // by setup and tool: redis-benchmark's latest rate, to size its -n
	stopErrors []string
}

// rounds measures every setup with every client o.rounds times,
// alternating the order, and returns the medians and the samples.
func (b *bench) rounds() ([]Row, []Sample, error) {
	b.lastRPS = map[string]float64{}
	tools := []string{toolRL}
	if b.o.redisBenchmark != "" {
		tools = append(tools, toolRB)
	}
	var samples []Sample
	for round := 0; round < b.o.rounds; round++ {
		order, tl := append([]setup(nil), setups...), append([]string(nil), tools...)
		if round%2 == 1 {
			reverse(order)
			reverse(tl)
		}
		for _, s := range order {
			ss, err := b.measureSetup(round, s, tl)
			if err != nil {
				return nil, nil, fmt.Errorf("round %d, %s: %w", round+1, s.Name, err)
			}
			samples = append(samples, ss...)
		}
	}
	return medians(samples), samples, nil
}

func reverse[T any](s []T) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

// measureSetup starts s afresh, runs each tool once against it and
// stops it.
func (b *bench) measureSetup(round int, s setup, tools []string) ([]Sample, error) {
	dir := filepath.Join(b.dir, fmt.Sprintf("r%d-%s", round+1, strings.ReplaceAll(s.Name, " ", "-")))
	ns, err := nodes.Start(nodes.Spec{Bin: b.o.rlserver, Dir: dir, Nodes: 3, Log: b.log, Cluster: s.Cluster,
		Flags: b.o.nodeFlags(s.Consistency)})
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	stopped := false
	defer func() {
		if !stopped {
			nodes.StopAll(ns)
		}
	}()
	if s.Cluster {
		if _, err := nodes.WaitBalanced(ns[0], 30*time.Second); err != nil {
			return nil, err
		}
	}
	idle := b.idleCores(ns)
	var out []Sample
	for _, tool := range tools {
		var smp Sample
		if tool == toolRL {
			smp, err = b.rlbench(round, s, ns)
		} else {
			smp, err = b.redisBenchmark(s, ns)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", tool, err)
		}
		smp.Setup, smp.Tool, smp.Round, smp.IdleCores = s.Name, tool, round+1, idle
		fmt.Printf("  round %d  %-14s %-15s %8.0f rps  p50 %7.0f µs  p99 %7.0f µs  server cpu %5.2f µs/req (%s)  client %4.2f  idle %.2f cores\n",
			round+1, s.Name, tool, smp.RPS, smp.P50, smp.P99, smp.ServerCPU, fmtList(smp.NodeCPU), smp.ClientCPU, idle)
		out = append(out, smp)
	}
	stopped = true
	if err := nodes.StopAll(ns); err != nil {
		b.stopErrors = append(b.stopErrors, fmt.Sprintf("round %d, %s: %v", round+1, s.Name, err))
		fmt.Println("  note: stop:", err)
	}
	return out, nil
}

// idleCores returns the CPU the nodes use, ready and without load, in
// cores.
func (b *bench) idleCores(ns []*nodes.Node) float64 {
	if b.o.idle <= 0 {
		return 0
	}
	c0, t0 := sum(nodes.CPUs(ns)), time.Now()
	time.Sleep(b.o.idle)
	return float64(sum(nodes.CPUs(ns))-c0) / float64(time.Since(t0))
}

// rlbench runs the load generator in this process, with cluster routing
// against a cluster.
func (b *bench) rlbench(round int, s setup, ns []*nodes.Node) (Sample, error) {
	o := b.o
	tpl, err := load.ParseTemplate("RL.CHECK key:" + load.RandInt + " token 100 60")
	if err != nil {
		return Sample{}, err
	}
	cfg := load.Config{Name: s.Name, Addr: ns[round%len(ns)].RESP, Conns: o.conns, Pipeline: o.pipeline, Keys: o.keys,
		Duration: o.duration, Warmup: o.warmup, Templates: []*load.Template{tpl}, Seed: uint64(round + 1), Cluster: s.Cluster}
	profDone := make(chan string, 1)
	if b.profiles != nil && round == 0 {
		go func() { profDone <- b.profile(s, ns) }()
	}
	cpu0, self0 := nodes.CPUs(ns), selfCPU()
	res, err := load.Run(context.Background(), cfg)
	if err != nil {
		return Sample{}, err
	}
	used, client := diff(nodes.CPUs(ns), cpu0), selfCPU()-self0
	if b.profiles != nil && round == 0 {
		b.profiles.WriteString(<-profDone)
	}
	if res.Errors > 0 {
		fmt.Printf("  note: %s, rlbench: %d error replies (first: %s)\n", s.Name, res.Errors, res.FirstError)
	}
	smp := Sample{Args: fmt.Sprintf("-c %d -P %d -r %d -d %v %s", o.conns, o.pipeline, o.keys, o.duration, tpl.Text),
		RPS: res.RPS, P50: res.Latency.P50, P99: res.Latency.P99, P999: res.Latency.P999, Replies: res.Total,
		Errors: res.Errors, FirstError: res.FirstError}
	if s.Cluster {
		smp.Args = "-cluster " + smp.Args
		c := res.Cluster
		smp.Redirects, smp.Retries = c.Redirects, c.TryAgain+c.ClusterDown+c.ConnErrors
	}
	smp.perRequest(used, client)
	return smp, nil
}

// perRequest sets the CPU figures from the processes' CPU times over the
// run and the client's.
func (smp *Sample) perRequest(used []time.Duration, client time.Duration) {
	n := float64(max(smp.Replies, 1))
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / n }
	for _, u := range used {
		smp.ServerCPU += us(u)
		smp.NodeCPU = append(smp.NodeCPU, us(u))
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(smp.NodeCPU)))
	smp.ClientCPU = us(client)
}

// profile records a CPU profile of the node leading the most groups (the
// only node of a single setup) over the measured part of an rlbench run,
// and returns go tool pprof's summary of it.
func (b *bench) profile(s setup, ns []*nodes.Node) string {
	nd := ns[0]
	if s.Cluster {
		if r, err := nodes.GetReport(ns[0].HTTP); err == nil {
			name, _ := r.MostLeader()
			for _, x := range ns {
				if x.Name == name {
					nd = x
				}
			}
		}
	}
	head := fmt.Sprintf("==== %s: node %s (of %d), %v of the rlbench run of round 1\n", s.Name, nd.Name, len(ns), max(b.o.duration, time.Second).Round(time.Second))
	time.Sleep(b.o.warmup)
	top, err := nodes.ProfileTop(nd.Pprof, b.o.rlserver, b.o.duration, 40, filepath.Join(b.dir, "profile.pb.gz"))
	if err != nil {
		return head + top + err.Error() + "\n\n"
	}
	return head + top
}

// selfCPU returns this process's CPU time (user + system).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func sum(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t
}

func diff(a, b []time.Duration) []time.Duration {
	out := make([]time.Duration, len(a))
	for i := range a {
		out[i] = a[i] - b[i]
	}
	return out
}

func fmtList(v []float64) string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprintf("%.2f", x))
	}
	return strings.Join(s, " + ")
}
