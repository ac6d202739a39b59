package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestRaftRepeatsHeldBack: a raft warning or error that repeats (a
// follower whose disk refuses every append) is logged once a minute with
// the count of the lines held back; other messages and Info lines pass.
func TestRaftRepeatsHeldBack(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(1e9, 0)
	w := slogWriter{log: slog.New(slog.NewTextHandler(&out, nil)),
		repeats: &repeats{seen: map[string]*repeat{}, now: func() time.Time { return now }}}
	line := func(level, msg string) {
		w.Write([]byte(`{"@level":"` + level + `","@message":"` + msg + `","error":"no space"}` + "\n"))
	}
	for i := 0; i < 50; i++ {
		line("error", "failed to append to logs")
		line("warn", "failed to contact")
		now = now.Add(100 * time.Millisecond)
	}
	line("info", "entering follower state")
	now = now.Add(time.Minute)
	line("error", "failed to append to logs")
	got := out.String()
	if n := strings.Count(got, "failed to append to logs"); n != 2 {
		t.Fatalf("%d lines of the repeated error, want 2:\n%s", n, got)
	}
	if n := strings.Count(got, "failed to contact"); n != 1 {
		t.Fatalf("%d lines of the repeated warning, want 1:\n%s", n, got)
	}
	if !strings.Contains(got, "repeats_not_logged=49") || !strings.Contains(got, "entering follower state") {
		t.Fatalf("count or info line missing:\n%s", got)
	}
}
