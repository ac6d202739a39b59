package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseSections(t *testing.T) {
	all, err := parseSections("")
	if err != nil || all.String() != strings.Join(allSections, ",") {
		t.Fatalf("all: %v %v", all, err)
	}
	s, err := parseSections("idle, durable")
	if err != nil || s.String() != "durable,idle" || s[secThroughput] {
		t.Fatalf("durable,idle: %v %v", s, err)
	}
	if _, err := parseSections("durable,bogus"); !errors.Is(err, errSection) {
		t.Fatalf("bogus: %v", err)
	}
}

// testFleet has every server, named as startFleet names them, and no
// processes; with allCores false it is the fleet of -procs 0.
func testFleet(withAllCores bool) *fleet {
	s := func(name string) *server { return &server{name: name} }
	f := &fleet{rl: s("rlserver"), rlGo: s("rlserver-gor"), fast: s("rlserver-fast"), strong: s("rlserver-strong"),
		redis: s("redis"), aofEverysec: s("redis-aof-everysec"), aofAlways: s("redis-aof-always"),
		shas: map[string]string{"token": "sha-token", "log": "sha-log"}}
	if withAllCores {
		f.rlAll, f.fastAll, f.strongAll = s("rlserver-all"), s("rlserver-fast-all"), s("rlserver-strong-all")
	}
	return f
}

func labels[T any](xs []T, f func(T) string) []string {
	var out []string
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}

// TestWorkloadsBySection: the durable section runs the in-memory
// references, the durable rlservers and Redis with AOF, and nothing of
// the throughput section; each row on its own server.
func TestWorkloadsBySection(t *testing.T) {
	durable := sections{secDurable: true}
	ws := pairedWorkloads(testFleet(true), durable)
	got := labels(ws, func(w workload) string { return w.Label + "@" + w.Server.name })
	want := []string{"RL.CHECK token@rlserver", "RL.CHECK token, all cores@rlserver-all",
		"RL.CHECK token, durable fast@rlserver-fast", "RL.CHECK token, durable fast, all cores@rlserver-fast-all",
		"INCR, AOF everysec@redis-aof-everysec", "EVALSHA token.lua, AOF everysec@redis-aof-everysec",
		"RL.CHECK token, durable strong@rlserver-strong", "RL.CHECK token, durable strong, all cores@rlserver-strong-all",
		"INCR, AOF always@redis-aof-always"}
	if !slices.Equal(got, want) {
		t.Fatalf("durable workloads:\n%q\nwant\n%q", got, want)
	}
	if !strings.HasPrefix(ws[5].Cmd, "EVALSHA sha-token 1 key:") {
		t.Errorf("Lua row: %q", ws[5].Cmd)
	}
	both := pairedWorkloads(testFleet(true), sections{secDurable: true, secThroughput: true})
	if n := len(both); n != len(want)+len(pairedWorkloads(testFleet(true), sections{secThroughput: true}))-2 {
		t.Errorf("throughput and durable: %d workloads, the token references twice?", n)
	}
	for _, w := range pairedWorkloads(testFleet(false), durable) {
		if strings.Contains(w.Label, "all cores") {
			t.Errorf("-procs 0 ran %q", w.Label)
		}
	}
	specs := rbSpecs(testFleet(true), durable, 42)
	if len(specs) != 2*len(want) {
		t.Fatalf("%d redis-benchmark runs, want %d", len(specs), 2*len(want))
	}
	for _, sp := range specs {
		lua := strings.HasPrefix(sp.cmd, "EVALSHA")
		kind := map[bool]string{false: "fast", true: "lua"}[lua]
		if strings.Contains(sp.label, "strong") || sp.label == labelAlways {
			kind = "fsync"
		}
		wantN := map[string]map[int]int{"fast": {16: 1000000, 1: 200000}, "lua": {16: 300000, 1: 100000},
			"fsync": {16: 300000, 1: 50000}}[kind][sp.pipeline]
		if sp.n != wantN {
			t.Errorf("%s -P %d: -n %d, want %d", sp.label, sp.pipeline, sp.n, wantN)
		}
		if lua && !strings.HasSuffix(sp.cmd, " 42 1 0") {
			t.Errorf("Lua row without the fixed clock: %q", sp.cmd)
		}
	}
}

