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

// rbCommand is redis-benchmark's command on every setup: with --cluster
// it replaces {tag} with a tag of a slot of the master each connection
// talks to, so that all of one master's keys share one slot (one group
// of rlserver's); without it the key just holds the text {tag}, which
// keeps the requests the same size.
const rbCommand = "RL.CHECK key:{tag}:__rand_int__ token 100 60"

// redisBenchmark runs redis-benchmark once against s: plain against the
// single node, --cluster against the cluster. Its -n is sized so that
// the run lasts about -d at the rate redis-benchmark last had on s
// (1,000,000 the first time).
func (b *bench) redisBenchmark(s setup, ns []*nodes.Node) (Sample, error) {
	o := b.o
	n := 1000000
	if r := b.lastRPS[s.Name+" "+toolRB]; r > 0 {
		n = max(100000, int(r*o.duration.Seconds()))
	}
	host, port, _ := strings.Cut(ns[0].RESP, ":")
	args := []string{"-c", strconv.Itoa(o.conns), "-P", strconv.Itoa(o.pipeline), "-r", strconv.FormatUint(o.keys, 10),
		"-n", strconv.Itoa(n)}
	if s.Cluster {
		args = append(args, "--cluster")
		if o.rbThreads > 0 {
			args = append(args, "--threads", strconv.Itoa(o.rbThreads))
		}
	}
	args = append(args, strings.Fields(rbCommand)...)
	cpu0 := nodes.CPUs(ns)
	cmd := exec.Command(o.redisBenchmark, append([]string{"-h", host, "-p", port, "--csv"}, args...)...)
	t0 := time.Now()
	out, err := cmd.Output()
	if err != nil {
		return Sample{}, fmt.Errorf("redis-benchmark %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	wall := time.Since(t0)
	used := diff(nodes.CPUs(ns), cpu0)
	rec, err := lastCSV(string(out))
	if err != nil {
		return Sample{}, err
	}
	f := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
	smp := Sample{Args: strings.Join(args, " "), RPS: f(rec[1]), P50: 1000 * f(rec[4]), P99: 1000 * f(rec[6]), Replies: uint64(n)}
	smp.perRequest(used, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
	if smp.RPS <= 0 || wall <= 0 {
		return Sample{}, fmt.Errorf("redis-benchmark output %q", out)
	}
	b.lastRPS[s.Name+" "+toolRB] = smp.RPS
	return smp, nil
}

// lastCSV returns the last line of redis-benchmark --csv's output as
// fields: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",
// "p95_latency_ms","p99_latency_ms","max_latency_ms". With --cluster the
// masters are listed first, as plain text.
func lastCSV(out string) ([]string, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	rec, err := csv.NewReader(strings.NewReader(lines[len(lines)-1])).Read()
	if err != nil || len(rec) < 7 || rec[0] == "test" {
		return nil, fmt.Errorf("redis-benchmark output %q: %v", out, err)
	}
	return rec, nil
}
