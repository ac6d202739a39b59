package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/internal/clock"
)

// clockFile is the file, in the data directory, that carries the decision
// clock across restarts (internal/clock's Mark).
const clockFile = "rlserver.clock.json"

// nodeClock is the node's decision clock (internal/clock: monotonic,
// converging on the wall clock at 1%), the time of every check, log
// entry, block and sweep, and the data directory's file that carries it
// across restarts. Safe for concurrent use.
type nodeClock struct {
	*clock.Clock
	src  clock.Source
	log  *slog.Logger
	boot func() clock.Boot

	mu      sync.Mutex
	pending string     // the mark's file, once resumed from it
	path    string     // the mark's file once the state is open (persist); "" until then
	saved   clock.Mark // the mark last saved
	failing bool       // the last save failed (logged once)
}

// newNodeClock returns a decision clock over src, starting at its wall
// clock.
func newNodeClock(src clock.Source, log *slog.Logger) *nodeClock {
	return &nodeClock{Clock: clock.New(src), src: src, log: log, boot: readBoot}
}

// register adds rlserver_clock_offset_seconds to reg.
func (n *nodeClock) register(reg prometheus.Registerer) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rlserver_clock_offset_seconds",
		Help: "The decision clock less the wall clock: positive after the wall clock stepped back (decisions then run at 99% of real time until they meet it), negative after it stepped forward (101%); 0 while they agree."},
		func() float64 { return float64(n.Offset()) / 1e9 }))
}

// resume resumes the clock from the mark in dir, if there is one; it
// writes nothing (a start that is refused leaves the directory as it
// was): persist does, once the state is open. A mark that cannot be read
// is logged and ignored: the clock then starts at the wall clock, and is
// raised to the time of the log's latest entry once the log is replayed
// (cluster.Durability.RaiseClock), so it never decides before its state.
func (n *nodeClock) resume(dir string) {
	path := filepath.Join(dir, clockFile)
	m, ok, err := clock.Load(path)
	switch {
	case err != nil:
		n.log.Error("the decision clock's file is unreadable: the clock starts at the wall clock", "err", err)
	case ok:
		n.Resume(m, n.boot())
		if off := n.Offset(); abs(off) >= int64(time.Millisecond) {
			n.log.Warn("the decision clock resumed away from the wall clock: it converges on it at 1% (INFO rlserver clock_offset_ms)",
				"offset", time.Duration(off).Round(time.Millisecond), "file_offset", time.Duration(m.Offset()).Round(time.Millisecond))
		}
	}
	n.mu.Lock()
	n.pending = path
	n.mu.Unlock()
}

// persist starts keeping the mark in the file resume read (none without
// a data directory), and writes it now. Call once the state is open.
func (n *nodeClock) persist() {
	n.mu.Lock()
	n.path = n.pending
	n.mu.Unlock()
	n.save()
}

// save writes the clock's mark now, once persist has been called. A
// failure is logged once, until a save succeeds again.
func (n *nodeClock) save() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.path == "" {
		return
	}
	m := n.Mark(n.boot())
	if err := clock.Save(n.path, m); err != nil {
		if !n.failing {
			n.log.Warn("the decision clock's file could not be written (a restart may resume it from an older one)", "file", n.path, "err", err)
		}
		n.failing = true
		return
	}
	n.saved, n.failing = m, false
}

// raise raises the clock to t, the latest time the node's state was
// written at (cluster.Durability.RaiseClock), and logs a raise.
func (n *nodeClock) raise(t int64) {
	by := n.AtLeast(t)
	if by < int64(time.Millisecond) {
		return
	}
	n.log.Warn("decision clock raised to the latest time its state was written at (another node's clock, or this node's before a restart, was ahead)",
		"by", time.Duration(by).Round(time.Millisecond), "offset", time.Duration(n.Offset()).Round(time.Millisecond))
	n.save()
}

// Step detection and saving: keep reads the clocks every keepEvery. A
// change of the offset larger than stepLog between two readings is a step
// of the wall clock (the clock's own correction moves it by 1% of the time
// between); a boot clock ahead of the monotonic clock by more than stepLog
// is a suspend.
const (
	keepEvery = time.Second
	stepLog   = 100 * time.Millisecond
)

// keep, until ctx ends, checks the clocks every keepEvery (check).
func (n *nodeClock) keep(ctx context.Context) {
	t := time.NewTicker(keepEvery)
	defer t.Stop()
	last := n.reading()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			last = n.check(last)
		}
	}
}

// reading is what check compares: the decision time and its offset, the
// boot clock (-1 when the boot is unknown) and the monotonic clock, read
// together.
type reading struct{ decided, offset, boot, mono int64 }

func (n *nodeClock) reading() reading {
	b := n.boot()
	_, mono := n.src.Read()
	d, w := n.Read()
	r := reading{decided: d, offset: d - w, boot: b.Uptime, mono: mono}
	if b.ID == "" {
		r.boot = -1
	}
	return r
}

// check compares the clocks with last and returns the new reading. Time
// the machine spent suspended (its boot clock went on, the process's
// monotonic clock did not) is real time: the clock is moved on to where
// the boot clock says it would be. A step of the wall clock is logged. The mark is saved whenever the offset
// moved by a millisecond or more since the last save (once a second while
// the clock converges; never while it agrees with the wall clock).
func (n *nodeClock) check(last reading) reading {
	now := n.reading()
	if last.boot >= 0 && now.boot >= 0 {
		if slept := (now.boot - last.boot) - (now.mono - last.mono); slept > int64(stepLog) {
			n.AtLeast(last.decided + now.boot - last.boot)
			now = n.reading()
			n.log.Info("the machine was suspended: the decision clock counts that time (measured on its boot clock)",
				"suspended", time.Duration(slept).Round(time.Millisecond), "offset", time.Duration(now.offset).Round(time.Millisecond))
		}
	}
	if d := time.Duration(now.offset - last.offset); d > stepLog || d < -stepLog {
		n.log.Warn("the wall clock stepped: decisions stay on the decision clock, which converges on it at 1% (INFO rlserver clock_offset_ms)",
			"step", -d.Round(time.Millisecond), "offset", time.Duration(now.offset).Round(time.Millisecond),
			"converged_in", (time.Duration(abs(now.offset)) * clock.Slew).Round(time.Second))
	}
	n.mu.Lock()
	due := n.path != "" && abs(now.offset-n.saved.Offset()) >= int64(time.Millisecond)
	n.mu.Unlock()
	if due {
		n.save()
	}
	return now
}

func abs(n int64) int64 { return max(n, -n) }
