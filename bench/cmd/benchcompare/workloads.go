package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rlserver/rlserver/bench/load"
	"github.com/rlserver/rlserver/bench/nodes"
)

// algos are RL.CHECK's algorithms, each with a reference Lua script of the
// same name in luaref/.
var algos = []string{"fixed", "sliding", "log", "token", "leaky", "gcra"}

// workload is one command run against one server.
type workload struct {
	Label  string // as reported: "RL.CHECK token", "EVALSHA token.lua", "INCR"
	Server *server
	Cmd    string
}

// Run is the median over the rounds of one workload at one pipeline depth.
type Run struct {
	Label     string    `json:"label"`
	Server    string    `json:"server"`
	Command   string    `json:"command"`
	Pipeline  int       `json:"pipeline"`
	RPS       float64   `json:"rps"`
	P50       float64   `json:"p50_us"`
	P99       float64   `json:"p99_us"`
	P999      float64   `json:"p999_us"`
	CPUPerReq float64   `json:"server_cpu_us_per_request"`
	Denied    float64   `json:"denied_fraction"`
	Errors    uint64    `json:"errors"`
	FirstErr  string    `json:"first_error,omitempty"`
	RoundsRPS []float64 `json:"rounds_rps"`
	// Log is what a durable rlserver's log did (medians over the rounds).
	Log *LogRates `json:"log,omitempty"`
}

// loadScripts SCRIPT LOADs every luaref/<algo>.lua into Redis and returns
// the SHA1 of each by algorithm.
func loadScripts(rd *server, dir string) (map[string]string, error) {
	shas := map[string]string{}
	for _, a := range algos {
		src, err := os.ReadFile(filepath.Join(dir, a+".lua"))
		if os.IsNotExist(err) {
			fmt.Printf("note: %s/%s.lua not found; no Lua reference for %s\n", dir, a, a)
			continue
		}
		if err != nil {
			return nil, err
		}
		sha, err := rd.cli.Do("SCRIPT", "LOAD", string(src))
		if err != nil {
			return nil, fmt.Errorf("SCRIPT LOAD %s.lua: %w", a, err)
		}
		shas[a] = sha
	}
	return shas, nil
}

// luaCmd is the EVALSHA call of a reference script: limit per window (in
// seconds), the client's clock, cost 1, default burst.
func luaCmd(sha string, limit, windowSec int) string {
	return fmt.Sprintf("EVALSHA %s 1 key:%s %d %d %s 1 0", sha, load.RandInt, limit, windowSec*1_000_000, load.NowMicros)
}

// Labels of the rows the targets and tables look up.
const (
	allCores      = ", all cores"
	labelToken    = "RL.CHECK token"
	labelFast     = "RL.CHECK token, durable fast"
	labelStrong   = "RL.CHECK token, durable strong"
	labelEverysec = "INCR, AOF everysec"
	labelAlways   = "INCR, AOF always"
	labelLuaAOF   = "EVALSHA token.lua, AOF everysec"
	// The -P 1 PING rows of the throughput section (floorTargets).
	labelPingRL    = "PING, in memory"
	labelPingRedis = "PING, Redis"
)

// pairedWorkloads lists the workloads of the chosen sections in the order
// a round runs them, each rlserver workload next to its Redis counterpart.
func pairedWorkloads(f *fleet, secs sections) []workload {
	check := fmt.Sprintf("RL.CHECK key:%s token 100 60", load.RandInt)
	incr := "INCR key:" + load.RandInt
	var ws []workload
	add := func(label string, s *server, cmd string) {
		if s != nil {
			ws = append(ws, workload{label, s, cmd})
		}
	}
	if secs[secThroughput] || secs[secDurable] {
		add(labelToken, f.rl, check)
		add(labelToken+allCores, f.rlAll, check)
	}
	if secs[secThroughput] {
		add(labelToken+", goroutine per connection", f.rlGo, check)
		ws = append(ws, f.inMemoryWorkloads()...)
	}
	if secs[secDurable] {
		add(labelFast, f.fast, check)
		add(labelFast+allCores, f.fastAll, check)
		add(labelEverysec, f.aofEverysec, incr)
		if sha, ok := f.shas["token"]; ok {
			add(labelLuaAOF, f.aofEverysec, luaCmd(sha, 100, 60))
		}
		add(labelStrong, f.strong, check)
		add(labelStrong+allCores, f.strongAll, check)
		add(labelAlways, f.aofAlways, incr)
	}
	return ws
}

// inMemoryWorkloads are Redis INCR and, per algorithm, RL.CHECK beside
// EVALSHA of its reference script, then CL.THROTTLE.
func (f *fleet) inMemoryWorkloads() []workload {
	rlCheck := func(a string) workload {
		return workload{"RL.CHECK " + a, f.rl, fmt.Sprintf("RL.CHECK key:%s %s 100 60", load.RandInt, a)}
	}
	lua := func(a string) []workload {
		if sha, ok := f.shas[a]; ok {
			return []workload{{"EVALSHA " + a + ".lua", f.redis, luaCmd(sha, 100, 60)}}
		}
		return nil
	}
	ws := []workload{{"INCR", f.redis, "INCR key:" + load.RandInt}}
	ws = append(ws, lua("token")...)
	for _, a := range algos {
		if a != "token" {
			ws = append(ws, rlCheck(a))
			ws = append(ws, lua(a)...)
		}
	}
	return append(ws, workload{"CL.THROTTLE", f.rl, "CL.THROTTLE key:" + load.RandInt + " 99 100 60 1"})
}

