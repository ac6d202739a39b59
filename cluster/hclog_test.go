package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPeerLinesAreThrottled: raft's warnings and errors about a peer that
// cannot be reached, from every group of a node, make one line per peer per
// peerLogInterval, the next carrying the count of the lines it stands for;
// lines about other peers, and lines at Info, are not held back.
func TestPeerLinesAreThrottled(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))
	now := time.Unix(1000, 0)
	peers := newPeerLog()
	peers.now = func() time.Time { return now }
	var loggers []interface {
		Error(string, ...any)
		Warn(string, ...any)
		Info(string, ...any)
	}
	for g := 1; g <= 3; g++ {
		loggers = append(loggers, newRaftLogger(log.With("group", g), peers))
	}
	n2 := map[string]any{"Address": "127.0.0.1:1", "ID": "n2", "Suffrage": 0}
	for i := 0; i < 100; i++ {
		l := loggers[i%3]
		l.Error("failed to appendEntries to", "peer", n2, "error", "dial tcp: connection refused")
		l.Warn("failed to contact", "server-id", "n2", "time", "1s")
		l.Warn("rejecting pre-vote request since we have a leader", "from", "127.0.0.1:2") // about no peer
	}
	loggers[0].Error("failed to make requestVote RPC", "target", map[string]any{"ID": "n3"}, "error", "EOF")
	lines := func(substr string) int {
		mu.Lock()
		defer mu.Unlock()
		return strings.Count(buf.String(), substr)
	}
	if n := lines("n2"); n != 1 {
		t.Fatalf("%d lines about unreachable n2 from 3 groups, want 1:\n%s", n, buf.String())
	}
	if lines("requestVote") != 1 {
		t.Fatalf("the line about another peer was held back:\n%s", buf.String())
	}
	if n := lines("rejecting pre-vote"); n != 3 {
		t.Fatalf("%d lines of a warning about no peer from 3 groups, want 3 (one per group: see TestRaftRepeatsHeldBack)", n)
	}
	now = now.Add(peerLogInterval)
	loggers[2].Error("failed to heartbeat to", "peer", n2, "error", "EOF")
	if n := lines("repeated=199"); n != 1 {
		t.Fatalf("the first line after the interval does not count the 199 held back:\n%s", buf.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

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
	if !strings.Contains(got, "repeated=49") || !strings.Contains(got, "entering follower state") {
		t.Fatalf("count or info line missing:\n%s", got)
	}
}

// TestLeftNodeRaftQuiet: once the node has left the cluster, raft's
// warnings (heartbeat timeouts, elections) are dropped; its errors pass.
func TestLeftNodeRaftQuiet(t *testing.T) {
	var out bytes.Buffer
	peers := newPeerLog()
	l := newRaftLogger(slog.New(slog.NewTextHandler(&out, nil)), peers)
	l.Warn("heartbeat timeout reached, starting election", "last-leader-id", "n1")
	peers.left.Store(true)
	l.Warn("heartbeat timeout reached, not part of a stable configuration or a non-voter, not triggering a leader election")
	l.Warn("Election timeout reached, restarting election")
	l.Error("failed to take snapshot", "error", "disk")
	got := out.String()
	if strings.Count(got, "heartbeat timeout reached") != 1 || strings.Contains(got, "restarting election") ||
		!strings.Contains(got, "failed to take snapshot") {
		t.Fatalf("after leaving:\n%s", got)
	}
}
