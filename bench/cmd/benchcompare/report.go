package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/rlserver/rlserver/bench/chart"
	"github.com/rlserver/rlserver/bench/nodes"
)

// report is everything one run measured.
type report struct {
	Machine        map[string]string `json:"machine"`
	Options        map[string]string `json:"options"`
	Runs           []Run             `json:"runs"`
	RedisBenchmark []RBRun           `json:"redis_benchmark"`
	Memory         []Mem             `json:"memory"`
	Allocs         *AllocResult      `json:"allocs,omitempty"`
	Restart        *Restart          `json:"restart,omitempty"`
	Idle           []Idle            `json:"idle,omitempty"`
	Targets        []Target          `json:"targets"`
	Elapsed        string            `json:"elapsed"`
}

// Target is one goal of the comparison and whether this run met it.
type Target struct {
	Name     string  `json:"name"`
	Goal     string  `json:"goal"`
	Measured string  `json:"measured"`
	Value    float64 `json:"value"`
	Met      bool    `json:"met"`
	// Informative rows have no goal: shown for comparison, neither met
	// nor missed.
	Informative bool `json:"informative,omitempty"`
}

// AllocResult is the server's allocation benchmark, from go test.
type AllocResult struct {
	Command string  `json:"command"`
	Output  string  `json:"output"`
	Allocs  float64 `json:"allocs_per_op"`
	OK      bool    `json:"ok"`
}

// allocBenchmark runs the server's connection-path benchmark and reads its
// allocations per check.
func allocBenchmark() *AllocResult {
	args := []string{"test", "-run", "^$", "-bench", "BenchmarkConnCheck", "-benchmem", "-benchtime", "200000x", "./server"}
	r := &AllocResult{Command: "go " + strings.Join(args, " ")}
	b, err := exec.Command("go", args...).CombinedOutput()
	r.Output = strings.TrimSpace(string(b))
	if err != nil {
		r.Allocs = -1
		return r
	}
	r.OK = true
	for _, line := range strings.Split(r.Output, "\n") {
		f := strings.Fields(line)
		for i := 1; i < len(f); i++ {
			if f[i] == "allocs/op" {
				var v float64
				fmt.Sscan(f[i-1], &v)
				r.Allocs = max(r.Allocs, v)
				r.OK = r.OK && v == 0
			}
		}
	}
	return r
}

func (r *report) run(label string, pipeline int) *Run {
	for i := range r.Runs {
		if r.Runs[i].Label == label && r.Runs[i].Pipeline == pipeline {
			return &r.Runs[i]
		}
	}
	return nil
}

func (r *report) rb(label string, pipeline int) *RBRun {
	for i := range r.RedisBenchmark {
		if r.RedisBenchmark[i].Label == label && r.RedisBenchmark[i].Pipeline == pipeline {
			return &r.RedisBenchmark[i]
		}
	}
	return nil
}

func (r *report) mem(algo string) *Mem {
	for i := range r.Memory {
		if r.Memory[i].Algo == algo {
			return &r.Memory[i]
		}
	}
	return nil
}

