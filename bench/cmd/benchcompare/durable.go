package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/bench/load"
)

// logStats are a durable rlserver's log counters (INFO persistence).
type logStats struct {
	entries, records, fsyncs, bytes int64
}

// readLogStats reads s's log counters; ok is false for a server without
// a log (in memory, or Redis).
func readLogStats(s *server) (logStats, bool) {
	info, err := s.cli.Do("INFO", "persistence")
	if err != nil {
		return logStats{}, false
	}
	fields := map[string]int64{}
	for _, line := range strings.Split(info, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				fields[k] = n
			}
		}
	}
	if fields["rl_durable"] != 1 {
		return logStats{}, false
	}
	return logStats{fields["log_entries"], fields["log_records"], fields["log_fsyncs"], fields["log_bytes"]}, true
}

// LogRates are what the log did during one run: entries and fsyncs per
// second, and checks and records per entry.
type LogRates struct {
	EntriesPerSec   float64 `json:"entries_per_sec"`
	FsyncsPerSec    float64 `json:"fsyncs_per_sec"`
	ChecksPerEntry  float64 `json:"checks_per_entry"`
	RecordsPerEntry float64 `json:"records_per_entry"`
	BytesPerCheck   float64 `json:"bytes_per_check"`
}

// rates compares two readings taken d apart, around requests checks.
func rates(a, b logStats, d time.Duration, requests uint64) *LogRates {
	e := float64(b.entries - a.entries)
	if e <= 0 || d <= 0 {
		return nil
	}
	return &LogRates{
		EntriesPerSec: e / d.Seconds(), FsyncsPerSec: float64(b.fsyncs-a.fsyncs) / d.Seconds(),
		ChecksPerEntry: float64(requests) / e, RecordsPerEntry: float64(b.records-a.records) / e,
		BytesPerCheck: float64(b.bytes-a.bytes) / float64(max(requests, 1)),
	}
}

// Restart is the restart measurement: a durable rlserver holding Keys
// live keys, its data directory's size after a clean stop, and the time
// from starting the process to its first PING answer, after SIGTERM and
// after kill -9 (a longer log to replay).
type Restart struct {
	Keys          int64   `json:"keys"`
	DiskBytes     int64   `json:"disk_bytes"`
	BytesPerKey   float64 `json:"disk_bytes_per_key"`
	AfterSIGTERM  float64 `json:"restart_after_sigterm_s"`
	AfterKill9    float64 `json:"restart_after_kill9_s"`
	KeysAfterKill int64   `json:"keys_after_kill9"`
}

// restartBench fills a durable rlserver with o.memKeys token keys and
// times its restarts.
func restartBench(ctx context.Context, o options, dir string, logw io.Writer) (*Restart, error) {
	data := filepath.Join(dir, "restart-data")
	start := func() (*server, time.Duration, error) {
		t0 := time.Now()
		s, err := startRLServer("rlserver-restart", o.rlserver, dir, o.procs, logw, "--data-dir", data)
		return s, time.Since(t0), err
	}
	s, _, err := start()
	if err != nil {
		return nil, err
	}
	fill := func(s *server) error {
		tpl, err := load.ParseTemplate(fmt.Sprintf("RL.CHECK key:%s token 100 86400", load.RandInt))
		if err != nil {
			return err
		}
		res, err := load.Run(ctx, load.Config{Addr: s.addr, Conns: o.conns, Pipeline: 16, Keys: uint64(o.memKeys),
			Dist: "seq", Requests: o.memKeys, Templates: []*load.Template{tpl}})
		if err == nil && res.Errors > 0 {
			err = fmt.Errorf("filling: %d errors (%s)", res.Errors, res.FirstError)
		}
		return err
	}
	if err := fill(s); err != nil {
		s.stop()
		return nil, err
	}
	r := &Restart{}
	if r.Keys, err = s.dbsize(); err != nil {
		s.stop()
		return nil, err
	}
	s.stop()
	r.DiskBytes = dirSize(data)
	r.BytesPerKey = float64(r.DiskBytes) / float64(max(r.Keys, 1))
	s, d, err := start()
	if err != nil {
		return nil, err
	}
	r.AfterSIGTERM = d.Seconds()
	if n, err := s.dbsize(); err != nil || n != r.Keys {
		s.stop()
		return nil, fmt.Errorf("after SIGTERM and restart: %d keys (%v), want %d", n, err, r.Keys)
	}
	if err := fill(s); err != nil { // a second pass: the log grows past the first
		s.stop()
		return nil, err
	}
	s.kill()
	s, d, err = start()
	if err != nil {
		return nil, err
	}
	defer s.stop()
	r.AfterKill9 = d.Seconds()
	r.KeysAfterKill, err = s.dbsize()
	fmt.Printf("  %d keys: %.1f MB on disk (%.0f B/key); restart %.2f s after SIGTERM, %.2f s after kill -9 (%d keys)\n",
		r.Keys, float64(r.DiskBytes)/1e6, r.BytesPerKey, r.AfterSIGTERM, r.AfterKill9, r.KeysAfterKill)
	return r, err
}