// durableReport is a made-up run of the durable and idle sections.
func durableReport() *report {
	run := func(label string, p int, rps, p999 float64) Run {
		return Run{Label: label, Server: "s", Pipeline: p, RPS: rps, P999: p999}
	}
	fast := run(labelFast, 1, 95, 2500)
	fast.Log = &LogRates{EntriesPerSec: 100, FsyncsPerSec: 100, ChecksPerEntry: 950, BytesPerCheck: 36}
	return &report{
		Machine: map[string]string{"redis": "Redis server v=7.0.15 sha=0"},
		Options: options{procs: 1, rounds: 3}.summary(sections{secDurable: true, secIdle: true}),
		Runs: []Run{
			run(labelToken, 16, 1000, 100), run(labelToken+allCores, 16, 900, 100),
			run(labelFast, 16, 1100, 150), run(labelFast+allCores, 16, 800, 100),
			run(labelEverysec, 16, 1000, 300), run(labelLuaAOF, 16, 200, 900),
			run(labelStrong, 16, 600, 400), run(labelStrong+allCores, 16, 500, 400), run(labelAlways, 16, 500, 900),
			run(labelToken, 1, 100, 1000), run(labelToken+allCores, 1, 90, 1000),
			fast, run(labelFast+allCores, 1, 90, 1000),
			run(labelEverysec, 1, 100, 900), run(labelLuaAOF, 1, 50, 900),
			run(labelStrong, 1, 50, 900), run(labelStrong+allCores, 1, 40, 900), run(labelAlways, 1, 60, 900),
		},
		RedisBenchmark: []RBRun{{Label: labelFast, Pipeline: 16, RPS: 1000}, {Label: labelEverysec, Pipeline: 16, RPS: 1250}},
		Idle: []Idle{{Setup: idleCluster, Flags: "default", Percent: []float64{1.5, 2.5, 1}, Window: 20},
			{Setup: idleDurable, Flags: "default", Percent: []float64{0.4}, Window: 20},
			{Setup: idleInMemory, Flags: "--procs 1", Percent: []float64{0.6}, Window: 20},
			{Setup: idleRedis, Flags: "—", Percent: []float64{0.1}, Switches: []float64{12.4}, Window: 20}},
	}
}

// TestDurableAndIdleTargets evaluates made-up figures: each ratio is of
// the rows it names, and met only when the goal is.
func TestDurableAndIdleTargets(t *testing.T) {
	rep := durableReport()
	rep.evaluate()
	targets := checkTargets(t, rep, []wantTarget{
		{"durable fast RL.CHECK token vs Redis INCR with AOF everysec, -P 16, --procs 1, rlbench", 1.1, true, false},
		{"durable fast RL.CHECK token vs Redis INCR with AOF everysec, -P 1, --procs 1, rlbench", 0.95, false, false},
		{"durable fast RL.CHECK token vs Redis INCR with AOF everysec, -P 16, default flags, rlbench", 0.8, false, false},
		{"durable fast RL.CHECK token vs Redis INCR with AOF everysec, -P 16, --procs 1, redis-benchmark", 0.8, false, false},
		{"durable strong RL.CHECK token vs Redis INCR with AOF always, -P 16, default flags, rlbench", 1, true, false},
		{"durable strong RL.CHECK token vs Redis INCR with AOF always, -P 1, default flags, rlbench", 40.0 / 60, false, false},
		{"p99.9 latency, durable fast vs in memory, RL.CHECK token, -P 16, --procs 1, rlbench", 1.5, true, false},
		{"p99.9 latency, durable fast vs in memory, RL.CHECK token, -P 1, --procs 1, rlbench", 2.5, false, false},
		{"p99.9 latency, durable fast vs in memory, RL.CHECK token, -P 1, default flags, rlbench", 1, true, false},
		{"idle CPU, three-node cluster, default flags", 2.5, false, false},
		{"idle CPU, single durable node, default flags", 0.4, true, false},
		{"idle CPU, in-memory node, --procs 1", 0.6, false, false},
	})
	lua := targets["durable fast RL.CHECK token vs Redis EVALSHA token.lua with AOF everysec, -P 16, --procs 1, rlbench"]
	if !lua.Informative || lua.Met || lua.Value != 5.5 {
		t.Errorf("informative Lua row: %+v", lua)
	}
	for name := range targets {
		if strings.Contains(name, "redis-server") || strings.Contains(name, "strong") && strings.Contains(name, "redis-benchmark") {
			t.Errorf("a target without its figures: %s", name)
		}
	}
}