// evaluate computes the targets from the measurements.
func (r *report) evaluate() {
	ratio := func(name, goal string, a, b *Run, min float64) {
		if a == nil || b == nil || b.RPS == 0 {
			return
		}
		v := a.RPS / b.RPS
		r.Targets = append(r.Targets, Target{Name: name, Goal: goal, Measured: ratioText(v, min) + fmt.Sprintf(" (%.0f vs %.0f rps)", a.RPS, b.RPS),
			Value: v, Met: v >= min})
	}
	for _, p := range []int{16, 1} {
		ratio(fmt.Sprintf("RL.CHECK token vs Redis INCR, -P %d, rlbench", p), "≥ 1.0×", r.run("RL.CHECK token", p), r.run("INCR", p), 1)
		if a, b := r.rb("RL.CHECK token", p), r.rb("INCR", p); a != nil && b != nil && b.RPS > 0 {
			v := a.RPS / b.RPS
			r.Targets = append(r.Targets, Target{Name: fmt.Sprintf("RL.CHECK token vs Redis INCR, -P %d, redis-benchmark", p),
				Goal: "≥ 1.0×", Measured: ratioText(v, 1) + fmt.Sprintf(" (%.0f vs %.0f rps)", a.RPS, b.RPS), Value: v, Met: v >= 1})
		}
	}
	rbRatio := func(name, goal string, a, b *RBRun, min float64) {
		if a == nil || b == nil || b.RPS == 0 {
			return
		}
		v := a.RPS / b.RPS
		r.Targets = append(r.Targets, Target{Name: name, Goal: goal, Measured: ratioText(v, min) + fmt.Sprintf(" (%.0f vs %.0f rps)", a.RPS, b.RPS),
			Value: v, Met: v >= min})
	}
	for _, a := range []struct {
		algo string
		min  float64
	}{{"token", 5}, {"log", 10}} {
		goal := fmt.Sprintf("≥ %g×", a.min)
		ratio("RL.CHECK "+a.algo+" vs EVALSHA "+a.algo+".lua, -P 16, rlbench", goal,
			r.run("RL.CHECK "+a.algo, 16), r.run("EVALSHA "+a.algo+".lua", 16), a.min)
		rbRatio("RL.CHECK "+a.algo+" vs EVALSHA "+a.algo+".lua, -P 16, redis-benchmark", goal,
			r.rb("RL.CHECK "+a.algo, 16), r.rb("EVALSHA "+a.algo+".lua", 16), a.min)
	}
	if a, b := r.run("RL.CHECK token", 1), r.run("INCR", 1); a != nil && b != nil {
		r.Targets = append(r.Targets, Target{Name: "p99 latency, RL.CHECK token vs INCR, -P 1, rlbench", Goal: "≤ INCR's",
			Measured: fmt.Sprintf("%.0f µs vs %.0f µs", a.P99, b.P99), Value: a.P99 / b.P99, Met: a.P99 <= b.P99})
	}
	if a, b := r.rb("RL.CHECK token", 1), r.rb("INCR", 1); a != nil && b != nil {
		r.Targets = append(r.Targets, Target{Name: "p99 latency, RL.CHECK token vs INCR, -P 1, redis-benchmark", Goal: "≤ INCR's",
			Measured: fmt.Sprintf("%.3f ms vs %.3f ms", a.P99ms, b.P99ms), Value: a.P99ms / b.P99ms, Met: a.P99ms <= b.P99ms})
	}
	for _, a := range []string{"fixed", "token", "gcra"} {
		if m := r.mem(a); m != nil && m.Ratio > 0 {
			r.Targets = append(r.Targets, Target{Name: "bytes per key, " + a + " vs " + m.RedisScript, Goal: "≤ 0.5×",
				Measured: ratioText(m.Ratio, 0.5) + fmt.Sprintf(" (%.1f vs %.1f B)", m.RLBytes, m.RedisBytes), Value: m.Ratio, Met: m.Ratio <= 0.5})
		}
	}
	r.durableTargets(ratio, rbRatio)
	r.floorTargets()
	r.evaluateScripts()
	r.idleTargets()
	if r.Allocs != nil {
		r.Targets = append(r.Targets, Target{Name: "allocations per RL.CHECK over the real connection path", Goal: "0",
			Measured: fmt.Sprintf("%g allocs/op", r.Allocs.Allocs), Value: r.Allocs.Allocs, Met: r.Allocs.OK})
	}
}

// floorTargets sets beside the -P 1 ratios with default flags where each
// server's CPU a request goes: user mode (parsing, the command, the reply)
// and the kernel (a read and a write a request on a loopback socket, the
// waits, and for the durable rows the log's writes and fsyncs), as
// "user + kernel". In memory it adds each server's PING rate, the
// cheapest reply: at -P 1 both servers make one read and one write a
// request, and their kernel time and PING rates set a floor that a
// command's rate sits just under. Informative rows.
func (r *report) floorTargets() {
	sfx := allCores
	if r.Options["procs"] == "0" {
		sfx = ""
	}
	pa, pb := r.rb(labelPingRL+sfx, 1), r.rb(labelPingRedis, 1)
	for _, x := range []struct{ name, rl, redis string }{
		{"in memory RL.CHECK token vs Redis INCR", labelToken + sfx, "INCR"},
		{"durable fast RL.CHECK token vs Redis INCR with AOF everysec", labelFast + sfx, labelEverysec},
		{"durable strong RL.CHECK token vs Redis INCR with AOF always", labelStrong + sfx, labelAlways},
	} {
		a, b := r.rb(x.rl, 1), r.rb(x.redis, 1)
		if a == nil || b == nil {
			continue
		}
		ua, ub := a.CPUPerReq-a.KernelPerReq, b.CPUPerReq-b.KernelPerReq
		m := fmt.Sprintf("rlserver %.2f + %.2f µs, Redis %.2f + %.2f µs", ua, a.KernelPerReq, ub, b.KernelPerReq)
		if x.redis == "INCR" && pa != nil && pb != nil && pb.RPS > 0 {
			m += fmt.Sprintf("; PING %.0f vs %.0f rps (%s)", pa.RPS, pb.RPS, ratioText(pa.RPS/pb.RPS, 1))
		}
		r.Targets = append(r.Targets, Target{
			Name: fmt.Sprintf("server CPU a request, user + kernel, %s, -P 1, %s, redis-benchmark", x.name, r.flagsName(sfx)),
			Goal: "—", Measured: m, Value: a.CPUPerReq / b.CPUPerReq, Informative: true})
	}
}