// dirSize returns the bytes of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// flagsName names the rlserver flags of the rows with label suffix sfx.
func (r *report) flagsName(sfx string) string {
	if sfx == allCores || r.Options["procs"] == "0" {
		return "default flags"
	}
	return "--procs " + r.Options["procs"]
}

// durableTargets adds the durability goals: a durable node's throughput
// as a ratio to the in-memory one and to Redis with AOF (fast to
// everysec, strong to always), its p99.9 latency beside the in-memory
// one's, and its restart time.
func (r *report) durableTargets(ratio func(string, string, *Run, *Run, float64), rbRatio func(string, string, *RBRun, *RBRun, float64)) {
	for _, m := range []struct {
		mode, label string
		min         float64
	}{{"fast", labelFast, 0.9}, {"strong", labelStrong, 0.5}} {
		goal := fmt.Sprintf("≥ %g×", m.min)
		for _, p := range []int{16, 1} {
			ratio(fmt.Sprintf("durable %s vs in memory, RL.CHECK token, -P %d, rlbench", m.mode, p), goal,
				r.run(m.label, p), r.run(labelToken, p), m.min)
			rbRatio(fmt.Sprintf("durable %s vs in memory, RL.CHECK token, -P %d, redis-benchmark", m.mode, p), goal,
				r.rb(m.label, p), r.rb(labelToken, p), m.min)
		}
	}
	for _, m := range []struct{ mode, label, ref, aof string }{
		{"fast", labelFast, labelEverysec, "everysec"}, {"strong", labelStrong, labelAlways, "always"}} {
		for _, sfx := range []string{"", allCores} {
			for _, p := range []int{16, 1} {
				name := fmt.Sprintf("durable %s RL.CHECK token vs Redis INCR with AOF %s, -P %d, %s", m.mode, m.aof, p, r.flagsName(sfx))
				ratio(name+", rlbench", "≥ 1.0×", r.run(m.label+sfx, p), r.run(m.ref, p), 1)
				rbRatio(name+", redis-benchmark", "≥ 1.0×", r.rb(m.label+sfx, p), r.rb(m.ref, p), 1)
			}
		}
	}
	for _, sfx := range []string{"", allCores} {
		for _, p := range []int{16, 1} {
			r.p999Target(sfx, p)
		}
	}
	r.luaAOFTargets()
	if x := r.Restart; x != nil {
		r.Targets = append(r.Targets, Target{Name: fmt.Sprintf("restart to serving with %d live keys, after SIGTERM / kill -9", x.Keys),
			Goal: "≤ 3 s", Measured: fmt.Sprintf("%.2f s / %.2f s", x.AfterSIGTERM, x.AfterKill9),
			Value: max(x.AfterSIGTERM, x.AfterKill9), Met: x.AfterSIGTERM <= 3 && x.AfterKill9 <= 3})
	}
}

// p999Target: durable fast's p99.9 latency at most twice the in-memory
// rlserver's with the same flags (rlbench; redis-benchmark reports no
// p99.9).
func (r *report) p999Target(sfx string, p int) {
	a, b := r.run(labelFast+sfx, p), r.run(labelToken+sfx, p)
	if a == nil || b == nil || b.P999 <= 0 {
		return
	}
	v := a.P999 / b.P999
	r.Targets = append(r.Targets, Target{
		Name: fmt.Sprintf("p99.9 latency, durable fast vs in memory, RL.CHECK token, -P %d, %s, rlbench", p, r.flagsName(sfx)),
		Goal: "≤ 2×", Measured: ratioText(v, 2) + fmt.Sprintf(" (%.0f vs %.0f µs)", a.P999, b.P999), Value: v, Met: v <= 2})
}

// luaAOFTargets are informative rows: durable fast RL.CHECK token beside
// Redis running the token bucket script with AOF everysec.
func (r *report) luaAOFTargets() {
	add := func(tool string, p int, a, b float64) {
		if a > 0 && b > 0 {
			r.Targets = append(r.Targets, Target{
				Name: fmt.Sprintf("durable fast RL.CHECK token vs Redis EVALSHA token.lua with AOF everysec, -P %d, %s, %s", p, r.flagsName(""), tool),
				Goal: "—", Measured: fmt.Sprintf("%.2f× (%.0f vs %.0f rps)", a/b, a, b), Value: a / b, Informative: true})
		}
	}
	for _, p := range []int{16, 1} {
		if a, b := r.run(labelFast, p), r.run(labelLuaAOF, p); a != nil && b != nil {
			add("rlbench", p, a.RPS, b.RPS)
		}
		if a, b := r.rb(labelFast, p), r.rb(labelLuaAOF, p); a != nil && b != nil {
			add("redis-benchmark", p, a.RPS, b.RPS)
		}
	}
}