// throughput runs every workload o.rounds times at one pipeline depth,
// alternating servers, and returns the medians.
func throughput(ctx context.Context, o options, ws []workload, pipeline int) ([]Run, error) {
	results := make([][]*load.Result, len(ws))
	cpu := make([][]float64, len(ws))
	logs := make([][]*LogRates, len(ws))
	for round := 0; round < o.rounds; round++ {
		for k := range ws {
			i := k
			if round%2 == 1 {
				i = len(ws) - 1 - k // reverse every other round: drift hits both sides
			}
			w := ws[i]
			var prof string
			if o.profile && round == 0 && w.Label == labelToken {
				prof = filepath.Join(o.out, fmt.Sprintf("profile-token-P%d.txt", pipeline))
			}
			before, durable := readLogStats(w.Server)
			t0 := time.Now()
			res, perReq, err := runOnce(ctx, o, w, pipeline, prof)
			if err != nil {
				return nil, fmt.Errorf("%s on %s: %w", w.Label, w.Server.name, err)
			}
			if after, ok := readLogStats(w.Server); durable && ok {
				logs[i] = append(logs[i], rates(before, after, time.Since(t0), res.Total))
			}
			results[i] = append(results[i], res)
			cpu[i] = append(cpu[i], perReq)
			fmt.Printf("  round %d  %-42s %-19s %9.0f rps  p50 %7.1f µs  p99 %8.1f µs  cpu %5.2f µs/req\n",
				round+1, w.Label, w.Server.name, res.RPS, res.Latency.P50, res.Latency.P99, perReq)
		}
	}
	runs := make([]Run, len(ws))
	for i, w := range ws {
		rs := results[i]
		r := Run{Label: w.Label, Server: w.Server.name, Command: w.Cmd, Pipeline: pipeline,
			RPS:       median(rs, func(r *load.Result) float64 { return r.RPS }),
			P50:       median(rs, func(r *load.Result) float64 { return r.Latency.P50 }),
			P99:       median(rs, func(r *load.Result) float64 { return r.Latency.P99 }),
			P999:      median(rs, func(r *load.Result) float64 { return r.Latency.P999 }),
			CPUPerReq: nodes.Median(cpu[i])}
		var denied, total uint64
		for _, x := range rs {
			r.RoundsRPS = append(r.RoundsRPS, x.RPS)
			denied += x.Denied
			total += x.Requests
			r.Errors += x.Errors
			if r.FirstErr == "" {
				r.FirstErr = x.FirstError
			}
		}
		if total > 0 {
			r.Denied = float64(denied) / float64(total)
		}
		r.Log = medianRates(logs[i])
		runs[i] = r
	}
	return runs, nil
}

// runOnce empties the server, runs one workload and returns its result and
// the server's CPU time per request. With prof set it saves a CPU profile
// summary of rlserver over the measured time.
func runOnce(ctx context.Context, o options, w workload, pipeline int, prof string) (*load.Result, float64, error) {
	if _, err := w.Server.cli.Do("FLUSHALL"); err != nil {
		return nil, 0, err
	}
	tpl, err := load.ParseTemplate(w.Cmd)
	if err != nil {
		return nil, 0, err
	}
	profDone := make(chan error, 1)
	if prof != "" {
		go func() {
			time.Sleep(o.warmup)
			profDone <- profileSummary(w.Server, max(o.duration, time.Second), prof)
		}()
	}
	cpu0 := w.Server.cpuTime()
	res, err := load.Run(ctx, load.Config{Name: w.Label, Addr: w.Server.addr, Conns: o.conns,
		Pipeline: pipeline, Keys: o.keys, Duration: o.duration, Warmup: o.warmup,
		Templates: []*load.Template{tpl}, Seed: 1})
	if err != nil {
		return nil, 0, err
	}
	used := w.Server.cpuTime() - cpu0
	if prof != "" {
		if err := <-profDone; err != nil {
			fmt.Println("  note: profile:", err)
		}
	}
	perReq := 0.0
	if res.Total > 0 {
		perReq = float64(used.Microseconds()) / float64(res.Total)
	}
	return res, perReq, nil
}

// profileSummary records a CPU profile of rlserver and writes the top
// functions, flat and cumulative, with go tool pprof.
func profileSummary(s *server, d time.Duration, path string) error {
	top, err := nodes.ProfileTop(s.pprof, s.bin, d, 35, path+".pb.gz")
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(top), 0o644)
}

func median(rs []*load.Result, f func(*load.Result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	return nodes.Median(v)
}

// medianRates returns the field-wise medians of rs, or nil.
func medianRates(rs []*LogRates) *LogRates {
	var m LogRates
	fields := []struct {
		dst *float64
		get func(*LogRates) float64
	}{
		{&m.EntriesPerSec, func(r *LogRates) float64 { return r.EntriesPerSec }},
		{&m.FsyncsPerSec, func(r *LogRates) float64 { return r.FsyncsPerSec }},
		{&m.ChecksPerEntry, func(r *LogRates) float64 { return r.ChecksPerEntry }},
		{&m.RecordsPerEntry, func(r *LogRates) float64 { return r.RecordsPerEntry }},
		{&m.BytesPerCheck, func(r *LogRates) float64 { return r.BytesPerCheck }},
	}
	for _, f := range fields {
		var v []float64
		for _, r := range rs {
			if r != nil {
				v = append(v, f.get(r))
			}
		}
		if len(v) == 0 {
			return nil
		}
		*f.dst = nodes.Median(v)
	}
	return &m
}