// ratioText formats a ratio with two decimals, or three when two would
// round it onto its goal (0.998× would read 1.00× against a goal of 1×,
// and not be met).
func ratioText(v, goal float64) string {
	if s := fmt.Sprintf("%.2f", v); s != fmt.Sprintf("%.2f", goal) || v == goal {
		return s + "×"
	}
	return fmt.Sprintf("%.3f×", v)
}

func (r *report) write(dir string) error {
	if err := nodes.WriteResults(dir, "results", r, r.markdown()); err != nil {
		return err
	}
	if err := nodes.WriteChart(filepath.Join(dir, "chart.png"), r.chart); err != nil {
		return err
	}
	fmt.Printf("wrote %s/results.md, results.json, chart.png (%s)\n", dir, r.Elapsed)
	return nil
}

func (r *report) markdown() string {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "# rlserver vs Redis: side-by-side figures\n\n")
	fmt.Fprintf(&b, "Generated by `make bench-compare` (bench/cmd/benchcompare) on %s in %s. ", m["date"], r.Elapsed)
	fmt.Fprintf(&b, "Do not edit: rerun it. Analysis and profiles: [README.md](README.md).\n\n")
	fmt.Fprintf(&b, "| machine | |\n|---|---|\n")
	for _, k := range []string{"nproc", "cpu", "kernel", "os", "go", "redis", "rlserver"} {
		fmt.Fprintf(&b, "| %s | %s |\n", k, m[k])
	}
	o := r.Options
	secs := o["sections"]
	if secs == "" { // a results.json from before -only
		secs = "all"
	}
	fmt.Fprintf(&b, "\nThe client (rlbench, Go, or redis-benchmark) and both servers share the same cores, so every "+
		"figure is given beside a reference measured in the same run: each workload ran %s rounds of %s (after %s of "+
		"warm-up), alternating between the servers and reversing the order every other round, and the tables give "+
		"the median. %s connections, keys drawn uniformly from %s. Both servers are emptied (FLUSHALL) before "+
		"each run. Server CPU is the server process's user+system time over the run divided by the replies.\n\n"+
		"The machine's cores are split as evenly as the tools allow: rlserver runs with `--procs %s` "+
		"(GOMAXPROCS), one core, as Redis runs its commands on one thread; the load generator too (rlbench "+
		"with GOMAXPROCS=%s, redis-benchmark is single-threaded). The rows marked *all cores* are a second "+
		"rlserver with the default `--procs 0`, which competes with the client for both cores; the rows marked "+
		"*goroutine per connection* a third, with `--io-loops -1`: connections served by a goroutine each instead "+
		"of event loops. These keep their state in memory (`--data-dir \"\"`), as the reference Redis runs here "+
		"without persistence; the rows marked *durable fast* and *durable strong* are rlservers with a data directory "+
		"(`--consistency fast`, the default, and `strong`), with `--procs %s` and with every core, compared with the "+
		"in-memory ones and with two more redis-servers with their own durability: `--appendonly yes --appendfsync "+
		"everysec` (*AOF everysec*) and `--appendfsync always` (*AOF always*), each with its own directory and "+
		"`--save ''`. Sections run: %s.\n\n",
		o["rounds"], o["duration"], o["warmup"], o["connections"], o["keys"], o["procs"], o["client_procs"], o["procs"], secs)
	b.WriteString("## Targets\n\n| target | goal | measured | met |\n|---|---|---|---|\n")
	for _, t := range r.Targets {
		met := "yes"
		switch {
		case t.Informative:
			met = "(informative)"
		case !t.Met:
			met = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.Name, t.Goal, t.Measured, met)
	}
	for _, p := range []int{16, 1} {
		r.throughputTable(&b, p)
	}
	r.redisBenchmarkTable(&b)
	r.memoryTable(&b)
	r.durableTable(&b)
	r.idleTable(&b)
	if r.Allocs != nil {
		fmt.Fprintf(&b, "\n## Allocations per check\n\n`%s`\n\n```\n%s\n```\n", r.Allocs.Command, r.Allocs.Output)
	}
	b.WriteString("\n![throughput and memory](chart.png)\n")
	return b.String()
}

