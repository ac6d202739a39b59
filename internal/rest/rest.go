// Package rest runs an idle process's Go code on one core.
//
// With two or more Ps, every goroutine the runtime wakes while a P is
// idle also wakes a second thread to look for more work, and the
// runtime's monitor thread follows each wake-up: an idle cluster node,
// woken by its raft and pulse timers a hundred and more times a second,
// spends more on those threads than on its timers (cluster/DESIGN.md,
// "Idle cost"). A Governor sets GOMAXPROCS to 1 once the process has had
// no client request and has used little CPU for a while, and gives it
// back at the first request, or within a tick once the process gets busy
// for another reason (a follower replicating its leader's writes).
package rest

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"
)

// Busy is the CPU share, of one core, above which a tick counts as busy.
// An idle cluster node uses 1.3-2% of a core on a quiet host and 4-8% on a
// busy one (its timers' wake-ups cost more there), and must rest on both;
// a process at rest can use a whole core, so a quarter of one is work it
// has room for, and more is work that other cores may help with.
const Busy = 0.25

// Tick is how often a Governor reads the process's CPU time by default.
const Tick = time.Second

// Governor decides when the process rests. Touch is safe for concurrent
// use; Run is called once.
type Governor struct {
	// After is how long the process must have been quiet (no Touch, no
	// busy tick) before it rests.
	After time.Duration
	// Every is how often Run reads the CPU time: Tick by default.
	Every time.Duration
	// Rest and Wake change the process's parallelism: by default
	// runtime.GOMAXPROCS(1) and runtime.SetDefaultGOMAXPROCS.
	Rest, Wake func()
	// CPU returns the process's CPU time so far (user and system): by
	// default from getrusage.
	CPU func() time.Duration
	// OnChange, if set, is called after each change, with whether the
	// process now rests.
	OnChange func(resting bool)

	touched atomic.Bool
	resting atomic.Bool
	wake    chan struct{}

	// Run's state, read and written by step only.
	quietSince time.Time
	lastCPU    time.Duration
}

// New returns a Governor that rests the process after quiet.
func New(after time.Duration) *Governor {
	return &Governor{After: after, Every: Tick, Rest: func() { runtime.GOMAXPROCS(1) }, Wake: runtime.SetDefaultGOMAXPROCS,
		CPU: processCPU, wake: make(chan struct{}, 1)}
}

// Touch records activity: a client's request. It costs an atomic load
// when called again before the next tick, and wakes a resting process at
// once.
func (g *Governor) Touch() {
	if g.touched.Load() {
		return
	}
	g.touched.Store(true)
	if g.resting.Load() {
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
}

// Resting reports whether the process rests now.
func (g *Governor) Resting() bool { return g.resting.Load() }

// Run governs until ctx ends, and then gives the process its cores back.
func (g *Governor) Run(ctx context.Context) {
	t := time.NewTicker(g.Every)
	defer t.Stop()
	last := time.Now()
	g.lastCPU = g.CPU()
	g.quietSince = last
	for {
		select {
		case <-ctx.Done():
			if g.resting.Load() {
				g.change(false)
			}
			return
		case <-g.wake:
		case now := <-t.C:
			cpu := g.CPU()
			g.step(now, cpu, now.Sub(last))
			last = now
		}
		if g.resting.Load() && g.touched.Load() {
			g.change(false)
			g.quietSince = time.Now()
		}
	}
}

// step is one tick at now: cpu is the process's CPU time, elapsed the
// time since the last tick. A touch or a busy tick makes the process
// quiet from now on (and wakes it); After of quiet rests it.
func (g *Governor) step(now time.Time, cpu, elapsed time.Duration) {
	used := cpu - g.lastCPU
	g.lastCPU = cpu
	touched := g.touched.Swap(false)
	if touched || elapsed > 0 && float64(used) > Busy*float64(elapsed) {
		g.quietSince = now
		if g.resting.Load() {
			g.change(false)
		}
		return
	}
	if !g.resting.Load() && now.Sub(g.quietSince) >= g.After {
		g.change(true)
		if g.touched.Load() { // a request came while it went to rest
			g.change(false)
		}
	}
}

// change rests or wakes the process.
func (g *Governor) change(rest bool) {
	if rest {
		g.Rest()
	} else {
		g.Wake()
	}
	g.resting.Store(rest)
	if g.OnChange != nil {
		g.OnChange(rest)
	}
}
