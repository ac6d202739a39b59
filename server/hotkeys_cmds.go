package server

import (
	"context"
	"time"

	"github.com/rlserver/rlserver/shards"
)

// HotKeySource reports the keys checked most in about the last minute
// (see shards.Store.HotKeys): a *shards.Store, a durable node, or a
// cluster node, which merges every node's answer. Safe for concurrent
// use; a cluster's may wait for the other nodes, up to its own bound.
type HotKeySource interface {
	HotKeys(ctx context.Context, n int, now int64) []shards.HotKey
}

// hotKeysTimeout bounds RL.HOTKEYS as a whole.
const hotKeysTimeout = 3 * time.Second

func hotKeyCommands() []*command {
	return []*command{
		{name: "rl.hotkeys", arity: -1, flags: []string{"readonly", "loading", "stale"}, group: "rlserver",
			complexity: "O(shards)",
			summary:    "The keys checked most in the last minute: [key, checks, denied] rows, most checked first (approximate)",
			args:       []argDoc{{name: "count", typ: "integer", token: "COUNT", optional: true}},
			handler:    cmdHotKeys},
	}
}

// parseHotKeysCount parses RL.HOTKEYS's [COUNT n]: n from 1 up (clamped
// to shards.MaxHotKeys), default shards.DefaultHotKeys. It returns an error reply, or "".
func parseHotKeysCount(args [][]byte) (int, string) {
	switch {
	case len(args) == 1:
		return shards.DefaultHotKeys, ""
	case len(args) != 3 || !equalFold(args[1], "COUNT"):
		return 0, "ERR syntax error; usage: RL.HOTKEYS [COUNT count]"
	}
	n, ok := parseInt(args[2])
	if !ok || n < 1 {
		return 0, "ERR COUNT must be a positive integer"
	}
	return int(min(n, shards.MaxHotKeys)), ""
}

// RL.HOTKEYS [COUNT n]
//
// Reply: up to n (default 10) rows [key, checks, denied], most checked
// first, of the keys checked most in the last 45 to 60 seconds; on a
// cluster node, across every node that answers within a second.
func cmdHotKeys(s *Server, c *conn, args [][]byte, now int64) {
	n, msg := parseHotKeysCount(args)
	if msg != "" {
		c.writeError(msg)
		return
	}
	if s.hotKeys == nil {
		c.writeError("ERR this server keeps no hot keys")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), hotKeysTimeout)
	defer cancel()
	rows := s.hotKeys.HotKeys(ctx, n, now)
	c.writeArray(len(rows))
	for _, r := range rows {
		c.writeArray(3)
		c.writeBulkString(r.Key)
		c.writeInt(int64(min(r.Checks, 1<<63-1)))
		c.writeInt(int64(min(r.Denied, 1<<63-1)))
	}
}
