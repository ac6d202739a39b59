package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/rlserver/rlserver/bench/nodes"
	"github.com/rlserver/rlserver/internal/rlproc"
)

// Idle is the CPU one idle setup used: the percent of one core each of its
// processes (the nodes of a cluster) spent over the same window, and how
// many times a second its threads were switched out (its wake-ups, a
// steadier figure than the CPU on a busy machine).
type Idle struct {
	Setup    string    `json:"setup"`
	Flags    string    `json:"flags"` // "default" or "--procs 1"
	Percent  []float64 `json:"percent_of_core"`
	Switches []float64 `json:"context_switches_per_s,omitempty"`
	Window   float64   `json:"window_s"`
}

// The idle setups, as the table and the targets name them.
const (
	idleCluster  = "three-node cluster"
	idleDurable  = "single durable node"
	idleInMemory = "in-memory node"
	idleRedis    = "redis-server"
)

// idleSetup is one setup to start: a cluster of three nodes or a single
// node, with extra flags.
type idleSetup struct {
	name    string
	cluster bool
	flags   []string
}

// idleProcs is one started setup and the process ids to read.
type idleProcs struct {
	setup, flags string
	pids         []int
	stop         func()
}

// idleBench starts every idle setup at once, with rlserver's default
// flags and with --procs 1, lets them settle, and reads each process's
// CPU time over the same window of o.idle: the processes do (almost)
// nothing, so they do not disturb each other's figures.
func idleBench(o options, dir string, logw io.Writer) ([]Idle, error) {
	var ps []idleProcs
	defer func() {
		for _, p := range ps {
			p.stop()
		}
	}()
	setups := []idleSetup{{idleCluster, true, nil}, {idleDurable, false, nil}, {idleInMemory, false, []string{"--data-dir", ""}}}
	for _, fl := range []struct {
		name  string
		flags []string
	}{{"default", nil}, {"--procs 1", []string{"--procs", "1"}}, {"--rest-after 0", []string{"--rest-after", "0"}}} {
		for _, s := range setups {
			p, err := startIdle(o, s, fl.name, fl.flags, filepath.Join(dir, fmt.Sprintf("idle-%d", len(ps))), logw)
			if err != nil {
				return nil, err
			}
			ps = append(ps, p)
		}
	}
	rd, err := startRedis("redis-idle", o.redisServer, filepath.Join(dir, "redis-idle"), logw, "--appendonly", "no")
	if err != nil {
		return nil, err
	}
	ps = append(ps, idleProcs{idleRedis, "—", []int{rd.p.Pid()}, rd.stop})
	time.Sleep(o.idleSettle)
	return measureIdle(ps, o.idle), nil
}

// startIdle starts one setup; a cluster is waited on until it is balanced.
func startIdle(o options, s idleSetup, flagName string, flags []string, dir string, logw io.Writer) (idleProcs, error) {
	ns, err := nodes.Start(nodes.Spec{Bin: o.rlserver, Dir: dir, Nodes: 3, Log: logw, Cluster: s.cluster,
		Flags: append(append([]string{}, s.flags...), flags...)})
	if err != nil {
		return idleProcs{}, fmt.Errorf("idle %s (%s): %w", s.name, flagName, err)
	}
	p := idleProcs{setup: s.name, flags: flagName, stop: func() { nodes.StopAll(ns) }}
	for _, nd := range ns {
		p.pids = append(p.pids, nd.Pid())
	}
	if s.cluster {
		if _, err := nodes.WaitBalanced(ns[0], 30*time.Second); err != nil {
			p.stop()
			return idleProcs{}, fmt.Errorf("idle %s (%s): %w", s.name, flagName, err)
		}
	}
	return p, nil
}

