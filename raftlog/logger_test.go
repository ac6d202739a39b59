package raftlog

import (
	"bytes"
	"log"
	"log/slog"
	"strings"
	"testing"

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
