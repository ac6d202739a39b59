package main

import (
	"encoding/csv"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/bench/nodes"
)

// RBRun is the median of redis-benchmark runs of one command on one server.
type RBRun struct {
	Label     string  `json:"label"`
	Server    string  `json:"server"`
	Args      string  `json:"args"` // the redis-benchmark arguments, without -h/-p
	Pipeline  int     `json:"pipeline"`
	RPS       float64 `json:"rps"`
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
	CPUPerReq float64 `json:"server_cpu_us_per_request"`
	// KernelPerReq is the part of CPUPerReq the server spent in the
	// kernel: its reads, writes and waits, and the loopback network's
	// work they do.
	KernelPerReq float64   `json:"server_kernel_cpu_us_per_request"`
	RoundsRPS    []float64 `json:"rounds_rps"`
}

type rbSpec struct {
	label    string
	srv      *server
	pipeline int
	n        int
	cmd      string
	keys     uint64 // redis-benchmark's -r; 0 takes -keys
}

// redisBenchmarks runs the headline comparisons of the chosen sections
// with redis-benchmark, so that they can be reproduced with the standard
// tool alone.
func redisBenchmarks(o options, f *fleet, secs sections) ([]RBRun, error) {
	specs := rbSpecs(f, secs, time.Now().UnixMicro())
	samples := make([][]RBRun, len(specs))
	for round := 0; round < o.rounds; round++ {
		for k := range specs {
			i := k
			if round%2 == 1 {
				i = len(specs) - 1 - k
			}
			r, err := redisBenchmark(o, specs[i])
			if err != nil {
				return nil, err
			}
			samples[i] = append(samples[i], r)
			fmt.Printf("  round %d  %-42s %-19s P%-2d %9.0f rps  p50 %.3f ms  p99 %.3f ms  cpu %.2f µs/req\n",
				round+1, r.Label, r.Server, r.Pipeline, r.RPS, r.P50ms, r.P99ms, r.CPUPerReq)
		}
	}
	out := make([]RBRun, len(specs))
	for i, ss := range samples {
		r := ss[0]
		var rps, p50, p99, cpu, kernel []float64
		for _, s := range ss {
			rps, p50, p99, cpu = append(rps, s.RPS), append(p50, s.P50ms), append(p99, s.P99ms), append(cpu, s.CPUPerReq)
			kernel = append(kernel, s.KernelPerReq)
		}
		r.RPS, r.P50ms, r.P99ms, r.CPUPerReq, r.RoundsRPS = nodes.Median(rps), nodes.Median(p50), nodes.Median(p99), nodes.Median(cpu), rps
		r.KernelPerReq = nodes.Median(kernel)
		out[i] = r
	}
	return out, nil
}