func (r *report) throughputTable(b *strings.Builder, p int) {
	incr, lua := r.run("INCR", p), map[string]*Run{}
	for i := range r.Runs {
		if rn := &r.Runs[i]; rn.Pipeline == p && strings.HasPrefix(rn.Label, "EVALSHA ") {
			lua[strings.TrimSuffix(strings.TrimPrefix(rn.Label, "EVALSHA "), ".lua")] = rn
		}
	}
	fmt.Fprintf(b, "\n## Throughput and latency, rlbench, -P %d\n\n", p)
	b.WriteString("| workload | server | rps | × INCR | × its Lua | p50 µs | p99 µs | p99.9 µs | server CPU µs/req | denied | errors |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, rn := range r.Runs {
		if rn.Pipeline != p {
			continue
		}
		xIncr, xLua := "", ""
		if incr != nil && incr.RPS > 0 {
			xIncr = fmt.Sprintf("%.2f", rn.RPS/incr.RPS)
		}
		algo, _, _ := strings.Cut(strings.TrimPrefix(rn.Label, "RL.CHECK "), ",")
		if rn.Label == "CL.THROTTLE" {
			algo = "gcra"
		}
		if l := lua[algo]; l != nil && strings.HasPrefix(rn.Server, "rlserver") && l.RPS > 0 {
			xLua = fmt.Sprintf("%.1f", rn.RPS/l.RPS)
		}
		fmt.Fprintf(b, "| %s | %s | %.0f | %s | %s | %.0f | %.0f | %.0f | %.2f | %.1f%% | %d |\n", rn.Label, rn.Server,
			rn.RPS, xIncr, xLua, rn.P50, rn.P99, rn.P999, rn.CPUPerReq, 100*rn.Denied, rn.Errors)
	}
	fmt.Fprintf(b, "\nCommands (key:__rand_int__ is a 12-digit key number; Lua windows in µs, __now_us__ the client's clock):\n\n")
	for _, rn := range r.Runs {
		if rn.Pipeline == p {
			cmd := rn.Command
			if strings.HasPrefix(cmd, "EVALSHA ") {
				f := strings.Fields(cmd)
				f[1] = "<sha1 of luaref/" + luaName(rn.Label) + ">"
				cmd = strings.Join(f, " ")
			}
			fmt.Fprintf(b, "- %s: `%s`\n", rn.Label, cmd)
		}
	}
}

// luaName is the script of an EVALSHA row: "token.lua" for
// "EVALSHA token.lua, AOF everysec".
func luaName(label string) string {
	name, _, _ := strings.Cut(strings.TrimPrefix(label, "EVALSHA "), ",")
	return name
}

func (r *report) redisBenchmarkTable(b *strings.Builder) {
	if len(r.RedisBenchmark) == 0 {
		return
	}
	b.WriteString("\n## The same with redis-benchmark\n\n")
	b.WriteString("Reproduce any row with `redis-benchmark -p <port> <args>` against `bin/rlserver` or `redis-server`.\n\n")
	b.WriteString("*kernel* is the part of the server's CPU spent in the kernel (system time): its reads, writes and waits, and the loopback network's work they do.\n\n")
	b.WriteString("| workload | server | args | rps | p50 ms | p99 ms | server CPU µs/req | of it kernel |\n|---|---|---|---:|---:|---:|---:|---:|\n")
	for _, x := range r.RedisBenchmark {
		args := x.Args
		if strings.Contains(args, "EVALSHA ") {
			f := strings.Fields(args)
			for i := range f {
				if len(f[i]) == 40 {
					f[i] = shaName(x.Label)
				}
			}
			args = strings.Join(f, " ")
		}
		fmt.Fprintf(b, "| %s | %s | `%s` | %.0f | %.3f | %.3f | %.2f | %.2f |\n", x.Label, x.Server, args, x.RPS, x.P50ms, x.P99ms, x.CPUPerReq, x.KernelPerReq)
	}
}

