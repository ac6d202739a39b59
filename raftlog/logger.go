package raftlog

import (
	"fmt"
	"log/slog"

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

// eventListener logs the events that need an operator: background errors,
// corruption found in a file (logged, not fatal: the read that found it
// returns the error to its caller) and slow disk operations.
func eventListener(l *slog.Logger) *pebble.EventListener {
	return &pebble.EventListener{
		BackgroundError: func(err error) {
			l.Error("pebble background error", "component", "pebble", "err", err)
		},
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			l.Error("pebble found corrupt data", "component", "pebble", "info", info.String())
		},
		DiskSlow: func(info pebble.DiskSlowInfo) {
			l.Warn("pebble disk slow", "component", "pebble", "info", info.String())
		},
	}
}
