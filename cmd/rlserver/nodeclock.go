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
	log  *slog.Logger
	boot func() clock.Boot

	mu    sync.Mutex
	path  string     // the mark's file; "" without a data directory
	saved clock.Mark // the mark last saved
}

// newNodeClock returns a decision clock over src, starting at its wall
// clock.
func newNodeClock(src clock.Source, log *slog.Logger) *nodeClock {
	return &nodeClock{Clock: clock.New(src), log: log, boot: readBoot}
}

// register adds rlserver_clock_offset_seconds to reg.
func (n *nodeClock) register(reg prometheus.Registerer) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rlserver_clock_offset_seconds",
		Help: "The decision clock less the wall clock: positive after the wall clock stepped back (decisions then run at 99% of real time until they meet it), negative after it stepped forward (101%); 0 while they agree."},
		func() float64 { return float64(n.Offset()) / 1e9 }))
}

// resume resumes the clock from the mark in dir, if there is one, and
// saves a fresh mark there. A mark that cannot be read is logged and
// ignored: the clock then starts at the wall clock, and is raised to the
// time of the log's latest entry once the log is replayed
// (cluster.Durability.RaiseClock), so it never decides before its state.
func (n *nodeClock) resume(dir string) {
	path := filepath.Join(dir, clockFile)
	m, ok, err := clock.Load(path)
	switch {
	case err != nil:
		n.log.Error("the decision clock's file is unreadable: the clock starts at the wall clock", "err", err)
	case ok:
		n.Resume(m, n.boot())
		n.log.Info("decision clock resumed", "offset", time.Duration(n.Offset()).Round(time.Millisecond),
			"mark_offset", time.Duration(m.Offset()).Round(time.Millisecond))
	}
	n.mu.Lock()
	n.path = path
	n.mu.Unlock()
	n.save()
}

// save writes the clock's mark now, if the node has a data directory.
func (n *nodeClock) save() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.path == "" {
		return
	}
	m := n.Mark(n.boot())
	if err := clock.Save(n.path, m); err != nil {
		n.log.Warn("the decision clock's file could not be written", "file", n.path, "err", err)
		return
	}
	n.saved = m
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

// Step detection and saving: keep reads the offset every keepEvery. A
// change larger than stepLog between two readings is a step of the wall
// clock (the clock's own correction moves it by 1% of the time between).
const (
	keepEvery = time.Second
	stepLog   = 100 * time.Millisecond
)

// keep, until ctx ends, logs the wall clock's steps and saves the mark
// whenever the offset moved by a millisecond or more since the last one
// (while the clock converges: once a second; while it agrees with the wall
// clock, never).
func (n *nodeClock) keep(ctx context.Context) {
	t := time.NewTicker(keepEvery)
	defer t.Stop()
	last := n.Offset()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		off := n.Offset()
		if d := time.Duration(off - last); d > stepLog || d < -stepLog {
			n.log.Warn("the wall clock stepped: decisions stay on the decision clock, which converges on it at 1% (INFO rlserver clock_offset_ms)",
				"step", -d.Round(time.Millisecond), "offset", time.Duration(off).Round(time.Millisecond),
				"converged_in", (time.Duration(abs(off)) * clock.Slew).Round(time.Second))
		}
		last = off
		n.mu.Lock()
		due := n.path != "" && abs(off-n.saved.Offset()) >= int64(time.Millisecond)
		n.mu.Unlock()
		if due {
			n.save()
		}
	}
}

func abs(n int64) int64 { return max(n, -n) }
