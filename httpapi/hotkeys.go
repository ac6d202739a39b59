package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/rlserver/rlserver/shards"
)

// HotKeySource reports the keys checked most in about the last minute
// (a *shards.Store, a durable node, or a cluster node, which merges every
// node's answer). Safe for concurrent use.
type HotKeySource interface {
	HotKeys(ctx context.Context, n int, now int64) []shards.HotKey
}

// hotKeysReply is GET /v1/hotkeys's answer. WindowMs is the longest the
// rows look back (they cover at least its last three quarters).
type hotKeysReply struct {
	HotKeys  []shards.HotKey `json:"hotkeys"`
	WindowMs int64           `json:"window_ms"`
}

// GET /v1/hotkeys[?count=n]: the n (default 10, at most 1000) keys
// checked most in the last minute, most first. Read access, as for rules:
// the keys name clients.
func (a *api) hotKeys(w http.ResponseWriter, r *http.Request) {
	if err := a.authorize(r, accessCheck, "reading the hot keys"); err != nil {
		writeError(w, err)
		return
	}
	n := shards.DefaultHotKeys
	if v, ok := r.URL.Query()["count"]; ok {
		c, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil || c < 1 || len(v) > 1 {
			writeError(w, badRequest("count", "want one positive integer"))
			return
		}
		n = int(min(c, shards.MaxHotKeys))
	}
	rows := a.cfg.HotKeys.HotKeys(r.Context(), n, a.cfg.Clock())
	if rows == nil {
		rows = []shards.HotKey{}
	}
	writeJSON(w, http.StatusOK, hotKeysReply{HotKeys: rows, WindowMs: shards.HotWindowNs / 1e6})
}
