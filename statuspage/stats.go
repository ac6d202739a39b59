package statuspage

import (
	"context"
	"time"
)

// HotKey is one of the keys with the most checks lately.
type HotKey struct {
	Key    string `json:"key"`
	Checks uint64 `json:"checks"`
	Denied uint64 `json:"denied"`
}

// Block is one blocked identifier ("ip=1.2.3.4").
type Block struct {
	Identifier string `json:"identifier"`
	TTLMillis  int64  `json:"ttl_ms"` // time left
	Reason     string `json:"reason"`
	Rule       string `json:"rule"` // the rule that blocked it; "" if blocked by hand
}

// BlockSummary is the blocks at a glance, beside the newest of them
// (Stats.Blocks): a node holding a million blocks answers a summary of
// the same size as one holding ten.
type BlockSummary struct {
	Active  int    `json:"active"`  // blocks live now
	Shown   int    `json:"shown"`   // in Stats.Blocks: the newest, at most Options.BlockCount
	Dropped uint64 `json:"dropped"` // dropped to keep within --max-blocks
	// Hidden: the identifiers and reasons need the admin token, as GET
	// /v1/blocks does, and the request did not give it: Stats.Blocks is
	// empty, the counts are there.
	Hidden bool `json:"hidden"`
}

// Rule is one rule's counts since the node started.
type Rule struct {
	ID     string `json:"id"`
	Shadow bool   `json:"shadow"`
	// Checks: rule checks that evaluated the rule; Denied: those it denied
	// (an enforcing rule); ShadowDenied: those a shadow rule would have
	// denied had it been enforced.
	Checks       uint64 `json:"checks"`
	Denied       uint64 `json:"denied"`
	ShadowDenied uint64 `json:"shadow_denied"`
}

// Cluster is the whole cluster as the answering node gathers it.
type Cluster struct {
	OK     bool              `json:"ok"` // every slot has a leader
	Nodes  []Node            `json:"nodes"`
	Groups []Group           `json:"groups"`
	Errors map[string]string `json:"errors,omitempty"` // nodes that did not answer, by id
}

// Node is one member of a cluster.
type Node struct {
	ID   string `json:"id"` // its --node-id
	RESP string `json:"resp"`
	HTTP string `json:"http,omitempty"`
	// Up: connected and answering the status request.
	Up    bool `json:"up"`
	Self  bool `json:"self"`  // the node that answered
	Leads int  `json:"leads"` // groups it serves
	// DiskLow: its log refuses state changes (--min-free-disk);
	// Stopping: it is handing its leads over.
	DiskLow  bool `json:"disk_low"`
	Stopping bool `json:"stopping"`
}

// Group is one data group.
type Group struct {
	ID     int    `json:"id"`
	Slots  [2]int `json:"slots"`  // first and last, inclusive
	Leader string `json:"leader"` // node id, "" while it has none
	// Log is the state of the group's log: "ok", "no leader", or
	// "refusing writes: disk low on <node>" when its leader's disk is.
	Log      string    `json:"log"`
	Replicas []Replica `json:"replicas"`
}

// Replica is one voter's copy of a group.
type Replica struct {
	Node    string `json:"node"`
	State   string `json:"state"` // Leader, Follower, Candidate
	Ready   bool   `json:"ready"` // serving the group's slots
	Applied uint64 `json:"applied"`
	// Lag is how many log entries it has applied fewer than the
	// replica that applied the most (the leader, normally).
	Lag  uint64 `json:"lag"`
	Keys int    `json:"keys"`
}

// Stats is GET /v1/stats's answer.
type Stats struct {
	Node       string `json:"node"`
	Version    string `json:"version"`
	Mode       string `json:"mode"` // memory, fast or strong
	UptimeS    int64  `json:"uptime_s"`
	TimeUnixMs int64  `json:"time_unix_ms"`
	// Writes is "ok", or why this node refuses state changes.
	Writes  string     `json:"writes"`
	Totals  Totals     `json:"totals"`
	Series  SeriesData `json:"series"`
	Rules   []Rule     `json:"rules"`
	HotKeys []HotKey   `json:"hotkeys"`
	// Blocks are the newest blocks (see BlockSummary), made last first.
	Blocks       []Block      `json:"blocks"`
	BlockSummary BlockSummary `json:"block_summary"`
	Cluster      *Cluster     `json:"cluster"` // null on a single node
}

