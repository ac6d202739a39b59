package statuspage

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestStatsWithoutHooks: a node with no hooks answers empty lists, not
// nulls, and a null cluster.
func TestStatsWithoutHooks(t *testing.T) {
	src := NewSource(Options{Node: "n1", Version: "v9", Mode: "memory", Started: t0, Now: func() time.Time { return t0.Add(90 * time.Second) }})
	b, err := json.Marshal(src.Stats(context.Background(), true))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"node":"n1"`, `"version":"v9"`, `"mode":"memory"`, `"uptime_s":90`, `"writes":"ok"`,
		`"totals":{"checks":0,"denied":0}`, `"series":{"start_unix_ms":0,"interval_ms":1000,"checks":[],"denied":[]}`,
		`"rules":[]`, `"hotkeys":[]`, `"blocks":[]`, `"block_summary":{"active":0,"shown":0,"dropped":0,"hidden":false}`, `"cluster":null`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("no %s in %s", want, b)
		}
	}
}

// TestStatsFromHooks: every hook's figures reach the JSON under the
// documented names; the hot keys hook is asked for HotKeyCount keys; a
// refusing disk shows in writes; the cluster's replicas get their lag
// behind the most applied one and each group the state of its log.
func TestStatsFromHooks(t *testing.T) {
	series := NewSeries(0)
	series.Record(t0, Totals{})
	series.Record(t0.Add(time.Second), Totals{Checks: 5, Denied: 1})
	var askedKeys, askedBlocks int
	src := NewSource(Options{
		Node: "n2", Mode: "strong", Now: func() time.Time { return t0 }, Series: series, HotKeyCount: 3,
		Totals: func() Totals { return Totals{Checks: 5, Denied: 1} },
		Rules:  func() []Rule { return []Rule{{ID: "try", Shadow: true, Checks: 9, ShadowDenied: 4}} },
		HotKeys: func(n int) []HotKey {
			askedKeys = n
			return []HotKey{{Key: "user:1", Checks: 700, Denied: 300}}
		},
		Blocks: func(n int) ([]Block, int, uint64) {
			askedBlocks = n
			return []Block{{Identifier: "ip=1.2.3.4", TTLMillis: 9000, Reason: "abuse", Rule: "login"}}, 1500, 7
		},
		Writes: func() error { return errors.New("disk below --min-free-disk") },
		Cluster: func(ctx context.Context) *Cluster {
			return &Cluster{OK: false, Nodes: []Node{{ID: "n1", DiskLow: true}, {ID: "n2", Up: true, Self: true}}, Groups: []Group{
				{ID: 1, Leader: "n1", Replicas: []Replica{{Node: "n1", Applied: 50}, {Node: "n2", Applied: 42}}},
				{ID: 2, Leader: "n2", Replicas: []Replica{{Node: "n2", Applied: 7}, {Node: "n1", Applied: 7}}},
				{ID: 3},
			}}
		},
	})
	b, err := json.Marshal(src.Stats(context.Background(), true))
	if err != nil {
		t.Fatal(err)
	}
	if askedKeys != 3 || askedBlocks != 20 {
		t.Errorf("HotKeys asked for %d keys, want 3; Blocks for %d, want 20", askedKeys, askedBlocks)
	}
	for _, want := range []string{`"mode":"strong"`, `"writes":"disk below --min-free-disk"`,
		`"totals":{"checks":5,"denied":1}`, `"checks":[5],"denied":[1]`,
		`"rules":[{"id":"try","shadow":true,"checks":9,"denied":0,"shadow_denied":4}]`,
		`"hotkeys":[{"key":"user:1","checks":700,"denied":300}]`,
		`"blocks":[{"identifier":"ip=1.2.3.4","ttl_ms":9000,"reason":"abuse","rule":"login"}]`,
		`"block_summary":{"active":1500,"shown":1,"dropped":7,"hidden":false}`,
		`"ok":false`, `{"id":"n1","resp":"","up":false,"self":false,"leads":0,"disk_low":true,"stopping":false}`,
		`"leader":"n1","log":"refusing writes: disk low on n1","replicas":[{"node":"n1","state":"","ready":false,"applied":50,"lag":0,"keys":0},{"node":"n2","state":"","ready":false,"applied":42,"lag":8,"keys":0}]`,
		`"leader":"n2","log":"ok"`, `"leader":"","log":"no leader","replicas":[]`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("no %s in\n%s", want, b)
		}
	}
}

// TestStatsHidesBlockDetails: without block details (the reader has the
// password, not the admin token) the blocks' counts are there and no
// identifier or reason is.
func TestStatsHidesBlockDetails(t *testing.T) {
	src := NewSource(Options{Node: "n1", Blocks: func(n int) ([]Block, int, uint64) {
		return []Block{{Identifier: "ip=1.2.3.4", TTLMillis: 9000, Reason: "abuse", Rule: "login"}}, 1, 0
	}})
	b, err := json.Marshal(src.Stats(context.Background(), false))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"blocks":[],"block_summary":{"active":1,"shown":0,"dropped":0,"hidden":true}`) ||
		strings.Contains(string(b), "1.2.3.4") || strings.Contains(string(b), "abuse") {
		t.Fatalf("stats without block details: %s", b)
	}
}
