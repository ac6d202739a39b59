package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/rlserver/rlserver/bench/chart"
)

// Row is the median over the rounds of one client against one setup.
type Row struct {
	Setup     string    `json:"setup"`
	Tool      string    `json:"tool"`
	Args      string    `json:"args"`
	RPS       float64   `json:"rps"`
	P50       float64   `json:"p50_us"`
	P99       float64   `json:"p99_us"`
	P999      float64   `json:"p999_us,omitempty"`
	ServerCPU float64   `json:"server_cpu_us_per_request"`
	NodeCPU   []float64 `json:"node_cpu_us_per_request"` // busiest first, the median of each rank
	ClientCPU float64   `json:"client_cpu_us_per_request"`
	IdleCores float64   `json:"idle_cores"`
	Errors    uint64    `json:"errors"` // summed over the rounds
	Redirects uint64    `json:"redirects"`
	Retries   uint64    `json:"retries"`
	RoundsRPS []float64 `json:"rounds_rps"`
}

// report is everything one run measured.
type report struct {
	Machine    map[string]string `json:"machine"`
	Options    map[string]string `json:"options"`
	Rows       []Row             `json:"rows"`
	Samples    []Sample          `json:"samples"`
	Targets    []Target          `json:"targets"`
	StopErrors []string          `json:"stop_errors,omitempty"`
	Elapsed    string            `json:"elapsed"`
}

// Target is one goal and whether this run met it.
type Target struct {
	Name     string  `json:"name"`
	Goal     string  `json:"goal"`
	Measured string  `json:"measured"`
	Value    float64 `json:"value"`
	Met      bool    `json:"met"`
}

// medians groups the samples by setup and tool, in setups' order.
func medians(samples []Sample) []Row {
	var rows []Row
	for _, tool := range []string{toolRL, toolRB} {
		for _, s := range setups {
			var ss []Sample
			for _, x := range samples {
				if x.Setup == s.Name && x.Tool == tool {
					ss = append(ss, x)
				}
			}
			if len(ss) > 0 {
				rows = append(rows, medianRow(ss))
			}
		}
	}
	return rows
}

