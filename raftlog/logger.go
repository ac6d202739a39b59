package raftlog

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"github.com/cockroachdb/pebble/v2"
)

// pebbleLogger routes Pebble's log lines, which it would otherwise print
// to the standard logger, to a *slog.Logger with component=pebble.
type pebbleLogger struct{ l *slog.Logger }

// Infof logs at Debug: Pebble's informational lines (WALs found and
// replayed at open) say nothing an operator acts on.
func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf logs and then panics. Pebble calls it only where it cannot go on
// (a failed WAL or MANIFEST write, a broken invariant) and relies on it
// not returning; a panic, unlike os.Exit, leaves the decision to exit to
// the program, which sees the message in the panic value.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "component", "pebble", "fatal", true)
	panic("pebble: " + msg)
}

// eventListener logs the events that need an operator: background errors
// (throttled, see bgErrors), corruption found in a file (logged, not
// fatal: the read that found it returns the error to its caller) and slow
// disk operations.
func eventListener(l *slog.Logger) *pebble.EventListener {
	b := &bgErrors{log: l, now: time.Now}
	return &pebble.EventListener{
		BackgroundError: b.failed,
		FlushEnd: func(info pebble.FlushInfo) {
			if info.Err == nil {
				b.succeeded()
			}
		},
		CompactionEnd: func(info pebble.CompactionInfo) {
			if info.Err == nil {
				b.succeeded()
			}
		},
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			l.Error("pebble found corrupt data", "component", "pebble", "info", info.String())
		},
		DiskSlow: func(info pebble.DiskSlowInfo) {
			l.Warn("pebble disk slow", "component", "pebble", "info", info.String())
		},
	}
}

// bgErrors logs Pebble's background errors once per condition, never per
// retry: Pebble retries a failed flush at once and for as long as it
// fails (a full disk made it report millions of errors a minute). The
// first error of a kind (ENOSPC, EIO, ... or its text without numbers)
// is logged; the repeats are counted, and reported every bgReminder while
// they go on, and when a flush or compaction succeeds again. It is safe
// for concurrent use.
type bgErrors struct {
	log *slog.Logger
	now func() time.Time

	mu     sync.Mutex
	kind   string    // of the condition going on; "" if none
	count  int64     // errors of the condition
	first  time.Time // of the condition
	shown  int64     // count when last logged
	logged time.Time
}

// bgReminder is how often a condition that goes on is reported again.
const bgReminder = time.Minute

func (b *bgErrors) failed(err error) {
	kind := errorKind(err)
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.count > 0 && kind == b.kind {
		b.count++
		if now.Sub(b.logged) >= bgReminder {
			b.log.Error("pebble background errors go on", "component", "pebble", "err", err,
				"errors", b.count, "since", b.first.Format(time.RFC3339))
			b.logged, b.shown = now, b.count
		}
		return
	}
	b.end(now)
	b.kind, b.count, b.first, b.logged, b.shown = kind, 1, now, now, 1
	b.log.Error("pebble background error; repeats are counted, not logged, until Pebble recovers",
		"component", "pebble", "err", err)
}

// succeeded ends the condition going on, if any.
func (b *bgErrors) succeeded() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.end(b.now())
}

// end reports the condition going on as over. Call with mu held.
func (b *bgErrors) end(now time.Time) {
	if b.count == 0 {
		return
	}
	b.log.Warn("pebble background errors stopped", "component", "pebble", "kind", b.kind,
		"errors", b.count, "lasted", now.Sub(b.first).Round(time.Millisecond))
	b.kind, b.count = "", 0
}

// errorKind names the condition of a background error: its errno if it
// has one, else its text with the digits (file numbers) taken out.
func errorKind(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsDigit(r) {
			return -1
		}
		return r
	}, err.Error())
}
