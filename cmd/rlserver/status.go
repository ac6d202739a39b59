package main

import (
	"context"
	"time"

	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/httpapi"
	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/server"
	"github.com/rlserver/rlserver/shards"
	"github.com/rlserver/rlserver/statuspage"
)

// statusHooks are the status page's sources that other parts of the node
// provide; nil ones show as "none". Hot keys and blocks plug in here.
type statusHooks struct {
	HotKeys func(n int) []statuspage.HotKey
	Blocks  func(n int) ([]statuspage.Block, int, uint64)
}

// startStatus starts sampling srv's check counters once a second until ctx
// ends and returns the status page of this node (GET /status, /v1/stats).
func startStatus(ctx context.Context, cfg Config, st *state, srv *server.Server, hooks statusHooks) *statuspage.Source {
	series := statuspage.NewSeries(statuspage.DefaultSeconds)
	totals := func() statuspage.Totals {
		t := srv.Totals()
		return statuspage.Totals{Checks: t.Checks, Denied: t.Denied}
	}
	series.Record(time.Now(), totals())
	tick := time.NewTicker(time.Second)
	go func() {
		defer tick.Stop()
		series.Sample(ctx, tick.C, totals)
	}()
	o := statuspage.Options{
		Node: nodeName(cfg, st), Version: version, Mode: cfg.Consistency, Started: time.Now(),
		Series: series, Totals: totals, Rules: ruleCounts(srv),
		HotKeys: hooks.HotKeys, Blocks: hooks.Blocks,
	}
	if cfg.DataDir == "" {
		o.Mode = "memory"
	}
	if st.disk != nil {
		o.Writes = st.disk.Space.Err
	}
	if st.cl != nil {
		o.Cluster = func(ctx context.Context) *statuspage.Cluster { return clusterStatus(st.cl.Report(ctx, 0)) }
	}
	return statuspage.NewSource(o)
}

// statusHotKeys is the status page's hot-keys hook over lim's (nil if lim
// keeps none): a cluster node's answer sums every node's, waiting at most
// the second the cluster gives a node.
func statusHotKeys(lim any, now func() int64) func(n int) []statuspage.HotKey {
	hs, ok := lim.(httpapi.HotKeySource)
	if !ok {
		return nil
	}
	return func(n int) []statuspage.HotKey {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		all := hs.HotKeys(ctx, n, now())
		out := make([]statuspage.HotKey, len(all))
		for i, k := range all {
			out[i] = statuspage.HotKey{Key: k.Key, Checks: k.Checks, Denied: k.Denied}
		}
		return out
	}
}

// blockLister is what the status page reads of a limiter's blocks.
type blockLister interface {
	NewestBlocks(n int, now int64) ([]rules.Block, int)
	BlockStats(now int64) shards.BlockStats
}

// statusBlocks is the status page's blocks hook over lim's blocks (nil if
// lim keeps none): the newest live ones, made last first, and the counts.
func statusBlocks(lim any, now func() int64) func(n int) ([]statuspage.Block, int, uint64) {
	bs, ok := lim.(blockLister)
	if !ok {
		return nil
	}
	return func(n int) ([]statuspage.Block, int, uint64) {
		at := now()
		newest, active := bs.NewestBlocks(n, at)
		out := make([]statuspage.Block, len(newest))
		for i, b := range newest {
			out[i] = statuspage.Block{Identifier: b.Identifier, TTLMillis: b.TTL.Milliseconds(), Reason: b.Reason, Rule: b.Rule}
		}
		return out, active, bs.BlockStats(at).Dropped
	}
}

// nodeName is the node's name on its status page: --node-id, the one its
// data directory holds, else its RESP address.
func nodeName(cfg Config, st *state) string {
	switch {
	case cfg.NodeID != "":
		return cfg.NodeID
	case st.disk != nil && st.disk.NodeID != "":
		return st.disk.NodeID
	}
	return cfg.Listen
}

func ruleCounts(srv *server.Server) func() []statuspage.Rule {
	return func() []statuspage.Rule {
		counts := srv.RuleCounts()
		out := make([]statuspage.Rule, len(counts))
		for i, c := range counts {
			out[i] = statuspage.Rule{ID: c.ID, Shadow: c.Shadow, Checks: c.Checks, Denied: c.Denied, ShadowDenied: c.ShadowDenied}
		}
		return out
	}
}

// clusterStatus is the cluster's report in the status page's terms: nodes
// by their --node-id, up when connected and answering.
func clusterStatus(r cluster.Report) *statuspage.Cluster {
	c := &statuspage.Cluster{OK: r.OK, Errors: r.Errors}
	for _, n := range r.Nodes {
		_, failed := r.Errors[n.Name]
		c.Nodes = append(c.Nodes, statuspage.Node{ID: n.Name, RESP: n.RESP, HTTP: n.HTTP, Up: n.Connected && !failed,
			Self: n.Name == r.Node, Leads: n.Leads, DiskLow: n.DiskLow, Stopping: n.Stopping})
	}
	for _, g := range r.Groups {
		sg := statuspage.Group{ID: g.ID, Slots: g.Slots, Leader: g.Leader}
		for _, rep := range g.Replicas {
			sg.Replicas = append(sg.Replicas, statuspage.Replica{Node: rep.Node, State: rep.State, Ready: rep.Ready,
				Applied: rep.Applied, Keys: rep.Keys})
		}
		c.Groups = append(c.Groups, sg)
	}
	return c
}
