// Command benchcompare measures rlserver against a real redis-server on the
// same machine and writes the figures to a results directory: a markdown
// report, the raw results as JSON, a PNG chart and CPU profile summaries.
//
// It starts both servers on free ports and runs, alternating between them
// and over several rounds, the same client workloads: rlserver's RL.CHECK
// per algorithm and CL.THROTTLE against Redis INCR and EVALSHA of the
// reference Lua limiters (read from luaref/*.lua). It repeats the headline
// pair with redis-benchmark, so that anyone can reproduce a figure with a
// standard tool, and measures memory per key with a million keys per
// algorithm. Durable rlservers (fast and strong, one core and every core)
// run beside redis-servers with AOF (everysec and always), and a last
// section reads the CPU of idle servers: a three-node cluster, a durable
// node, an in-memory node and redis-server. Every figure is reported
// beside a reference measured in the same run, because the client and the
// servers share the machine's cores. -only runs some sections.
//
//	make bench-compare     # builds bin/rlserver, then runs this; writes bench/out
//	make bench-compare BENCHOUT=bench/results   # replaces the committed results
//	go run ./bench/cmd/benchcompare -rlserver bin/rlserver -out bench/out
//	BENCHFLAGS='-only durable,idle' make bench-compare   # those sections only
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

type options struct {
	rlserver       string
	redisServer    string
	redisBenchmark string
	luaref         string
	out            string
	duration       time.Duration
	warmup         time.Duration
	rounds         int
	conns          int
	keys           uint64
	memKeys        int64
	profile        bool
	procs          int
	idle           time.Duration
	idleSettle     time.Duration
	only           string
	clientProcs    int
	from           string
}

func main() {
	var o options
	flag.StringVar(&o.rlserver, "rlserver", "bin/rlserver", "rlserver binary")
	flag.StringVar(&o.redisServer, "redis-server", "redis-server", "redis-server binary")
	flag.StringVar(&o.redisBenchmark, "redis-benchmark", "redis-benchmark", `redis-benchmark binary ("" skips that part)`)
	flag.StringVar(&o.luaref, "luaref", "luaref", "directory of the reference Lua limiters (*.lua)")
	flag.StringVar(&o.out, "out", "bench/out", "directory for results.md, results.json, chart.png and profiles "+
		"(bench/results holds the committed run)")
	flag.DurationVar(&o.duration, "d", 1500*time.Millisecond, "measured time of each run")
	flag.DurationVar(&o.warmup, "warmup", 300*time.Millisecond, "unmeasured time before each run")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds of every workload; the report gives the median")
	flag.IntVar(&o.conns, "c", 50, "client connections")
	flag.Uint64Var(&o.keys, "r", 100000, "key space of the throughput runs")
	flag.Int64Var(&o.memKeys, "mem-keys", 1000000, "keys per algorithm for the memory measurement (0 skips it)")
	flag.BoolVar(&o.profile, "profile", true, "save CPU profiles of rlserver during the RL.CHECK token runs")
	flag.IntVar(&o.procs, "procs", 1, "rlserver's --procs for the comparison (1: one core, as Redis runs commands); "+
		"a second rlserver with every core (the default flags) runs the RL.CHECK token rows too, in memory and durable")
	flag.DurationVar(&o.idle, "idle", 20*time.Second, "window over which the idle section reads the idle servers' CPU")
	flag.DurationVar(&o.idleSettle, "idle-settle", 30*time.Second, "time the idle servers are left alone before that window: "+
		"a node rests (--rest-after, 10 s) once the work of its start is done, a cluster's first half minute")
	flag.StringVar(&o.only, "only", "", "run only these sections, comma-separated, of "+strings.Join(allSections, ",")+
		` ("": all). throughput: in memory vs Redis INCR and EVALSHA; durable: durable rlservers vs Redis with AOF; `+
		"scripts: the limiter libraries' scripts by EVALSHA, durable rlserver vs Redis AOF everysec; memory: bytes per key; restart: a durable rlserver's restart with -mem-keys keys; idle: idle CPU; allocs: go test's allocations per check")
	flag.StringVar(&o.from, "from", "", "rewrite results.md and chart.png from this results.json instead of measuring")
	flag.IntVar(&o.clientProcs, "client-procs", 1, "GOMAXPROCS of the load generator (1: one core, as redis-benchmark; 0: all)")
	flag.Parse()
	if o.clientProcs > 0 {
		runtime.GOMAXPROCS(o.clientProcs)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "benchcompare:", err)
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
	dir, err := os.MkdirTemp("", "benchcompare")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logf, err := os.Create(filepath.Join(dir, "servers.log"))
	if err != nil {
		return err
	}
	defer logf.Close()

	secs, err := parseSections(o.only)
	if err != nil {
		return err
	}
	rep := &report{Machine: describeMachine(o), Options: o.summary(secs)}
	if err := measureAll(o, secs, dir, logf, rep, start); err != nil {
		return err
	}
	rep.Elapsed = time.Since(start).Round(time.Second).String()
	rep.evaluate()
	return rep.write(o.out)
}

