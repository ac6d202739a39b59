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
// algorithm. Every figure is reported beside a reference measured in the
// same run, because the client and the servers share the machine's cores.
//
//	make bench-compare     # builds bin/rlserver, then runs this; writes bench/out
//	make bench-compare BENCHOUT=bench/results   # replaces the committed results
//	go run ./bench/cmd/benchcompare -rlserver bin/rlserver -out bench/out
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
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
	goTest         bool
	durable        bool
	procs          int
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
	flag.BoolVar(&o.goTest, "alloc-test", true, "run the server's allocation benchmark with go test")
	flag.BoolVar(&o.durable, "durable", true, "also run RL.CHECK token on durable rlservers (fast and strong) and time a restart with -mem-keys keys")
	flag.IntVar(&o.procs, "procs", 1, "rlserver's --procs for the comparison (1: one core, as Redis runs commands); "+
		"a second rlserver with every core runs the RL.CHECK token rows too")
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

	rep := &report{Machine: describeMachine(o), Options: o.summary()}
	// The reference rlserver keeps its state in memory (--data-dir ""),
	// as the Redis beside it runs without persistence; the durable ones
	// are variants.
	rl, err := startRLServer("rlserver", o.rlserver, dir, o.procs, logf, "--data-dir", "")
	if err != nil {
		return err
	}
	defer rl.stop()
	// Other configurations of rlserver, run on the RL.CHECK token rows.
	var variants []variant
	if o.procs != 0 {
		rlAll, err := startRLServer("rlserver-all", o.rlserver, dir, 0, logf, "--data-dir", "")
		if err != nil {
			return err
		}
		defer rlAll.stop()
		variants = append(variants, variant{", all cores", rlAll})
	}
	rlGo, err := startRLServer("rlserver-gor", o.rlserver, dir, o.procs, logf, "--io-loops", "-1", "--data-dir", "")
	if err != nil {
		return err
	}
	defer rlGo.stop()
	variants = append(variants, variant{", goroutine per connection", rlGo})
	if o.durable {
		for _, mode := range []string{"fast", "strong"} {
			d, err := startRLServer("rlserver-"+mode, o.rlserver, dir, o.procs, logf, "--consistency", mode)
			if err != nil {
				return err
			}
			defer d.stop()
			variants = append(variants, variant{", durable " + mode, d})
		}
	}
	rd, err := startRedis(o.redisServer, dir, logf)
	if err != nil {
		return err
	}
	defer rd.stop()
	scripts, err := loadScripts(rd, o.luaref)
	if err != nil {
		return err
	}
	ctx := context.Background()
	for _, pipeline := range []int{16, 1} {
		fmt.Printf("== throughput, %d connections, pipeline %d, %d rounds\n", o.conns, pipeline, o.rounds)
		runs, err := throughput(ctx, o, rl, variants, rd, scripts, pipeline)
		if err != nil {
			return err
		}
		rep.Runs = append(rep.Runs, runs...)
	}
	if o.redisBenchmark != "" {
		fmt.Println("== redis-benchmark")
		if rep.RedisBenchmark, err = redisBenchmarks(o, rl, variants, rd, scripts); err != nil {
			return err
		}
	}
	if o.memKeys > 0 {
		fmt.Printf("== memory, %d keys per algorithm\n", o.memKeys)
		if rep.Memory, err = memory(ctx, o, rl, rd, scripts); err != nil {
			return err
		}
	}
	if o.durable && o.memKeys > 0 {
		fmt.Printf("== restart of a durable rlserver with %d keys\n", o.memKeys)
		if rep.Restart, err = restartBench(ctx, o, dir, logf); err != nil {
			return err
		}
	}
	if o.goTest {
		fmt.Println("== allocations per check (go test)")
		rep.Allocs = allocBenchmark()
	}
	rep.Elapsed = time.Since(start).Round(time.Second).String()
	rep.evaluate()
	return rep.write(o.out)
}

func (o options) summary() map[string]string {
	return map[string]string{
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
