package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
)

// The sections of a run, as -only names them.
const (
	secThroughput = "throughput" // in memory: RL.CHECK per algorithm vs Redis INCR and EVALSHA, rlbench and redis-benchmark
	secDurable    = "durable"    // durable rlservers vs Redis with AOF, rlbench and redis-benchmark
	secMemory     = "memory"     // bytes per key
	secRestart    = "restart"    // restart of a durable rlserver holding -mem-keys keys
	secIdle       = "idle"       // CPU of idle servers
	secAllocs     = "allocs"     // allocations per check (go test)
	secScripts    = "scripts"    // the limiter libraries' scripts: durable rlserver (default flags) vs Redis AOF everysec
)

var allSections = []string{secThroughput, secDurable, secScripts, secMemory, secRestart, secIdle, secAllocs}

// errSection is returned for a name -only does not know.
var errSection = errors.New("unknown section")

// sections is the set of sections one run measures.
type sections map[string]bool

// parseSections reads -only: a comma-separated list of section names, or
// "" for every section.
func parseSections(only string) (sections, error) {
	s := sections{}
	if strings.TrimSpace(only) == "" {
		for _, n := range allSections {
			s[n] = true
		}
		return s, nil
	}
	for _, n := range strings.Split(only, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(allSections, n) {
			return nil, fmt.Errorf("-only %q: %w %q (known: %s)", only, errSection, n, strings.Join(allSections, ","))
		}
		s[n] = true
	}
	return s, nil
}

// String lists the sections in their running order.
func (s sections) String() string {
	var out []string
	for _, n := range allSections {
		if s[n] {
			out = append(out, n)
		}
	}
	return strings.Join(out, ",")
}

// fleet is the servers the chosen sections run against. A field is nil
// when no section needs that server.
type fleet struct {
	rl    *server // in memory, --procs o.procs: the reference
	rlAll *server // in memory, every core (default flags); nil when o.procs is 0
	rlGo  *server // in memory, a goroutine per connection
	// Durable rlservers, --consistency fast and strong, at --procs o.procs
	// and with every core.
	fast, fastAll, strong, strongAll *server
	redis                            *server // no persistence
	aofEverysec, aofAlways           *server // --appendonly yes --appendfsync everysec / always
	shas                             map[string]string
	// rlScripts is the scripts section's rlserver: durable, default flags.
	rlScripts *server
	libShas   map[string]string // the scripts section's shas, by its label
	started   []*server
}

// startFleet starts the servers secs need; on an error it stops those it
// had started.
func startFleet(o options, secs sections, dir string, logw io.Writer) (*fleet, error) {
	f := &fleet{}
	rl := func(dst **server, name string, procs int, extra ...string) error {
		s, err := startRLServer(name, o.rlserver, dir, procs, logw, extra...)
		if err == nil {
			*dst, f.started = s, append(f.started, s)
		}
		return err
	}
	rd := func(dst **server, name string, extra ...string) error {
		s, err := startRedis(name, o.redisServer, filepath.Join(dir, name), logw, extra...)
		if err == nil {
			*dst, f.started = s, append(f.started, s)
		}
		return err
	}
	var steps []func() error
	inMemory := secs[secThroughput] || secs[secDurable] || secs[secMemory]
	if inMemory {
		steps = append(steps, func() error { return rl(&f.rl, "rlserver", o.procs, "--data-dir", "") })
	}
	if (secs[secThroughput] || secs[secDurable]) && o.procs != 0 {
		steps = append(steps, func() error { return rl(&f.rlAll, "rlserver-all", 0, "--data-dir", "") })
	}
	if secs[secThroughput] {
		steps = append(steps, func() error { return rl(&f.rlGo, "rlserver-gor", o.procs, "--io-loops", "-1", "--data-dir", "") })
	}
	if secs[secDurable] {
		steps = append(steps, f.durableSteps(o, rl, rd)...)
	}
	if secs[secThroughput] || secs[secMemory] {
		steps = append(steps, func() error { return rd(&f.redis, "redis", "--appendonly", "no") })
	}
	if secs[secScripts] {
		steps = append(steps, func() error { return rl(&f.rlScripts, "rlserver-scripts", 0) })
		if !secs[secDurable] {
			steps = append(steps, func() error {
				return rd(&f.aofEverysec, "redis-aof-everysec", "--appendonly", "yes", "--appendfsync", "everysec")
			})
		}
	}
	for _, step := range steps {
		if err := step(); err != nil {
			f.stop()
			return nil, err
		}
	}
	if err := f.loadScripts(o.luaref); err != nil {
		return nil, err
	}
	if err := f.loadLibScripts(o.luaref); err != nil {
		f.stop()
		return nil, err
	}
	return f, nil
}

// durableSteps start the durable rlservers and the Redis servers with AOF.
func (f *fleet) durableSteps(o options, rl func(**server, string, int, ...string) error,
	rd func(**server, string, ...string) error) []func() error {
	steps := []func() error{
		func() error { return rl(&f.fast, "rlserver-fast", o.procs, "--consistency", "fast") },
		func() error { return rl(&f.strong, "rlserver-strong", o.procs, "--consistency", "strong") },
		func() error {
			return rd(&f.aofEverysec, "redis-aof-everysec", "--appendonly", "yes", "--appendfsync", "everysec")
		},
		func() error {
			return rd(&f.aofAlways, "redis-aof-always", "--appendonly", "yes", "--appendfsync", "always")
		},
	}
	if o.procs != 0 {
		steps = append(steps,
			func() error { return rl(&f.fastAll, "rlserver-fast-all", 0, "--consistency", "fast") },
			func() error { return rl(&f.strongAll, "rlserver-strong-all", 0, "--consistency", "strong") })
	}
	return steps
}

// loadScripts loads the reference Lua limiters into the Redis servers
// that run them: the one without persistence and the AOF everysec one
// (token.lua only is run there; the SHA1 is the same).
func (f *fleet) loadScripts(luaref string) error {
	for _, rd := range []*server{f.redis, f.aofEverysec} {
		if rd == nil {
			continue
		}
		shas, err := loadScripts(rd, luaref)
		if err != nil {
			f.stop()
			return err
		}
		f.shas = shas
	}
	return nil
}

// stop stops every server of the fleet.
func (f *fleet) stop() {
	for _, s := range f.started {
		s.stop()
	}
	f.started = nil
}