// durableRef returns the rows a durable or AOF row is compared with: the
// same workload without persistence, and (for rlserver) Redis INCR with
// the matching AOF policy.
func (r *report) durableRef(rn Run) (inMemory, aof *Run) {
	base, _ := strings.CutSuffix(rn.Label, allCores)
	sfx := strings.TrimPrefix(rn.Label, base)
	switch base {
	case labelFast:
		return r.run(labelToken+sfx, rn.Pipeline), r.run(labelEverysec, rn.Pipeline)
	case labelStrong:
		return r.run(labelToken+sfx, rn.Pipeline), r.run(labelAlways, rn.Pipeline)
	case labelEverysec, labelAlways:
		return r.run("INCR", rn.Pipeline), nil
	case labelLuaAOF:
		return r.run("EVALSHA token.lua", rn.Pipeline), nil
	}
	return nil, nil
}

// durableTable writes the durable rows beside the in-memory reference
// and Redis with AOF, with what rlserver's log did.
func (r *report) durableTable(b *strings.Builder) {
	var rows []Run
	for _, rn := range r.Runs {
		base, _ := strings.CutSuffix(rn.Label, allCores)
		if slices.Contains([]string{labelToken, labelFast, labelStrong, labelEverysec, labelAlways, labelLuaAOF}, base) {
			rows = append(rows, rn)
		}
	}
	if len(rows) > 0 {
		b.WriteString("\n## Durability: durable rlservers and Redis with AOF, rlbench\n\n")
		b.WriteString("*× in memory* compares a row with the same workload on a server without persistence (rlserver " +
			"with the same flags, Redis with `--appendonly no`); *× Redis AOF* compares durable fast with Redis INCR " +
			"under `--appendfsync everysec` (each loses at most about a second in a crash) and durable strong with " +
			"`--appendfsync always` (nothing acknowledged is lost). The log's rates are over each run (warm-up " +
			"included); a check that changes a key writes its state (a record) into the entry of its flush interval.\n\n")
		b.WriteString("| workload | server | -P | rps | × in memory | × Redis AOF | p50 µs | p99 µs | p99.9 µs | server CPU µs/req | entries/s | fsyncs/s | checks/entry | bytes/check |\n")
		b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, rn := range rows {
			x := func(ref *Run) string {
				if ref == nil || ref.RPS <= 0 {
					return ""
				}
				return fmt.Sprintf("%.2f", rn.RPS/ref.RPS)
			}
			mem, aof := r.durableRef(rn)
			log := " | | | |"
			if l := rn.Log; l != nil {
				log = fmt.Sprintf(" %.0f | %.0f | %.1f | %.1f |", l.EntriesPerSec, l.FsyncsPerSec, l.ChecksPerEntry, l.BytesPerCheck)
			}
			fmt.Fprintf(b, "| %s | %s | %d | %.0f | %s | %s | %.0f | %.0f | %.0f | %.2f |%s\n", rn.Label, rn.Server,
				rn.Pipeline, rn.RPS, x(mem), x(aof), rn.P50, rn.P99, rn.P999, rn.CPUPerReq, log)
		}
	}
	r.restartTable(b)
}

// restartTable writes the restart measurement.
func (r *report) restartTable(b *strings.Builder) {
	x := r.Restart
	if x == nil {
		return
	}
	fmt.Fprintf(b, "\n## Restart with %d live keys\n\n", x.Keys)
	b.WriteString("A durable rlserver (fast mode) loaded with one token check per key (`key:%012d`, 100 per day), " +
		"stopped, and started again on the same directory: the time from starting the process to its first " +
		"PING answer, which comes once the snapshot is restored and the log after it replayed. Then every key " +
		"is checked once more (a longer log) and the process is killed with SIGKILL.\n\n")
	b.WriteString("| keys | data directory after SIGTERM | bytes/key | restart after SIGTERM | restart after kill -9 | keys after kill -9 |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(b, "| %d | %.1f MB | %.0f | %.2f s | %.2f s | %d |\n", x.Keys, float64(x.DiskBytes)/1e6, x.BytesPerKey,
		x.AfterSIGTERM, x.AfterKill9, x.KeysAfterKill)
}
