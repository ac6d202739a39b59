// Command soak runs redis-benchmark's key flood against rlserver bounded
// by --maxmemory, for a set time, while a bystander client checks its own
// key and PINGs, and records the server's resident memory once a second.
// Issue 10's two long measurements are this tool:
//
//	make build
//	go run ./bench/cmd/soak -name flood -d 60s  # the 60 s key flood against --maxmemory 256mb
//	go run ./bench/cmd/soak -name soak -d 10m   # the 10-minute soak
//
// (make flood and make soak.) The load is exactly
//
//	redis-benchmark -c 50 -P 16 -r 100000000 -l RL.CHECK key:__rand_int__ token 100 1h
//
// (-l loops until the time is up): a new key nearly every request, each
// holding state for 36 s, far past the bound. It writes <name>.md (peak and
// final RSS, used memory, evictions, requests served, the bystander's
// checks, exact or not, and its longest wait), <name>.json (the same and
// every sample) and <name>.png (RSS and used_memory over time against
// maxmemory) to -out, bench/results by default.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

type options struct {
	rlserver, bench, maxmemory, name, out string
	mode, redisServer                     string
	d, interval                           time.Duration
	clients, pipeline                     int
	keys                                  int
	procs                                 int
}

func main() {
	var o options
	flag.StringVar(&o.rlserver, "rlserver", "bin/rlserver", "rlserver binary (make build)")
	flag.StringVar(&o.bench, "redis-benchmark", "redis-benchmark", "redis-benchmark binary")
	flag.StringVar(&o.maxmemory, "maxmemory", "256mb", "rlserver's --maxmemory")
	flag.StringVar(&o.name, "name", "soak", "name of the run: its files are <out>/<name>.md, .json, .png")
	flag.StringVar(&o.out, "out", "bench/results", "directory for the results")
	flag.DurationVar(&o.d, "d", 10*time.Minute, "duration of the load")
	flag.DurationVar(&o.interval, "interval", time.Second, "time between samples")
	flag.IntVar(&o.clients, "c", 50, "redis-benchmark connections")
	flag.IntVar(&o.pipeline, "P", 16, "redis-benchmark pipeline depth")
	flag.IntVar(&o.keys, "r", 100000000, "redis-benchmark key range (-r)")
	flag.IntVar(&o.procs, "procs", 0, "rlserver's --procs (0: every core)")
	flag.StringVar(&o.mode, "mode", "fast", "rlserver's mode: memory (--data-dir \"\"), fast or strong (durable, --consistency)")
	flag.StringVar(&o.redisServer, "redis-server", "", "also flood this redis-server, with maxmemory and volatile-ttl, beside rlserver: "+
		"EVALSHA of luaref's token bucket, a new key a request (\"\": rlserver only)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	dir, err := os.MkdirTemp("", "rlserver-soak")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := startServer(o, dir)
	if err != nil {
		return err
	}
	defer srv.stop()
	by, err := startBystander(srv.addr)
	if err != nil {
		return err
	}
	samples := srv.sample(o.interval)
	loadErr := flood(o, srv.addr, "RL.CHECK", "key:__rand_int__", "token", "100", "1h")
	s := summarize(o, samples.stop(), by.stop(), srv)
	s.CleanExit = srv.stop() == nil
	if o.redisServer != "" && loadErr == nil {
		r, err := floodRedis(o, dir)
		if err != nil {
			return err
		}
		s.Redis = &r
	}
	if err := s.write(o); err != nil {
		return err
	}
	fmt.Print(s.markdown())
	if loadErr != nil {
		return loadErr
	}
	if !s.Bystander.Exact || !s.CleanExit {
		return fmt.Errorf("the bystander's counts were exact: %v; the server stopped cleanly: %v", s.Bystander.Exact, s.CleanExit)
	}
	return nil
}