// rbSpecs lists the redis-benchmark runs of the chosen sections: -n is
// 1,000,000 at -P 16 and 200,000 at -P 1, fewer for the slower servers
// (the Lua scripts; strong mode and AOF always, which wait for fsyncs), so
// that no run takes much longer than the others; the rows compared with
// each other get the same -n. redis-benchmark cannot send the current
// time: the scripts get a fixed clock, now, which admits as much as a
// moving one over so few calls per key (3 to 10, limit 100) and does the
// same work per call.
func rbSpecs(f *fleet, secs sections, now int64) []rbSpec {
	check := "RL.CHECK key:__rand_int__ token 100 60"
	incr := "INCR key:__rand_int__"
	lua := func(a string) string {
		return fmt.Sprintf("EVALSHA %s 1 key:__rand_int__ 100 60000000 %d 1 0", f.shas[a], now)
	}
	var specs []rbSpec
	// add adds s's runs: -n n16 at -P 16, and -n n1 at -P 1 unless n1 is 0.
	add := func(label string, s *server, cmd string, n16, n1 int) {
		if s != nil {
			specs = append(specs, rbSpec{label, s, 16, n16, cmd, 0})
		}
		if s != nil && n1 > 0 {
			specs = append(specs, rbSpec{label, s, 1, n1, cmd, 0})
		}
	}
	if secs[secThroughput] || secs[secDurable] {
		add(labelToken, f.rl, check, 1000000, 200000)
		add(labelToken+allCores, f.rlAll, check, 1000000, 200000)
	}
	if secs[secThroughput] {
		add("INCR", f.redis, incr, 1000000, 200000)
		add(labelToken+", goroutine per connection", f.rlGo, check, 1000000, 200000)
		for _, a := range []string{"token", "log"} {
			if _, ok := f.shas[a]; ok {
				add("EVALSHA "+a+".lua", f.redis, lua(a), 300000, 0)
			}
		}
		add("RL.CHECK log", f.rl, "RL.CHECK key:__rand_int__ log 100 60", 1000000, 0)
		// The cheapest reply of each server at -P 1 (floorTargets).
		rl, sfx := f.rlAll, allCores
		if rl == nil {
			rl, sfx = f.rl, ""
		}
		for _, p := range []struct {
			label string
			s     *server
		}{{labelPingRL + sfx, rl}, {labelPingRedis, f.redis}} {
			if p.s != nil {
				specs = append(specs, rbSpec{p.label, p.s, 1, 200000, "PING", 0})
			}
		}
	}
	if secs[secDurable] {
		add(labelFast, f.fast, check, 1000000, 200000)
		add(labelFast+allCores, f.fastAll, check, 1000000, 200000)
		add(labelEverysec, f.aofEverysec, incr, 1000000, 200000)
		if _, ok := f.shas["token"]; ok {
			add(labelLuaAOF, f.aofEverysec, lua("token"), 300000, 100000)
		}
		add(labelStrong, f.strong, check, 300000, 50000)
		add(labelStrong+allCores, f.strongAll, check, 300000, 50000)
		add(labelAlways, f.aofAlways, incr, 300000, 50000)
	}
	if secs[secScripts] {
		specs = append(specs, scriptSpecs(f, now)...)
	}
	return specs
}

func redisBenchmark(o options, sp rbSpec) (RBRun, error) {
	if _, err := sp.srv.cli.Do("FLUSHALL"); err != nil {
		return RBRun{}, err
	}
	host, port, _ := strings.Cut(sp.srv.addr, ":")
	keys := o.keys
	if sp.keys > 0 {
		keys = sp.keys
	}
	args := []string{"-c", strconv.Itoa(o.conns), "-P", strconv.Itoa(sp.pipeline),
		"-r", strconv.FormatUint(keys, 10), "-n", strconv.Itoa(sp.n)}
	args = append(args, strings.Fields(sp.cmd)...)
	user0, kernel0 := sp.srv.cpuSplit()
	b, err := exec.Command(o.redisBenchmark, append([]string{"-h", host, "-p", port, "--csv"}, args...)...).Output()
	if err != nil {
		return RBRun{}, fmt.Errorf("redis-benchmark %s: %w", strings.Join(args, " "), err)
	}
	user1, kernel1 := sp.srv.cpuSplit()
	used, kernel := user1+kernel1-user0-kernel0, kernel1-kernel0
	recs, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
	if err != nil || len(recs) < 2 || len(recs[len(recs)-1]) < 7 {
		return RBRun{}, fmt.Errorf("redis-benchmark output %q: %v", b, err)
	}
	last := recs[len(recs)-1]
	f := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
	return RBRun{Label: sp.label, Server: sp.srv.name, Args: "-q " + strings.Join(args, " "), Pipeline: sp.pipeline,
		RPS: f(last[1]), P50ms: f(last[4]), P99ms: f(last[6]),
		CPUPerReq: float64(used.Microseconds()) / float64(sp.n), KernelPerReq: float64(kernel.Microseconds()) / float64(sp.n)}, nil
}
