package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"

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
func newRaftLogger(log *slog.Logger) hclog.Logger {
	level := hclog.Warn
	if log.Enabled(context.Background(), slog.LevelDebug) {
		level = hclog.Debug
	}
	return hclog.New(&hclog.LoggerOptions{
		Name: "raft", Level: level, JSONFormat: true, DisableTime: true,
		Output: slogWriter{log: log},
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

type slogWriter struct{ log *slog.Logger }

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
		w.log.Log(context.Background(), demote(slogLevel(lvl), msg, m), msg, args...)
	}
	return len(p), nil
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
