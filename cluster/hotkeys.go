package cluster

import (
	"context"
	"encoding/json"
	"time"

	"github.com/rlserver/rlserver/shards"
)

// hotKeysTimeout bounds how long HotKeys waits for the other nodes: one
// that has not answered by then is left out of the answer.
const hotKeysTimeout = time.Second

// hotKeysReq asks a node for its own hot keys (callHotKeys).
type hotKeysReq struct {
	Count int   `json:"count"`
	Now   int64 `json:"now"` // the asking node's clock: the window's end
}

// hotKeyWire is one row of a callHotKeys answer; the key is bytes, so that
// a key that is not UTF-8 crosses intact.
type hotKeyWire struct {
	Key    []byte `json:"key"`
	Checks uint64 `json:"checks"`
	Denied uint64 `json:"denied"`
}

// HotKeys is Store.HotKeys over the node's one store.
func (n *Node) HotKeys(ctx context.Context, count int, now int64) []shards.HotKey {
	return n.store.HotKeys(ctx, count, now)
}

// localHotKeys returns this node's count hot keys: its stores' sketches
// summed per key (a key's group may have moved between them).
func (c *Cluster) localHotKeys(count int, now int64) []shards.HotKey {
	var lists [][]shards.HotKey
	for _, s := range c.Stores() {
		lists = append(lists, s.HotKeys(context.Background(), -1, now))
	}
	return shards.MergeHotKeys(count, lists...)
}

// hotKeysRPC answers another node's callHotKeys.
func (c *Cluster) hotKeysRPC(body []byte) ([]byte, error) {
	var req hotKeysReq
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	rows := c.localHotKeys(req.Count, req.Now)
	out := make([]hotKeyWire, len(rows))
	for i, r := range rows {
		out[i] = hotKeyWire{Key: []byte(r.Key), Checks: r.Checks, Denied: r.Denied}
	}
	return json.Marshal(out)
}
