package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rlserver/rlserver/internal/libscripts"
)

// The scripts section: the limiter libraries' own scripts, sent as the
// libraries send them (SCRIPT LOAD once, then EVALSHA), on a durable
// rlserver with the default flags (fast mode, every core), which runs
// them natively (package script/native), against redis-server with AOF
// everysec; and a hand-written sliding log in a sorted set (luaref/log.lua),
// which rlserver runs in its interpreter, the same way.

// libScript is one script of the section: its text, where it comes from,
// and the EVALSHA arguments after the sha (redis-benchmark's
// __rand_int__ in the key).
type libScript struct {
	label string // "redis_rate allowN"
	lib   string // libscripts library; "" for a luaref script
	name  string
	args  string
}

// sectionScripts are the scripts of the section. The arguments are what
// the libraries send for 100 requests a minute: redis_rate's
// Limit{Rate: 100, Burst: 100, Period: time.Minute}, cost 1; ulule's
// "100-M" rate, 1 per call with the period in ms; luaref/log.lua's limit,
// window in µs, the client's clock (fixed, as in the other rows) and cost.
func sectionScripts(now int64) []libScript {
	return []libScript{
		{"redis_rate allowN", libscripts.RedisRate, "allowN", "1 rate:key:__rand_int__ 100 100 60 1"},
		{"ulule/limiter incr", libscripts.Ulule, "incr", "1 limiter:key:__rand_int__ 1 60000"},
		{"log.lua", "", "log", fmt.Sprintf("1 key:__rand_int__ 100 60000000 %d 1 0", now)},
	}
}

// Labels of the section's rows: the script, then the server.
func scriptLabel(s libScript, rlserver bool) string {
	if rlserver {
		path := "native"
		if s.lib == "" {
			path = "interpreted"
		}
		return "EVALSHA " + s.label + ", durable fast, default flags (" + path + ")"
	}
	return "EVALSHA " + s.label + ", AOF everysec"
}

// scriptGoals are the section's targets: rlserver over Redis with AOF
// everysec, by script and pipeline depth.
var scriptGoals = map[string][2]float64{ // -P 16, -P 1
	"redis_rate allowN":  {4, 1.2},
	"ulule/limiter incr": {4, 1.2},
	"log.lua":            {1, 1},
}

// loadLibScripts SCRIPT LOADs the section's scripts into rlserver and
// Redis and records their shas.
func (f *fleet) loadLibScripts(luaref string) error {
	if f.rlScripts == nil {
		return nil
	}
	f.libShas = map[string]string{}
	for _, s := range sectionScripts(0) {
		var text string
		var err error
		if s.lib != "" {
			text, err = libscripts.Text(s.lib, s.name)
		} else {
			var b []byte
			b, err = os.ReadFile(filepath.Join(luaref, s.name+".lua"))
			text = string(b)
		}
		if err != nil {
			return err
		}
		for _, srv := range []*server{f.rlScripts, f.aofEverysec} {
			sha, err := srv.cli.Do("SCRIPT", "LOAD", text)
			if err != nil {
				return fmt.Errorf("SCRIPT LOAD %s into %s: %w", s.label, srv.name, err)
			}
			f.libShas[s.label] = sha
		}
	}
	return nil
}

// scriptSpecs are the section's redis-benchmark runs.
func scriptSpecs(f *fleet, now int64) []rbSpec {
	var specs []rbSpec
	for _, s := range sectionScripts(now) {
		cmd := "EVALSHA " + f.libShas[s.label] + " " + s.args
		for _, p := range []struct{ pipeline, n int }{{16, 300000}, {1, 100000}} {
			specs = append(specs, rbSpec{scriptLabel(s, true), f.rlScripts, p.pipeline, p.n, cmd, 0},
				rbSpec{scriptLabel(s, false), f.aofEverysec, p.pipeline, p.n, cmd, 0})
		}
		if s.lib != "" { // the native rows again on few keys: see fewKeys
			specs = append(specs, rbSpec{scriptLabel(s, true) + fewKeysLabel, f.rlScripts, 16, 300000, cmd, fewKeys},
				rbSpec{scriptLabel(s, false) + fewKeysLabel, f.aofEverysec, 16, 300000, cmd, fewKeys})
		}
	}
	for _, c := range ceilings {
		specs = append(specs, rbSpec{c.label, f.rlScripts, 16, 1000000, c.cmd, 0},
			rbSpec{c.label, f.rlScripts, 1, 200000, c.cmd, 0})
	}
	return specs
}

// ceilings are the section's reference rows: the cheapest replies of the
// scripts' rlserver, on the same machine, client and keys. No script can
// run faster than PING here, nor a native handler (which does a check's
// work and more: a longer command, a Redis value) much faster than
// RL.CHECK; evaluateScripts sets each script's goal rate beside them.
var ceilings = []struct{ label, cmd string }{
	{"PING, durable fast, default flags (the scripts' rlserver)", "PING"},
	{"RL.CHECK token, durable fast, default flags (the scripts' rlserver)", "RL.CHECK key:__rand_int__ token 100 60"},
}

// fewKeys is the -r of the native scripts' second -P 16 rows, which are
// not goals: a working set that stays in the CPU caches (1,000 keys, a
// few hundred KB) against -keys' 100,000 (tens of MB of Redis values in
// rlserver). The pair shows how much of a native call's cost is the
// store's memory traffic, not the handler: see docs/scripts.md.
const fewKeys = 1000

// fewKeysLabel ends the labels of those rows.
const fewKeysLabel = ", 1,000 keys"

// evaluateScripts adds the section's targets.
func (r *report) evaluateScripts() {
	for _, s := range sectionScripts(0) {
		for i, p := range []int{16, 1} {
			a, b := r.rb(scriptLabel(s, true), p), r.rb(scriptLabel(s, false), p)
			if a == nil || b == nil || b.RPS == 0 {
				continue
			}
			min, v := scriptGoals[s.label][i], a.RPS/b.RPS
			r.Targets = append(r.Targets, Target{
				Name: fmt.Sprintf("EVALSHA %s, durable rlserver (default flags) vs Redis AOF everysec, -P %d, redis-benchmark", s.label, p),
				Goal: fmt.Sprintf("≥ %g×", min), Measured: ratioText(v, min) + fmt.Sprintf(" (%.0f vs %.0f rps; server CPU %.2f vs %.2f µs/call)",
					a.RPS, b.RPS, a.CPUPerReq, b.CPUPerReq),
				Value: v, Met: v >= min})
			if s.lib == "" {
				continue
			}
			ping, check := r.rb(ceilings[0].label, p), r.rb(ceilings[1].label, p)
			if ping == nil || check == nil {
				continue
			}
			r.Targets = append(r.Targets, Target{
				Name: fmt.Sprintf("the scripts' rlserver's PING and RL.CHECK against the goal's rate for %s (%g× Redis's), -P %d, redis-benchmark", s.label, min, p),
				Goal: "—", Measured: fmt.Sprintf("PING %.2f×, RL.CHECK %.2f× of the goal's rate (%.0f and %.0f vs %.0f rps)",
					ping.RPS/(min*b.RPS), check.RPS/(min*b.RPS), ping.RPS, check.RPS, min*b.RPS),
				Value: check.RPS / (min * b.RPS), Informative: true})
		}
	}
}

// shaName names the script of an EVALSHA row's sha in the report.
func shaName(label string) string {
	name := luaName(label)
	if strings.HasSuffix(name, ".lua") {
		return "<sha1 of luaref/" + name + ">"
	}
	return "<sha1 of " + name + "'s script>"
}