// Options are what the page reports and where it gets it. Nil hooks
// report nothing: empty lists, a null cluster.
type Options struct {
	Node, Version, Mode string
	// Started is when the node started; Now reads the clock (nil:
	// time.Now).
	Started time.Time
	Now     func() time.Time
	// Series is the per-second history (nil: none).
	Series *Series
	// Totals returns the checks decided so far.
	Totals func() Totals
	// Rules returns every rule's counts, in id order.
	Rules func() []Rule
	// HotKeys returns up to n of the keys with the most checks lately,
	// most first (RL.HOTKEYS).
	HotKeys func(n int) []HotKey
	// Blocks returns up to n of the blocks live now, those made last
	// first, how many blocks are live and how many were dropped for
	// --max-blocks.
	Blocks func(n int) (newest []Block, active int, dropped uint64)
	// Cluster gathers the cluster's state from every member; nil on a
	// single node. It should give up on a member by ctx's deadline.
	Cluster func(ctx context.Context) *Cluster
	// Writes reports why the node refuses state changes (its disk is
	// below --min-free-disk), or nil.
	Writes func() error
	// HotKeyCount is how many hot keys to show (default 10).
	HotKeyCount int
	// BlockCount is how many of the newest blocks to show (default 20).
	BlockCount int
}

// Source assembles Stats from its Options. It is safe for concurrent use.
type Source struct{ o Options }

// NewSource returns a Source for o.
func NewSource(o Options) *Source {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.HotKeyCount <= 0 {
		o.HotKeyCount = 10
	}
	if o.BlockCount <= 0 {
		o.BlockCount = 20
	}
	return &Source{o: o}
}

// Stats returns the figures of this moment; the blocks' identifiers and
// reasons only if blockDetails (the reader may see them: see
// BlockSummary.Hidden). Every list is non-nil, so that the JSON has []
// rather than null.
func (s *Source) Stats(ctx context.Context, blockDetails bool) Stats {
	o := &s.o
	now := o.Now()
	st := Stats{Node: o.Node, Version: o.Version, Mode: o.Mode, TimeUnixMs: now.UnixMilli(), Writes: "ok",
		Series: SeriesData{IntervalMs: 1000, Checks: []uint64{}, Denied: []uint64{}},
		Rules:  []Rule{}, HotKeys: []HotKey{}, Blocks: []Block{}}
	if !o.Started.IsZero() {
		st.UptimeS = int64(now.Sub(o.Started) / time.Second)
	}
	if o.Writes != nil {
		if err := o.Writes(); err != nil {
			st.Writes = err.Error()
		}
	}
	if o.Totals != nil {
		st.Totals = o.Totals()
	}
	if o.Series != nil {
		st.Series = o.Series.Data()
	}
	if o.Rules != nil {
		st.Rules = nonNil(o.Rules())
	}
	if o.HotKeys != nil {
		st.HotKeys = nonNil(o.HotKeys(o.HotKeyCount))
	}
	if o.Blocks != nil {
		st.Blocks, st.BlockSummary = blocksOf(o, blockDetails)
	}
	if o.Cluster != nil {
		if c := o.Cluster(ctx); c != nil {
			c.complete()
			st.Cluster = c
		}
	}
	return st
}

// blocksOf returns the newest blocks and their summary, without their
// details unless blockDetails.
func blocksOf(o *Options, blockDetails bool) ([]Block, BlockSummary) {
	newest, active, dropped := o.Blocks(o.BlockCount)
	sum := BlockSummary{Active: active, Dropped: dropped, Hidden: !blockDetails}
	if !blockDetails {
		return []Block{}, sum
	}
	sum.Shown = len(newest)
	return nonNil(newest), sum
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// complete fills what Stats computes from the members' reports: each
// replica's lag and each group's log state; and makes its lists non-nil.
func (c *Cluster) complete() {
	c.Nodes = nonNil(c.Nodes)
	c.Groups = nonNil(c.Groups)
	diskLow := map[string]bool{}
	for _, n := range c.Nodes {
		diskLow[n.ID] = n.DiskLow
	}
	for i := range c.Groups {
		g := &c.Groups[i]
		g.Replicas = nonNil(g.Replicas)
		var top uint64
		for _, r := range g.Replicas {
			top = max(top, r.Applied)
		}
		for j := range g.Replicas {
			g.Replicas[j].Lag = top - g.Replicas[j].Applied
		}
		switch {
		case g.Leader == "":
			g.Log = "no leader"
		case diskLow[g.Leader]:
			g.Log = "refusing writes: disk low on " + g.Leader
		default:
			g.Log = "ok"
		}
	}
}
