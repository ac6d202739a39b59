package main

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/clock"
)

// fakeClocks are the wall, monotonic and boot clocks of a fake machine.
type fakeClocks struct{ wall, mono, boot atomic.Int64 }

func (f *fakeClocks) Read() (int64, int64) { return f.wall.Load(), f.mono.Load() }

// run lets d pass on every clock; suspend lets it pass on the wall and
// boot clocks only, as a machine suspended for d; step steps the wall clock.
func (f *fakeClocks) run(d time.Duration) {
	f.wall.Add(int64(d))
	f.mono.Add(int64(d))
	f.boot.Add(int64(d))
}
func (f *fakeClocks) suspend(d time.Duration) { f.wall.Add(int64(d)); f.boot.Add(int64(d)) }
func (f *fakeClocks) step(d time.Duration)    { f.wall.Add(int64(d)) }

// TestNodeClockCheck: a table of what happens between two checks of the
// clocks, and what the check makes of it: the offset after it, whether it
// logs a step or a suspend, whether the clock file is written.
func TestNodeClockCheck(t *testing.T) {
	parallel(t)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano()
	f := &fakeClocks{}
	f.wall.Store(t0)
	f.boot.Store(int64(time.Hour))
	var logs bytes.Buffer
	n := newNodeClock(f, slog.New(slog.NewTextHandler(&logs, nil)))
	n.boot = func() clock.Boot { return clock.Boot{ID: "b", Uptime: f.boot.Load()} }
	path := filepath.Join(t.TempDir(), clockFile)
	n.pending = path
	n.persist()
	last := n.reading()
	for _, tc := range []struct {
		name       string
		happen     func()
		wantOffset time.Duration
		wantLog    string // "" for none
		wantSaved  bool
	}{
		{"a second", func() { f.run(time.Second) }, 0, "", false},
		{"suspended an hour: counted", func() { f.suspend(time.Hour); f.run(time.Second) }, 0, "the machine was suspended", false},
		{"the wall clock steps back an hour", func() { f.step(-time.Hour); f.run(time.Second) }, time.Hour - 10*time.Millisecond, "the wall clock stepped", true},
		{"a second on: converging, saved", func() { f.run(time.Second) }, time.Hour - 20*time.Millisecond, "", true},
		{"an NTP-sized step: not logged", func() { f.step(50 * time.Millisecond); f.run(time.Second) }, time.Hour - 80*time.Millisecond, "", true},
	} {
		logs.Reset()
		before := n.saved
		tc.happen()
		last = n.check(last)
		if got := time.Duration(n.Offset()); got != tc.wantOffset {
			t.Errorf("%s: offset %v, want %v", tc.name, got, tc.wantOffset)
		}
		if got := logs.String(); tc.wantLog == "" && got != "" || !strings.Contains(got, tc.wantLog) {
			t.Errorf("%s: logged %q, want %q", tc.name, got, tc.wantLog)
		}
		if saved := n.saved != before; saved != tc.wantSaved {
			t.Errorf("%s: saved %v, want %v", tc.name, saved, tc.wantSaved)
		}
	}
	m, ok, err := clock.Load(path)
	if !ok || err != nil || m != n.saved {
		t.Fatalf("the clock file holds %+v (%v %v), want the last mark saved %+v", m, ok, err, n.saved)
	}
}