func medianRow(ss []Sample) Row {
	r := Row{Setup: ss[0].Setup, Tool: ss[0].Tool, Args: ss[0].Args}
	m := func(f func(Sample) float64) float64 {
		v := make([]float64, len(ss))
		for i, s := range ss {
			v[i] = f(s)
		}
		return medianOf(v)
	}
	r.RPS, r.P50, r.P99, r.P999 = m(func(s Sample) float64 { return s.RPS }), m(func(s Sample) float64 { return s.P50 }),
		m(func(s Sample) float64 { return s.P99 }), m(func(s Sample) float64 { return s.P999 })
	r.ServerCPU, r.ClientCPU = m(func(s Sample) float64 { return s.ServerCPU }), m(func(s Sample) float64 { return s.ClientCPU })
	r.IdleCores = m(func(s Sample) float64 { return s.IdleCores })
	for k := range ss[0].NodeCPU {
		r.NodeCPU = append(r.NodeCPU, m(func(s Sample) float64 {
			if k < len(s.NodeCPU) {
				return s.NodeCPU[k]
			}
			return 0
		}))
	}
	for _, s := range ss {
		r.Errors += s.Errors
		r.Redirects += s.Redirects
		r.Retries += s.Retries
		r.RoundsRPS = append(r.RoundsRPS, s.RPS)
	}
	return r
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (r *report) row(setup, tool string) *Row {
	for i := range r.Rows {
		if r.Rows[i].Setup == setup && r.Rows[i].Tool == tool {
			return &r.Rows[i]
		}
	}
	return nil
}

// evaluate computes the targets: the cluster's throughput as a ratio to
// the single node's, per mode and client.
func (r *report) evaluate() {
	for _, g := range []struct {
		mode string
		min  float64
	}{{"fast", 0.5}, {"strong", 0.25}} {
		for _, tool := range []string{toolRL, toolRB} {
			c, s := r.row("cluster "+g.mode, tool), r.row("single "+g.mode, tool)
			if c == nil || s == nil || s.RPS == 0 {
				continue
			}
			v := c.RPS / s.RPS
			r.Targets = append(r.Targets, Target{fmt.Sprintf("cluster %s vs single %s, %s", g.mode, g.mode, tool),
				fmt.Sprintf("≥ %g×", g.min), fmt.Sprintf("%.2f× (%.0f vs %.0f rps)", v, c.RPS, s.RPS), v, v >= g.min})
		}
	}
}

func describeMachine(o options) map[string]string {
	m := map[string]string{
		"nproc": fmt.Sprint(runtime.NumCPU()), "go": runtime.Version(),
		"os": runtime.GOOS + "/" + runtime.GOARCH, "date": time.Now().UTC().Format("2006-01-02 15:04 UTC"),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m["cpu"] = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := exec.Command(o.redisBenchmark, "--version").Output(); err == nil {
		m["redis-benchmark"] = strings.TrimSpace(string(b))
	}
	if b, err := exec.Command("uname", "-r").Output(); err == nil {
		m["kernel"] = strings.TrimSpace(string(b))
	}
	if b, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		m["rlserver"] = strings.TrimSpace(string(b))
	}
	return m
}

func (r *report) write(dir string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "cluster.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "cluster.md"), []byte(r.markdown()), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "cluster.png"))
	if err != nil {
		return err
	}
	defer f.Close()
	if err := r.chart(f); err != nil {
		return err
	}
	fmt.Printf("wrote %s/cluster.md, cluster.json, cluster.png (%s)\n", dir, r.Elapsed)
	return nil
}

func (r *report) markdown() string {
	var b strings.Builder
	m, o := r.Machine, r.Options
	fmt.Fprintf(&b, "# rlserver: a three-node cluster against a single durable node\n\n")
	fmt.Fprintf(&b, "Generated by `make bench-cluster` (bench/cmd/clusterbench) on %s in %s. Do not edit: rerun it "+
		"(`-from cluster.json` rewrites this file and the chart). Method and analysis: [README.md](README.md).\n\n", m["date"], r.Elapsed)
	fmt.Fprintf(&b, "| machine | |\n|---|---|\n")
	for _, k := range []string{"nproc", "cpu", "kernel", "os", "go", "redis-benchmark", "rlserver"} {
		fmt.Fprintf(&b, "| %s | %s |\n", k, m[k])
	}
	fmt.Fprintf(&b, "\nFour setups, each started afresh for every round (new data directories) and alone on the machine "+
		"while measured: a single durable rlserver and a three-node cluster (%s groups, every group on all three nodes), "+
		"each in fast and in strong mode, every node with the same flags (`%s` besides addresses, data directory and "+
		"membership; no `--procs`: each process may use both cores). A cluster is measured once GET /cluster shows every "+
		"group with exactly one ready replica, its preferred leader. %s rounds, the order of the setups and of the two "+
		"clients reversed every other round; the tables give medians. %s connections, `-P %s`, keys uniform over %s, "+
		"`RL.CHECK key:__rand_int__ token 100 60` (nothing is denied).\n\n",
		o["groups"], o["flags"], o["rounds"], o["connections"], o["pipeline"], o["keys"])
	fmt.Fprintf(&b, "- **rlbench** runs %s (after %s of warm-up) with GOMAXPROCS=%s; against the cluster with `-cluster`: "+
		"each connection keeps a socket per node, splits each batch by the node serving each key's slot, writes every "+
		"part, then reads the nodes' replies in turn.\n", o["duration"], o["warmup"], o["client_procs"])
	fmt.Fprintf(&b, "- **redis-benchmark** runs `%s` with `-n` sized to last about as long; against the cluster with "+
		"`--cluster --threads %s`, which puts all of a master's keys in one slot (one group). Plain against the single node "+
		"(one thread).\n", rbCommand, o["rb_threads"])
	b.WriteString("- **Server CPU per request** is the user+system time of every server process over the run " +
		"(`/proc/<pid>/stat`), summed, divided by the replies; *per node* lists each process's share, busiest first. " +
		"*Client CPU* is the client's own. *Idle* is what the setup used, ready and without load, in cores.\n\n")
	b.WriteString("## Targets\n\n| target | goal | measured | met |\n|---|---|---|---|\n")
	for _, t := range r.Targets {
		met := "yes"
		if !t.Met {
			met = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.Name, t.Goal, t.Measured, met)
	}
	for _, tool := range []string{toolRL, toolRB} {
		r.table(&b, tool)
	}
	if len(r.StopErrors) > 0 {
		b.WriteString("\n## Nodes that did not stop cleanly on SIGTERM\n\n")
		for _, e := range r.StopErrors {
			fmt.Fprintf(&b, "- %s\n", e)
		}
	}
	b.WriteString("\n![throughput and CPU per request](cluster.png)\n")
	return b.String()
}

func (r *report) table(b *strings.Builder, tool string) {
	first := true
	for _, rw := range r.Rows {
		if rw.Tool != tool {
			continue
		}
		if first {
			fmt.Fprintf(b, "\n## %s\n\n", tool)
			b.WriteString("| setup | rps | × single | p50 µs | p99 µs | p99.9 µs | server CPU µs/req | per node | client CPU µs/req | idle cores | errors | redirects | retries | args |\n")
			b.WriteString("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|\n")
			first = false
		}
		x := ""
		mode := strings.Fields(rw.Setup)[1]
		if s := r.row("single "+mode, tool); s != nil && s.RPS > 0 {
			x = fmt.Sprintf("%.2f", rw.RPS/s.RPS)
		}
		p999 := ""
		if rw.P999 > 0 {
			p999 = fmt.Sprintf("%.0f", rw.P999)
		}
		counts := "n/a | n/a | n/a" // redis-benchmark does not count them
		if tool == toolRL {
			counts = fmt.Sprintf("%d | %d | %d", rw.Errors, rw.Redirects, rw.Retries)
		}
		fmt.Fprintf(b, "| %s | %.0f | %s | %.0f | %.0f | %s | %.2f | %s | %.2f | %.2f | %s | `%s` |\n", rw.Setup, rw.RPS, x,
			rw.P50, rw.P99, p999, rw.ServerCPU, fmtList(rw.NodeCPU), rw.ClientCPU, rw.IdleCores, counts, rw.Args)
	}
}

func (r *report) chart(f *os.File) error {
	var panels []chart.Panel
	for _, tool := range []string{toolRL, toolRB} {
		pn := chart.Panel{Title: "Requests per second, " + tool + ", 50 connections, -P " + r.Options["pipeline"]}
		cpu := chart.Panel{Title: "Server CPU per request (µs, all processes), " + tool}
		for _, rw := range r.Rows {
			if rw.Tool != tool {
				continue
			}
			c := chart.Blue
			if strings.HasPrefix(rw.Setup, "cluster") {
				c = chart.Green
			}
			pn.Bars = append(pn.Bars, chart.Bar{Label: rw.Setup, Value: rw.RPS, Color: c,
				Text: fmt.Sprintf("%.0fK  p99 %.1f ms", rw.RPS/1000, rw.P99/1000)})
			cpu.Bars = append(cpu.Bars, chart.Bar{Label: rw.Setup, Value: rw.ServerCPU, Color: c,
				Text: fmt.Sprintf("%.2f µs", rw.ServerCPU)})
		}
		if len(pn.Bars) > 0 {
			panels = append(panels, pn, cpu)
		}
	}
	m := r.Machine
	notes := []string{fmt.Sprintf("%s cores (%s), %s, rlserver %s", m["nproc"], m["cpu"], m["go"], m["rlserver"]),
		"client and servers share the cores; only the measured setup runs; medians of " + r.Options["rounds"] + " alternating rounds, " + m["date"]}
	return chart.Render(f, "rlserver: three-node cluster vs a single durable node", notes,
		[]chart.Legend{{Name: "single node", Color: chart.Blue}, {Name: "three-node cluster", Color: chart.Green}}, panels)
}
