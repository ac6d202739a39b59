package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// wallClock reads the clocks the node's decision clock follows (a
// clock.Source): the system's wall clock, shifted by what
// --test-clock-shift-file holds, and the process's monotonic clock. The
// flag is for tests: they step the wall clock of a real process, as NTP or
// a resumed VM would, without touching the machine's clock.
type wallClock struct {
	start time.Time    // the origin of the monotonic readings
	shift atomic.Int64 // ns added to the system's wall clock
}

// newWallClock returns the system's clocks, unshifted.
func newWallClock() *wallClock { return &wallClock{start: time.Now()} }

// Read returns the shifted wall clock in ns since the epoch and the
// monotonic clock in ns since w was made, from one reading.
func (w *wallClock) Read() (wall, mono int64) {
	t := time.Now()
	return t.UnixNano() + w.shift.Load(), int64(t.Sub(w.start))
}

// shiftPoll is how often --test-clock-shift-file is read.
const shiftPoll = 10 * time.Millisecond

// readShift reads path once and sets the shift it holds: a Go duration
// ("-1h", "24h"); a missing or empty file is no shift. It logs each new
// shift, which the tests wait for.
func (w *wallClock) readShift(path string, log *slog.Logger) {
	b, err := os.ReadFile(path)
	s := strings.TrimSpace(string(b))
	if errors.Is(err, os.ErrNotExist) || err == nil && s == "" {
		s, err = "0s", nil
	}
	d, perr := time.ParseDuration(s)
	if err != nil || perr != nil {
		log.Warn("--test-clock-shift-file: not a duration; the shift is unchanged", "file", path, "err", errors.Join(err, perr))
		return
	}
	if old := w.shift.Swap(int64(d)); old != int64(d) {
		log.Warn("test clock shift: the wall clock this node reads is shifted (--test-clock-shift-file)", "shift", d)
	}
}

// watchShift reads path now and then every shiftPoll until ctx ends.
func (w *wallClock) watchShift(ctx context.Context, path string, log *slog.Logger) {
	w.readShift(path, log)
	go func() {
		t := time.NewTicker(shiftPoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				w.readShift(path, log)
			}
		}
	}()
}
