package script

import (
	"fmt"
	"runtime/metrics"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// The hook. gopher-lua has no debug hooks, but when a state has a context
// its interpreter loop asks the context's Done channel before every
// instruction. A state's context is its hook: Done counts instructions and,
// every checkEvery of them or when the watchdog poked it (watchdog.go),
// looks at the run from the run's own goroutine (as Redis's count hook
// does every 100000 instructions): whether it was
// killed, whether it has gone past the time limit (busy), and whether its
// values have grown past the memory limit. To stop the run Done returns a
// closed channel, and keeps returning it, so that no pcall can catch the
// error for long: the interpreter raises Err's message at the next
// instruction, inside or outside a pcall, until the run has unwound.

const (
	checkEvery = 1024                   // instructions between two looks
	sampleGap  = 200 * time.Microsecond // between two reads of the heap counter
)

// abort is why a run was stopped by the hook.
type abort struct{ msg string }

func (a *abort) Error() string { return a.msg }

var (
	errKilled = &abort{"Script killed by user with SCRIPT KILL..."}
)

// hook is a state's context.Context (see above). Its fields are used by the
// state's goroutine only.
type hook struct {
	st      *state
	n       uint32
	poke    atomic.Bool // set by the watchdog: look before the next instruction
	run     *run
	began   time.Duration
	busyAt  time.Duration // start + TimeLimit
	longAt  time.Duration // start + LongRun
	onLong  func()        // Request.OnLong, until it is called
	busy    bool
	err     error // why the run stops; sticky until the run ends
	closed  chan struct{}
	samples []metrics.Sample

	line       int           // the current line at the last look, for errors without one
	lastSample time.Duration // when the heap counter was last read
	walkAllocs uint64        // the heap counter at the last walk
	lastSize   int64         // the run's values at the last walk, in bytes
}

// Deadline, Value: a hook carries no deadline and no values.
func (h *hook) Deadline() (time.Time, bool) { return time.Time{}, false }
func (h *hook) Value(any) any               { return nil }

// Err is why the run must stop (see Done).
func (h *hook) Err() error { return h.err }

// Done is called by the interpreter before each instruction.
func (h *hook) Done() <-chan struct{} {
	h.n++
	if h.err == nil && h.n%checkEvery != 0 && !h.poke.Load() {
		return nil
	}
	return h.check()
}

// start arms the hook for a run.
func (h *hook) start(x *Exec) {
	h.n, h.run, h.err, h.busy, h.line = 0, x.run, nil, false, 1
	h.began = x.run.start
	h.busyAt = h.began + h.st.e.cfg.TimeLimit
	h.longAt, h.onLong = h.began+h.st.e.cfg.LongRun, x.onLong
	h.lastSample, h.walkAllocs, h.lastSize = h.began, 0, 0
	if h.closed == nil {
		h.closed = make(chan struct{})
		close(h.closed)
		h.samples = []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	}
}

// stop disarms the hook after a run, and lifts its busy state.
func (h *hook) stop() {
	if h.busy {
		h.st.e.endRun(h.run)
	}
	h.run, h.err, h.busy, h.onLong = nil, nil, false, nil
}

// check is the periodic look at the run.
func (h *hook) check() <-chan struct{} {
	if h.err != nil {
		return h.closed
	}
	if h.run == nil {
		return nil
	}
	h.poke.Store(false)
	if h.run.state.Load() == runKilled {
		h.err = errKilled
		return h.closed
	}
	e := h.st.e
	now := e.cfg.Now()
	if h.onLong != nil && now >= h.longAt {
		f := h.onLong
		h.onLong = nil
		f()
	}
	if !h.busy && now >= h.busyAt {
		h.busy = true
		e.markBusy(h.run)
	}
	if now-h.lastSample >= sampleGap {
		h.lastSample = now
		h.noteLine()
		if h.grewTooMuch() {
			return h.closed
		}
	}
	return nil
}

// noteLine remembers the line running, for an error that comes without
// one (a full call stack).
func (h *hook) noteLine() {
	if dbg, ok := h.st.L.GetStack(0); ok {
		if _, err := h.st.L.GetInfo("l", dbg, lua.LNil); err == nil && dbg.CurrentLine > 0 {
			h.line = dbg.CurrentLine
		}
	}
}

// grewTooMuch measures the run's values when the process has allocated a
// quarter of the memory limit since the last measure, and stops the run
// if they are over the limit.
func (h *hook) grewTooMuch() bool {
	metrics.Read(h.samples)
	allocs := h.samples[0].Value.Uint64()
	limit := h.st.e.cfg.MemoryLimit
	if h.walkAllocs == 0 {
		h.walkAllocs = allocs
		return false
	}
	if allocs-h.walkAllocs < uint64(limit/4) {
		return false
	}
	h.lastSize = h.st.size(limit)
	metrics.Read(h.samples) // what the walk allocated does not count
	h.walkAllocs = h.samples[0].Value.Uint64()
	if h.lastSize > limit {
		h.err = memoryError(limit)
		return true
	}
	return false
}

// memoryError is the error of a run that went past the memory limit.
func memoryError(limit int64) error {
	return &abort{fmt.Sprintf("Script exceeded the memory limit of %d bytes", limit)}
}

// checkString returns the error for a string of n bytes that a library
// function is about to build, "" if it may: no single value may be larger
// than the memory limit.
func (h *hook) checkString(n int) string {
	if int64(n) > h.st.e.cfg.MemoryLimit || n < 0 {
		return memoryError(h.st.e.cfg.MemoryLimit).Error()
	}
	return ""
}
