package cluster

import (
	"context"
	"encoding/json"
	"sync"
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

// HotKeys returns the count keys checked most across the cluster in the
// window of about a minute that ends at now: every node's sketches (those
// of the checks it ran, in every group it hosts) summed per key. Nodes
// are asked at once; one that does not answer within a second (or before
// ctx ends) is left out, and the answer comes without it. Safe for
// concurrent use.
func (c *Cluster) HotKeys(ctx context.Context, count int, now int64) []shards.HotKey {
	per := max(2*count, 20) // a node's top rows: the key it holds most of comes first
	lists := [][]shards.HotKey{c.localHotKeys(per, now)}
	req := hotKeysReq{Count: per, Now: now}
	var mu sync.Mutex
	c.eachPeer(ctx, c.peerAddrs(), hotKeysTimeout, func(ctx context.Context, id, addr string) {
		rows, err := c.rpc.hotKeys(ctx, addr, req)
		if err != nil {
			c.log.Debug("hot keys: a node did not answer; left out", "node", id, "err", err)
			return
		}
		l := make([]shards.HotKey, len(rows))
		for i, r := range rows {
			l[i] = shards.HotKey{Key: string(r.Key), Checks: r.Checks, Denied: r.Denied}
		}
		mu.Lock()
		lists = append(lists, l)
		mu.Unlock()
	})
	return shards.MergeHotKeys(count, lists...)
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
