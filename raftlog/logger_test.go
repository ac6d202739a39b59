package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestPebbleLogsToLogger: Pebble's lines (here, the WAL replay of a
// reopen) reach the given logger, and none reach the standard logger,
// Pebble's default.
func TestPebbleLogsToLogger(t *testing.T) {
	var std bytes.Buffer
	prev := log.Writer()
	log.SetOutput(&std)
	defer log.SetOutput(prev)

	var got bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&got, &slog.HandlerOptions{Level: slog.LevelDebug}))
	fs := vfs.NewMem()
	for i := 0; i < 2; i++ {
		db, err := OpenDB("db", Options{FS: fs, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		mustStore(t, mustNew(t, db, 1), entries(1, 1, 3))
		mustClose(t, db)
	}
	if !strings.Contains(got.String(), "component=pebble") || !strings.Contains(got.String(), "WAL") {
		t.Fatalf("the logger got %q", got.String())
	}
	if std.Len() != 0 {
		t.Fatalf("Pebble wrote to the standard logger: %q", std.String())
	}
	// A nil logger discards.
	db, err := OpenDB("db", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	mustClose(t, db)
	if std.Len() != 0 {
		t.Fatalf("Pebble wrote to the standard logger: %q", std.String())
	}
}

func TestPebbleFatalPanics(t *testing.T) {
	var got bytes.Buffer
	p := pebbleLogger{slog.New(slog.NewTextHandler(&got, nil))}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "disk on fire") {
			t.Fatalf("Fatalf recovered %v", r)
		}
		if !strings.Contains(got.String(), "disk on fire") || !strings.Contains(got.String(), "level=ERROR") {
			t.Fatalf("Fatalf logged %q", got.String())
		}
	}()
	p.Fatalf("disk %s", "on fire")
}

// TestBackgroundErrorsLoggedOncePerCondition: Pebble retries a failed
// flush at once, for as long as it fails; a hundred thousand failures log one line,
// one more per minute while they go on, and one with the count when a
// flush succeeds. Another kind of error starts a condition of its own.
func TestBackgroundErrorsLoggedOncePerCondition(t *testing.T) {
	var got bytes.Buffer
	now := time.Unix(1e9, 0)
	b := &bgErrors{log: slog.New(slog.NewTextHandler(&got, nil)), now: func() time.Time { return now }}
	full := &os.PathError{Op: "write", Path: "db/000004.log", Err: syscall.ENOSPC}
	for i := 0; i < 100000; i++ {
		b.failed(fmt.Errorf("pebble: flush: %w", full))
	}
	now = now.Add(61 * time.Second)
	b.failed(full)
	b.failed(full)
	b.succeeded()
	b.succeeded() // nothing going on: no line
	b.failed(errors.New("pebble: table 000123 corrupt"))
	b.failed(errors.New("pebble: table 000456 corrupt")) // the same kind, numbers aside
	lines := strings.Split(strings.TrimSpace(got.String()), "\n")
	want := []string{"pebble background error;", "pebble background errors go on", "pebble background errors stopped", "pebble background error;"}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), got.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Fatalf("line %d: %s\nwant %q", i, lines[i], w)
		}
	}
	if !strings.Contains(lines[1], "errors=100001") || !strings.Contains(lines[2], "errors=100002") ||
		!strings.Contains(lines[2], `kind="no space left on device"`) {
		t.Fatalf("counts or kind missing:\n%s", got.String())
	}
}