// TestDurableReportRewrite writes the made-up report, rewrites it from its
// JSON, and reads the new tables in the markdown.
func TestDurableReportRewrite(t *testing.T) {
	rep := durableReport()
	rep.evaluate()
	dir := t.TempDir()
	if err := rep.write(dir); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "results.md"))
	if err := rewrite(filepath.Join(dir, "results.json"), dir); err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(filepath.Join(dir, "results.md"))
	if string(md) != string(again) {
		t.Fatalf("rewritten markdown differs:\n%s\n---\n%s", md, again)
	}
	for _, line := range []string{
		"| idle CPU, three-node cluster, default flags | ≤ 2% of a core per node | 1.50% 2.50% 1.00% (over 20 s) | **no** |",
		"| durable fast RL.CHECK token vs Redis EVALSHA token.lua with AOF everysec, -P 16, --procs 1, rlbench | — | 5.50× (1100 vs 200 rps) | (informative) |",
		"| RL.CHECK token, durable fast | s | 1 | 95 | 0.95 | 0.95 | 0 | 0 | 2500 | 0.00 | 100 | 100 | 950.0 | 36.0 |",
		"| RL.CHECK token, durable strong, all cores | s | 1 | 40 | 0.44 | 0.67 | 0 | 0 | 900 | 0.00 | | | | |",
		"| redis-server | — | 0.10% | 12 | 20 s |",
	} {
		if !strings.Contains(string(md), line+"\n") {
			t.Errorf("markdown lacks\n%s\n%s", line, md)
		}
	}
}

func TestRatioText(t *testing.T) {
	for _, c := range []struct {
		v, goal float64
		want    string
	}{{0.998, 1, "0.998×"}, {1.004, 1, "1.004×"}, {1.02, 1, "1.02×"}, {1, 1, "1.00×"}, {0.95, 1, "0.95×"}, {2.004, 2, "2.004×"}, {0.5004, 0.5, "0.500×"}, {1.5, 2, "1.50×"}} {
		if got := ratioText(c.v, c.goal); got != c.want {
			t.Errorf("ratioText(%v, %v) = %s, want %s", c.v, c.goal, got, c.want)
		}
	}
}

// TestScriptTargets evaluates made-up figures of the scripts section: each
// script's ratio against Redis, and beside a native script's the
// informative rows that set its goal's rate against the same server's PING
// and RL.CHECK; an interpreted script gets none.
func TestScriptTargets(t *testing.T) {
	rep := &report{}
	add := func(label string, p int, rps float64) {
		rep.RedisBenchmark = append(rep.RedisBenchmark, RBRun{Label: label, Pipeline: p, RPS: rps})
	}
	for _, s := range sectionScripts(0) {
		add(scriptLabel(s, true), 16, 300000)
		add(scriptLabel(s, false), 16, 100000)
		add(scriptLabel(s, true), 1, 60000)
		add(scriptLabel(s, false), 1, 50000)
	}
	add(ceilings[0].label, 16, 1000000)
	add(ceilings[1].label, 16, 600000)
	add(ceilings[0].label, 1, 80000)
	add(ceilings[1].label, 1, 75000)
	rep.evaluateScripts()
	targets := checkTargets(t, rep, []wantTarget{
		{"EVALSHA redis_rate allowN, durable rlserver (default flags) vs Redis AOF everysec, -P 16, redis-benchmark", 3, false, false},
		{"EVALSHA log.lua, durable rlserver (default flags) vs Redis AOF everysec, -P 16, redis-benchmark", 3, true, false},
		{"EVALSHA ulule/limiter incr, durable rlserver (default flags) vs Redis AOF everysec, -P 1, redis-benchmark", 1.2, true, false},
		{"the scripts' rlserver's PING and RL.CHECK against the goal's rate for redis_rate allowN (4× Redis's), -P 16, redis-benchmark", 1.5, false, true},
		{"the scripts' rlserver's PING and RL.CHECK against the goal's rate for ulule/limiter incr (1.2× Redis's), -P 1, redis-benchmark", 1.25, false, true},
	})
	if tg := targets["the scripts' rlserver's PING and RL.CHECK against the goal's rate for redis_rate allowN (4× Redis's), -P 16, redis-benchmark"]; !strings.Contains(tg.Measured, "PING 2.50×") {
		t.Errorf("ceiling row: %q, want PING at 2.50× of the goal's rate", tg.Measured)
	}
	for name := range targets {
		if strings.Contains(name, "log.lua (") {
			t.Errorf("an interpreted script has a ceiling row: %s", name)
		}
	}
	if len(rep.Targets) != 6+2*2 {
		t.Errorf("%d targets, want 6 goals and 4 ceiling rows", len(rep.Targets))
	}
}