func (r *report) memoryTable(b *strings.Builder) {
	if len(r.Memory) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Memory per key (%s keys per algorithm)\n\n", r.Options["mem_keys"])
	b.WriteString("One request per key, `key:%012d` names, limit 100 per day so that nothing expires while it is measured. " +
		"rlserver: growth of the live heap after a forced GC (`/debug/gc` on `--pprof`; INFO's used_memory is the same " +
		"HeapAlloc). Redis: growth of INFO's used_memory (jemalloc), running the reference script. Fixed and sliding " +
		"keep one Redis key per window (name plus `:<window index>`), so Redis holds the keys shown.\n\n")
	b.WriteString("| algorithm | rlserver B/key | Redis | Redis B/key | Redis keys | ratio |\n|---|---:|---|---:|---:|---:|\n")
	for _, m := range r.Memory {
		rl, ratio := "", ""
		if m.RLBytes > 0 {
			rl = fmt.Sprintf("%.1f", m.RLBytes)
		}
		if m.Ratio > 0 {
			ratio = fmt.Sprintf("%.2f", m.Ratio)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %.1f | %d | %s |\n", m.Algo, rl, m.RedisScript, m.RedisBytes, m.RedisKeys, ratio)
	}
}

func (r *report) chart(f *os.File) error {
	color := func(server string) chart.Bar {
		switch server {
		case "rlserver":
			return chart.Bar{Color: chart.Blue}
		case "rlserver-all":
			return chart.Bar{Color: chart.LightBlue}
		case "rlserver-gor":
			return chart.Bar{Color: chart.Grey}
		case "rlserver-fast", "rlserver-strong", "rlserver-fast-all", "rlserver-strong-all":
			return chart.Bar{Color: chart.Green}
		}
		return chart.Bar{Color: chart.Red}
	}
	var panels []chart.Panel
	for _, p := range []int{16, 1} {
		pn := chart.Panel{Title: fmt.Sprintf("Requests per second, rlbench, 50 clients, -P %d", p)}
		for _, rn := range r.Runs {
			if rn.Pipeline == p {
				bar := color(rn.Server)
				bar.Label, bar.Value, bar.Text = rn.Label, rn.RPS, fmt.Sprintf("%.0fK  p99 %.0f µs", rn.RPS/1000, rn.P99)
				pn.Bars = append(pn.Bars, bar)
			}
		}
		panels = append(panels, pn)
	}
	if len(r.Memory) > 0 {
		pn := chart.Panel{Title: "Bytes per key (" + r.Options["mem_keys"] + " keys)"}
		for _, m := range r.Memory {
			if m.RLBytes > 0 {
				pn.Bars = append(pn.Bars, chart.Bar{Label: "RL.CHECK " + m.Algo, Value: m.RLBytes,
					Text: fmt.Sprintf("%.0f B", m.RLBytes), Color: chart.Blue})
			}
			label := "EVALSHA " + m.RedisScript
			if m.RedisScript == "INCR" {
				label = "INCR"
			}
			pn.Bars = append(pn.Bars, chart.Bar{Label: label, Value: m.RedisBytes,
				Text: fmt.Sprintf("%.0f B", m.RedisBytes), Color: chart.Red})
		}
		panels = append(panels, pn)
	}
	m := r.Machine
	redis := strings.TrimPrefix(strings.Fields(m["redis"] + " x x")[2], "v=")
	notes := []string{fmt.Sprintf("%s cores (%s), %s, Redis %s, rlserver %s", m["nproc"], m["cpu"], m["go"],
		redis, m["rlserver"]),
		"client and servers share the cores; medians of alternating rounds, " + m["date"]}
	return chart.Render(f, "rlserver vs Redis on the same machine", notes,
		[]chart.Legend{{Name: "rlserver --procs " + r.Options["procs"], Color: chart.Blue},
			{Name: "rlserver, all cores", Color: chart.LightBlue},
			{Name: "rlserver, goroutine per connection", Color: chart.Grey},
			{Name: "rlserver, durable (fast, strong)", Color: chart.Green}, {Name: "redis-server", Color: chart.Red}}, panels)
}

func describeMachine(o options) map[string]string {
	return nodes.Machine(map[string]string{"redis": o.redisServer})
}