// measureIdle reads the CPU time of every process at the start and at the
// end of one window of d.
func measureIdle(ps []idleProcs, d time.Duration) []Idle {
	before := make([][]time.Duration, len(ps))
	switched := make([][]uint64, len(ps))
	for i, p := range ps {
		for _, pid := range p.pids {
			before[i] = append(before[i], rlproc.CPUOf(pid))
			switched[i] = append(switched[i], rlproc.SwitchesOf(pid))
		}
	}
	t0 := time.Now()
	time.Sleep(d)
	window := time.Since(t0)
	out := make([]Idle, len(ps))
	for i, p := range ps {
		out[i] = Idle{Setup: p.setup, Flags: p.flags, Window: window.Seconds()}
		for j, pid := range p.pids {
			used := rlproc.CPUOf(pid) - before[i][j]
			out[i].Percent = append(out[i].Percent, 100*used.Seconds()/window.Seconds())
			now := rlproc.SwitchesOf(pid)
			n := now - min(switched[i][j], now) // a thread that exits takes its count
			out[i].Switches = append(out[i].Switches, float64(n)/window.Seconds())
		}
		fmt.Printf("  %-20s %-10s %s of a core, %s context switches a second\n", p.setup, p.flags, percents(out[i].Percent),
			perSecond(out[i].Switches))
	}
	return out
}

// perSecond formats per-process rates: "780 812 655".
func perSecond(v []float64) string { return joinf("%.0f", v) }

// percents formats per-process percentages: "0.12% 0.10% 0.35%".
func percents(v []float64) string { return joinf("%.2f%%", v) }

// joinf formats each of v with format, separated by spaces.
func joinf(format string, v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(s, " ")
}

// idleTargets: an idle cluster node ≤ 2% of a core, an idle single node
// (durable or in memory) ≤ 0.5%, with either flags.
func (r *report) idleTargets() {
	for _, x := range r.Idle {
		limit := map[string]float64{idleCluster: 2, idleDurable: 0.5, idleInMemory: 0.5}[x.Setup]
		if limit == 0 || len(x.Percent) == 0 {
			continue
		}
		worst := 0.0
		for _, v := range x.Percent {
			worst = max(worst, v)
		}
		name := fmt.Sprintf("idle CPU, %s, %s flags", x.Setup, x.Flags)
		if x.Flags != "default" {
			name = fmt.Sprintf("idle CPU, %s, %s", x.Setup, x.Flags)
		}
		goal := fmt.Sprintf("≤ %g%% of a core", limit)
		if x.Setup == idleCluster {
			goal += " per node"
		}
		r.Targets = append(r.Targets, Target{Name: name, Goal: goal,
			Measured: fmt.Sprintf("%s (over %.0f s)", percents(x.Percent), x.Window), Value: worst, Met: worst <= limit})
	}
}

// idleTable writes the idle setups' CPU.
func (r *report) idleTable(b *strings.Builder) {
	if len(r.Idle) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Idle CPU\n\n")
	b.WriteString("Every setup started at once, each process with its own data directory, and left alone: no client " +
		"connection. After they settled (the cluster balanced, then the section's -idle-settle, 30 s by default, " +
		"in which a node's start ends and it rests: `--rest-after`), each process's user+system time " +
		"(`/proc/<pid>/stat`) over the same window, as a percentage of one core, and its threads' context switches " +
		"a second (`/proc/<pid>/task/*/status`: its wake-ups, steadier than the CPU on a busy machine). *default* is rlserver's default " +
		"flags (every core, event loops, fast consistency, an idle process on one core after 10 s: `--rest-after`); " +
		"*--rest-after 0* keeps every core; the in-memory node has `--data-dir \"\"`; Redis runs " +
		"without persistence.\n\n")
	b.WriteString("| setup | rlserver flags | % of a core, per process | context switches a second, per process | window |\n|---|---|---|---|---:|\n")
	for _, x := range r.Idle {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %.0f s |\n", x.Setup, x.Flags, percents(x.Percent), perSecond(x.Switches), x.Window)
	}
}