// wantTarget is a target a test expects: its name, value, whether it is
// met and whether it is informative.
type wantTarget struct {
	name        string
	value       float64
	met, inform bool
}

// checkTargets fails t for each of wants that rep's targets do not have as
// wanted, and returns rep's targets by name.
func checkTargets(t *testing.T, rep *report, wants []wantTarget) map[string]Target {
	t.Helper()
	targets := map[string]Target{}
	for _, tg := range rep.Targets {
		targets[tg.Name] = tg
	}
	for _, w := range wants {
		tg, ok := targets[w.name]
		if !ok || tg.Met != w.met || tg.Informative != w.inform || tg.Value < w.value-1e-9 || tg.Value > w.value+1e-9 {
			t.Errorf("%s: %+v (present %v), want %v met %v informative %v", w.name, tg, ok, w.value, w.met, w.inform)
		}
	}
	return targets
}

// TestFloorTargets evaluates made-up -P 1 figures: beside each ratio with
// default flags, the informative row that splits each server's CPU a
// request into user mode and the kernel, and in memory the PING rates.
func TestFloorTargets(t *testing.T) {
	for _, procs := range []string{"1", "0"} {
		sfx := allCores
		if procs == "0" {
			sfx = ""
		}
		rep := &report{Options: map[string]string{"procs": procs}}
		add := func(label string, rps, cpu, kernel float64) {
			rep.RedisBenchmark = append(rep.RedisBenchmark, RBRun{Label: label, Pipeline: 1, RPS: rps, CPUPerReq: cpu, KernelPerReq: kernel})
		}
		add(labelToken+sfx, 120000, 6, 4.75)
		add("INCR", 125000, 6.4, 4.5)
		add(labelPingRL+sfx, 130000, 5, 4)
		add(labelPingRedis, 128000, 5.2, 4.1)
		add(labelStrong+sfx, 50000, 16, 11)
		add(labelAlways, 64000, 9.6, 7.4)
		add(labelStrong+" (another setup)", 1, 1, 1)
		rep.floorTargets()
		targets := checkTargets(t, rep, []wantTarget{
			{"server CPU a request, user + kernel, in memory RL.CHECK token vs Redis INCR, -P 1, default flags, redis-benchmark", 6 / 6.4, false, true},
			{"server CPU a request, user + kernel, durable strong RL.CHECK token vs Redis INCR with AOF always, -P 1, default flags, redis-benchmark", 16 / 9.6, false, true},
		})
		mem := targets["server CPU a request, user + kernel, in memory RL.CHECK token vs Redis INCR, -P 1, default flags, redis-benchmark"]
		if want := "rlserver 1.25 + 4.75 µs, Redis 1.90 + 4.50 µs; PING 130000 vs 128000 rps (1.02×)"; mem.Measured != want {
			t.Errorf("procs %s: in memory row %q, want %q", procs, mem.Measured, want)
		}
		strong := targets["server CPU a request, user + kernel, durable strong RL.CHECK token vs Redis INCR with AOF always, -P 1, default flags, redis-benchmark"]
		if want := "rlserver 5.00 + 11.00 µs, Redis 2.20 + 7.40 µs"; strong.Measured != want {
			t.Errorf("procs %s: strong row %q, want %q", procs, strong.Measured, want)
		}
		if len(rep.Targets) != 2 {
			t.Errorf("procs %s: %d rows, want 2 (no durable fast figures)", procs, len(rep.Targets))
		}
	}
}