// measureAll runs the chosen sections into rep. The reference rlserver
// keeps its state in memory (--data-dir ""), as the Redis beside it runs
// without persistence; the durable ones face Redis with AOF.
func measureAll(o options, secs sections, dir string, logf io.Writer, rep *report, start time.Time) error {
	header := func(format string, args ...any) { // with the time so far, to see what each section costs
		fmt.Printf("== [%s] %s\n", time.Since(start).Round(time.Second), fmt.Sprintf(format, args...))
	}
	f, err := startFleet(o, secs, dir, logf)
	if err != nil {
		return err
	}
	defer f.stop()
	ctx := context.Background()
	if ws := pairedWorkloads(f, secs); len(ws) > 0 {
		for _, pipeline := range []int{16, 1} {
			header("throughput, %d connections, pipeline %d, %d rounds", o.conns, pipeline, o.rounds)
			runs, err := throughput(ctx, o, ws, pipeline)
			if err != nil {
				return err
			}
			rep.Runs = append(rep.Runs, runs...)
		}
	}
	if o.redisBenchmark != "" && (secs[secThroughput] || secs[secDurable] || secs[secScripts]) {
		header("redis-benchmark")
		if rep.RedisBenchmark, err = redisBenchmarks(o, f, secs); err != nil {
			return err
		}
	}
	if secs[secMemory] && o.memKeys > 0 {
		header("memory, %d keys per algorithm", o.memKeys)
		if rep.Memory, err = memory(ctx, o, f.rl, f.redis, f.shas); err != nil {
			return err
		}
	}
	f.stop() // the servers of the sections below are their own
	if secs[secRestart] && o.memKeys > 0 {
		header("restart of a durable rlserver with %d keys", o.memKeys)
		if rep.Restart, err = restartBench(ctx, o, dir, logf); err != nil {
			return err
		}
	}
	if secs[secIdle] && o.idle > 0 {
		header("idle CPU over %v", o.idle)
		if rep.Idle, err = idleBench(o, dir, logf); err != nil {
			return err
		}
	}
	if secs[secAllocs] {
		header("allocations per check (go test)")
		rep.Allocs = allocBenchmark()
	}
	return nil
}

func (o options) summary(secs sections) map[string]string {
	return map[string]string{"sections": secs.String(), "idle": o.idle.String(),
		"connections": fmt.Sprint(o.conns), "keys": fmt.Sprint(o.keys),
		"duration": o.duration.String(), "warmup": o.warmup.String(), "rounds": fmt.Sprint(o.rounds),
		"mem_keys": fmt.Sprint(o.memKeys), "procs": fmt.Sprint(o.procs), "client_procs": fmt.Sprint(o.clientProcs),
	}
}

// rewrite regenerates the report files from a saved results.json.
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
