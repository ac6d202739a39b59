// Command clusterbench measures a three-node rlserver cluster against a
// single durable rlserver on the same machine, in fast and in strong mode,
// with rlbench's cluster routing and with redis-benchmark --cluster, and
// writes the figures to <out>/cluster.md, cluster.json and cluster.png.
//
// Every round starts each configuration afresh (new data directories),
// waits until it is ready — a cluster until GET /cluster shows every group
// with exactly one ready replica, its preferred leader — measures its idle
// CPU for a second, runs both clients one after the other, and stops it
// with SIGTERM; the order of the configurations, and of the clients,
// reverses every other round, and the report gives medians. Only the
// configuration being measured runs. The load is 50 connections, -P 16,
// keys uniform over 100,000: RL.CHECK key:__rand_int__ token 100 60.
//
//	make bench-cluster     # builds bin/rlserver, then runs this; writes bench/results/cluster.*
//	go run ./bench/cmd/clusterbench -rounds 1 -d 1s -out /tmp/cb   # a quick look
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

type options struct {
	rlserver       string
	redisBenchmark string
	out            string
	duration       time.Duration
	warmup         time.Duration
	idle           time.Duration
	rounds         int
	conns          int
	pipeline       int
	keys           uint64
	groups         int
	procs          int
	clientProcs    int
	rbThreads      int
	profile        bool
	extra          string
	from           string
}

func main() {
	var o options
	flag.StringVar(&o.rlserver, "rlserver", "bin/rlserver", "rlserver binary (make build)")
	flag.StringVar(&o.redisBenchmark, "redis-benchmark", "redis-benchmark", `redis-benchmark binary ("" skips it)`)
	flag.StringVar(&o.out, "out", "bench/results", "directory for cluster.md, cluster.json, cluster.png and cluster-profiles.txt")
	flag.DurationVar(&o.duration, "d", 2*time.Second, "measured time of each rlbench run (redis-benchmark's -n is sized to last about as long)")
	flag.DurationVar(&o.warmup, "warmup", 300*time.Millisecond, "unmeasured time before each rlbench run")
	flag.DurationVar(&o.idle, "idle", time.Second, "time the idle CPU of each configuration is measured over, once it is ready (0 skips it)")
	flag.IntVar(&o.rounds, "rounds", 5, "rounds; the report gives the median")
	flag.IntVar(&o.conns, "c", 50, "client connections")
	flag.IntVar(&o.pipeline, "P", 16, "pipeline depth")
	flag.Uint64Var(&o.keys, "r", 100000, "key space")
	flag.IntVar(&o.groups, "groups", 16, "the cluster's --groups")
	flag.IntVar(&o.procs, "procs", 0, "rlserver's --procs for every node (0: not given, every process may use every core)")
	flag.IntVar(&o.clientProcs, "client-procs", 1, "GOMAXPROCS of rlbench (1: one core, as redis-benchmark; 0: all)")
	flag.IntVar(&o.rbThreads, "rb-threads", 1, "redis-benchmark --threads against the cluster (1: one thread, as against the single node; 0: its default, one per master)")
	flag.BoolVar(&o.profile, "profile", true, "in the first round, save a CPU profile summary of a node of each configuration during the rlbench run")
	flag.StringVar(&o.extra, "flags", "", "extra rlserver flags for every node, space-separated")
	flag.StringVar(&o.from, "from", "", "rewrite cluster.md and cluster.png from this cluster.json instead of measuring")
	flag.Parse()
	if o.clientProcs > 0 {
		runtime.GOMAXPROCS(o.clientProcs)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "clusterbench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	start := time.Now()
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	if o.from != "" {
		return rewrite(o.from, o.out)
	}
	dir, err := os.MkdirTemp("", "clusterbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logf, err := os.Create(filepath.Join(dir, "servers.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	rep := &report{Machine: describeMachine(o), Options: o.summary()}
	b := &bench{o: o, dir: dir, log: logf}
	if o.profile {
		b.profiles = &strings.Builder{}
	}
	if rep.Rows, rep.Samples, err = b.rounds(); err != nil {
		fmt.Fprintf(os.Stderr, "clusterbench: server logs:\n%s\n", tail(filepath.Join(dir, "servers.log"), 40))
		return err
	}
	rep.StopErrors = b.stopErrors
	rep.Elapsed = time.Since(start).Round(time.Second).String()
	rep.evaluate()
	if b.profiles != nil && b.profiles.Len() > 0 {
		if err := os.WriteFile(filepath.Join(o.out, "cluster-profiles.txt"), []byte(b.profiles.String()), 0o644); err != nil {
			return err
		}
	}
	return rep.write(o.out)
}

func (o options) summary() map[string]string {
	return map[string]string{
		"connections": fmt.Sprint(o.conns), "pipeline": fmt.Sprint(o.pipeline), "keys": fmt.Sprint(o.keys),
		"duration": o.duration.String(), "warmup": o.warmup.String(), "rounds": fmt.Sprint(o.rounds),
		"groups": fmt.Sprint(o.groups), "procs": fmt.Sprint(o.procs), "client_procs": fmt.Sprint(o.clientProcs),
		"rb_threads": fmt.Sprint(o.rbThreads),
		"flags":      strings.Join(append([]string{"--log-level warn --pprof <addr>"}, o.nodeFlags("fast|strong")...), " "),
	}
}

// nodeFlags are the flags every node gets besides addresses, data
// directory and cluster membership: the same for the single node and the
// cluster's.
func (o options) nodeFlags(consistency string) []string {
	var f []string
	if consistency != "" {
		f = append(f, "--consistency", consistency)
	}
	if o.procs > 0 {
		f = append(f, "--procs", fmt.Sprint(o.procs))
	}
	return append(f, strings.Fields(o.extra)...)
}

// rewrite regenerates the report files from a saved cluster.json.
func rewrite(from, out string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	var rep report
	if err := json.Unmarshal(data, &rep); err != nil {
		return fmt.Errorf("%s: %w", from, err)
	}
	rep.Targets = nil
	rep.evaluate()
	return rep.write(out)
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
