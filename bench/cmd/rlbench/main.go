// Command rlbench is a load generator for RESP servers: rlserver, Redis or
// anything that speaks the protocol. It opens -c connections, each writing
// -P pipelined commands per round trip, draws key numbers from a uniform or
// zipf distribution, and reports throughput and latency percentiles from a
// log-linear histogram, as a table and optionally as JSON.
//
//	rlbench -addr 127.0.0.1:6379 -c 50 -P 16 -r 100000 -d 5s \
//	    -cmd 'RL.CHECK key:__rand_int__ token 100 60'
//	rlbench -algos fixed,token,gcra -dist zipf
//	rlbench -script luaref/token.lua \
//	    -cmd 'EVALSHA __sha__ 1 key:__rand_int__ 100 60000000 __now_us__ 1 0'
//
// With -cluster, -addr is any node of a Redis Cluster (or an rlserver
// cluster): rlbench reads CLUSTER SLOTS and sends each request to the node
// serving its key's slot (the first argument holding __rand_int__, else
// the command's first argument; {hash tags} count as in Redis). Each of the
// -c connections keeps a socket per node: a pipelined batch is split by
// node, every part written before the replies are read, node after node.
// MOVED updates the slot map and resends (counted as redirects, not
// errors); TRYAGAIN and CLUSTERDOWN are retried after 10 ms and counted.
//
//	rlbench -cluster -addr 127.0.0.1:7001 -P 16 -cmd 'RL.CHECK key:__rand_int__ token 100 60'
//
// Placeholders: __rand_int__ (12-digit key number, as redis-benchmark),
// __now_us__ (client clock in µs), __sha__ / __sha1__... (SHA1 of the
// scripts given with -script, loaded with SCRIPT LOAD before the run).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/bench/load"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ", ") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "rlbench:", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg load.Config
	var cmds, scripts multi
	var algos, jsonOut string
	var limit int
	var window string
	flag.StringVar(&cfg.Addr, "addr", "127.0.0.1:6379", "server address host:port")
	flag.StringVar(&cfg.Password, "a", "", "AUTH password")
	flag.IntVar(&cfg.Conns, "c", 50, "connections")
	flag.IntVar(&cfg.Pipeline, "P", 1, "pipeline depth: commands per round trip")
	flag.Uint64Var(&cfg.Keys, "r", 100000, "key space: __rand_int__ is drawn from [0, r)")
	flag.StringVar(&cfg.Dist, "dist", "uniform", "key distribution: uniform, zipf, or seq (each key once, in order)")
	flag.Float64Var(&cfg.ZipfS, "zipf-s", 1.1, "zipf exponent (> 1; larger is hotter)")
	flag.DurationVar(&cfg.Duration, "d", 5*time.Second, "measured duration (after -warmup)")
	flag.Int64Var(&cfg.Requests, "n", 0, "total requests instead of a duration")
	flag.DurationVar(&cfg.Warmup, "warmup", time.Second, "unmeasured time before -d starts")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "random seed")
	flag.StringVar(&cfg.Name, "name", "", "label for the report (default: the first command)")
	flag.Var(&cmds, "cmd", "command template (repeatable; mixed uniformly at random)")
	flag.Var(&scripts, "script", "Lua file to SCRIPT LOAD before the run (repeatable); its SHA1 replaces __sha__ (__sha1__, __sha2__, ...)")
	flag.StringVar(&algos, "algos", "", "comma-separated algorithms: adds RL.CHECK key:ALGO:__rand_int__ ALGO -limit -window for each")
	flag.IntVar(&limit, "limit", 100, "limit for -algos")
	flag.StringVar(&window, "window", "60", "window for -algos")
	flag.BoolVar(&cfg.Cluster, "cluster", false, "cluster mode: route each request to the node serving its key's slot (CLUSTER SLOTS from -addr)")
	flag.StringVar(&jsonOut, "json", "", `write the result as JSON to this file ("-" for stdout)`)
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", flag.Arg(0))
	}
	cmds = append(cmds, algoCommands(algos, limit, window)...)
	if len(cmds) == 0 {
		cmds = append(cmds, "RL.CHECK key:"+load.RandInt+" token 100 60")
	}
	shas, err := loadScriptsAll(cfg, scripts)
	if err != nil {
		return err
	}
	for _, c := range cmds {
		for i := len(shas) - 1; i >= 0; i-- {
			c = strings.ReplaceAll(c, "__sha"+strconv.Itoa(i+1)+"__", shas[i])
		}
		if len(shas) > 0 {
			c = strings.ReplaceAll(c, "__sha__", shas[0])
		}
		t, err := load.ParseTemplate(c)
		if err != nil {
			return err
		}
		cfg.Templates = append(cfg.Templates, t)
	}
	if cfg.Name == "" {
		cfg.Name = strings.Fields(cmds[0])[0]
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := load.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if jsonOut != "-" {
		if err := load.WriteTable(os.Stdout, []*load.Result{res}); err != nil {
			return err
		}
	}
	if jsonOut == "" {
		return nil
	}
	data, _ := json.MarshalIndent(res, "", "  ")
	data = append(data, '\n')
	if jsonOut == "-" {
		_, err = os.Stdout.Write(data)
		return err
	}
	return os.WriteFile(jsonOut, data, 0o644)
}

// algoCommands returns the RL.CHECK template of each algorithm in the
// comma-separated list. Each algorithm has keys of its own
// (key:fixed:__rand_int__, ...): a key holds one algorithm's state, and
// checking it with another is WRONGTYPE.
func algoCommands(algos string, limit int, window string) []string {
	var cmds []string
	for _, a := range strings.Split(algos, ",") {
		if a = strings.TrimSpace(a); a != "" {
			cmds = append(cmds, fmt.Sprintf("RL.CHECK key:%s:%s %s %d %s", strings.ToLower(a), load.RandInt, a, limit, window))
		}
	}
	return cmds
}

// loadScriptsAll loads the scripts into -addr or, with -cluster, into
// every node that serves slots.
func loadScriptsAll(cfg load.Config, paths []string) ([]string, error) {
	if !cfg.Cluster || len(paths) == 0 {
		return loadScripts(cfg.Addr, cfg.Password, paths)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := load.NewCluster(ctx, []string{cfg.Addr}, cfg.Password)
	if err != nil {
		return nil, err
	}
	var shas []string
	for _, addr := range cl.Addrs() {
		if shas, err = loadScripts(addr, cfg.Password, paths); err != nil {
			return nil, err
		}
	}
	return shas, nil
}

func loadScripts(addr, password string, paths []string) ([]string, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	c, err := load.Dial(addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if password != "" {
		if _, err := c.Do("AUTH", password); err != nil {
			return nil, err
		}
	}
	var shas []string
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		sha, err := c.Do("SCRIPT", "LOAD", string(src))
		if err != nil {
			return nil, fmt.Errorf("SCRIPT LOAD %s: %w", p, err)
		}
		shas = append(shas, sha)
	}
	return shas, nil
}
