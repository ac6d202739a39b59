package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// newRaftLogger returns an hclog.Logger for raft that writes through log:
// raft logs as JSON lines into slogWriter, which turns each back into a
// record at the same level, with its fields as attributes.
//
// Raft's Info lines (entering follower, candidate and leader state, each
// election's progress) are logged at Debug: at start they only say what
// "state loaded" says. Its warning that the heartbeat timed out is dropped
// when no leader was ever known: that is how a one-voter group starts.
//
// Raft's warnings and errors about one peer (it cannot be reached: every
// heartbeat, append and vote to it fails) go through peers, when not nil:
// one line per peer per interval, with the count of those it stood for.
//
// Once the node has left the cluster (peers.left), raft's lines below
// Error are dropped: its raft only waits, election after election, for a
// leader that no longer counts it, and the node said once what it is
// (see noteLeft).
func newRaftLogger(log *slog.Logger, peers *peerLog) hclog.Logger {
	level := hclog.Warn
	if log.Enabled(context.Background(), slog.LevelDebug) {
		level = hclog.Debug
	}
	return hclog.New(&hclog.LoggerOptions{
		Name: "raft", Level: level, JSONFormat: true, DisableTime: true,
		Output: slogWriter{log: log, peers: peers, repeats: &repeats{seen: map[string]*repeat{}, now: time.Now}},
		Exclude: func(_ hclog.Level, msg string, args ...any) bool {
			return msg == "heartbeat timeout reached, starting election" && noLeaderYet(args)
		},
	})
}

// noLeaderYet reports whether raft's log arguments say that no leader was
// known before.
func noLeaderYet(args []any) bool {
	for i := 0; i+1 < len(args); i += 2 {
		if k, _ := args[i].(string); k == "last-leader-id" {
			return fmt.Sprint(args[i+1]) == ""
		}
	}
	return false
}

type slogWriter struct {
	log     *slog.Logger
	peers   *peerLog
	repeats *repeats
}

// peerLog throttles the lines about each peer, node-wide (every group of
// the node shares it): the first line about a peer is logged, the next
// ones within peerLogInterval are counted, and the first after it is
// logged with that count ("repeated"), so a node that is down costs one
// line per interval, not one per RPC of every group.
type peerLog struct {
	mu    sync.Mutex
	peers map[string]*peerLogEntry
	now   func() time.Time
	// left: the node has left the cluster; raft's lines below Error are
	// dropped (see newRaftLogger).
	left atomic.Bool
}

type peerLogEntry struct {
	last       time.Time // when a line about the peer was last logged
	suppressed int       // lines since
}

// peerLogInterval is the least time between two lines about one peer.
const peerLogInterval = 10 * time.Second

func newPeerLog() *peerLog { return &peerLog{peers: map[string]*peerLogEntry{}, now: time.Now} }

// admit reports whether a line about peer may be logged now, and how many
// were suppressed since the last one.
func (p *peerLog) admit(peer string) (bool, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	e := p.peers[peer]
	if e == nil {
		p.peers[peer] = &peerLogEntry{last: now}
		return true, 0
	}
	if now.Sub(e.last) < peerLogInterval {
		e.suppressed++
		return false, 0
	}
	n := e.suppressed
	e.last, e.suppressed = now, 0
	return true, n
}

// peerOf returns the id of the peer a raft line is about, or "".
func peerOf(fields map[string]any) string {
	for _, k := range []string{"peer", "target", "server-id"} {
		switch v := fields[k].(type) {
		case map[string]any:
			if id, ok := v["ID"].(string); ok {
				return id
			}
		case string:
			return v
		}
	}
	return ""
}

// Write takes one or more JSON lines from hclog.
func (w slogWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimSpace(p), []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(line, &m) != nil {
			w.log.Info(string(line))
			continue
		}
		msg, _ := m["@message"].(string)
		lvl, _ := m["@level"].(string)
		keys := make([]string, 0, len(m))
		for k := range m {
			if k[0] != '@' {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		args := []any{"module", "raft"}
		for _, k := range keys {
			args = append(args, k, m[k])
		}
		level := demote(slogLevel(lvl), msg, m)
		if w.peers != nil && w.peers.left.Load() && level < slog.LevelError {
			continue
		}
		switch peer := peerOf(m); {
		case level < slog.LevelWarn:
		case peer != "" && w.peers != nil:
			ok, repeated := w.peers.admit(peer)
			if !ok {
				continue
			}
			if repeated > 0 {
				args = append(args, "repeated", repeated, "over", peerLogInterval.String())
			}
		default:
			ok, held := w.repeats.allow(msg)
			if !ok {
				continue
			}
			if held > 0 {
				args = append(args, "repeated", held, "over", repeatWindow.String())
			}
		}
		w.log.Log(context.Background(), level, msg, args...)
	}
	return len(p), nil
}

// repeats holds back raft's warnings and errors that repeat: a message
// already logged within repeatWindow is counted, not logged (a follower
// whose disk refuses entries fails every append its leader sends, a few
// times a second); the next line of the message that is logged says how
// many were held back. It is safe for concurrent use.
type repeats struct {
	mu   sync.Mutex
	seen map[string]*repeat
	now  func() time.Time
}

type repeat struct {
	logged time.Time
	held   int64
}

// repeatWindow is how long a logged message holds back its repeats.
const repeatWindow = time.Minute

// maxRepeats bounds the messages remembered (raft's are a fixed set).
const maxRepeats = 256

// allow reports whether a line with msg may be logged now, and how many
// lines of it were held back since it was last logged.
func (r *repeats) allow(msg string) (bool, int64) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.seen[msg]
	if s != nil && now.Sub(s.logged) < repeatWindow {
		s.held++
		return false, 0
	}
	if s == nil {
		if len(r.seen) >= maxRepeats {
			clear(r.seen)
		}
		s = &repeat{}
		r.seen[msg] = s
	}
	held := s.held
	s.logged, s.held = now, 0
	return true, held
}

// demote lowers the level of raft's errors that are how a cluster works,
// not faults: a leader that hands over its lead or loses it "stops
// replication" to a peer with a newer term, and a connection that a
// stopping or restarting peer closed fails to decode.
func demote(l slog.Level, msg string, fields map[string]any) slog.Level {
	switch msg {
	case "peer has newer term, stopping replication":
		return min(l, slog.LevelInfo)
	case "failed to decode incoming command":
		if e, _ := fields["error"].(string); strings.Contains(e, "closed network connection") || strings.HasSuffix(e, "EOF") ||
			strings.Contains(e, "connection reset") {
			return min(l, slog.LevelDebug)
		}
	}
	return l
}

func slogLevel(l string) slog.Level {
	switch l {
	case "trace", "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}
