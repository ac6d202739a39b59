package cluster

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/rules"
)

// TestChangeRulesIsOneMetaEntry: a change of 5,000 rules (a --rules
// file's load) made on a node that does not lead the meta group is one
// meta entry: a reader on every node sees the rules before or after it,
// never a part; its counts are returned; a change with one invalid rule
// changes nothing.
func TestChangeRulesIsOneMetaEntry(t *testing.T) {
	const n = 5000
	tc := startCluster(t, 3, 2, Fast)
	leader := tc.metaLeader()
	asker := (leader + 1) % 3
	keep := rules.Rule{ID: "keep", Target: "/k", Tier: "*", KeyType: "user", Algo: "fixed", Limit: 5, Window: "1m"}
	gone := keep
	gone.ID = "gone"
	if _, err := tc.nodes[asker].ChangeRules(rules.Change{Set: []rules.Rule{keep, gone}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range tc.nodes {
		testutil.WaitFor(t, 5*time.Second, "the first change everywhere", func() bool { return c.RuleCount() == 2 })
	}
	set := make([]rules.Rule, n)
	for i := range set {
		set[i] = keep
		set[i].ID, set[i].Target = fmt.Sprintf("f%d", i), fmt.Sprintf("/p%d", i)
	}
	bad := append([]rules.Rule(nil), set[:3]...)
	bad[2].Limit = -1
	if _, err := tc.nodes[asker].ChangeRules(rules.Change{Set: bad}); err == nil {
		t.Fatal("a change with an invalid rule was made")
	}

	var stop atomic.Bool
	seen := make([]map[int]bool, len(tc.nodes))
	done := make(chan struct{})
	for i, c := range tc.nodes {
		seen[i] = map[int]bool{}
		go func() {
			defer func() { done <- struct{}{} }()
			for !stop.Load() {
				seen[i][c.RuleCount()] = true
				time.Sleep(time.Millisecond) // polls, and leaves the rafts their CPU
			}
		}()
	}
	res, err := tc.nodes[asker].ChangeRules(rules.Change{Set: set, Delete: []string{"gone"}})
	for _, c := range tc.nodes {
		testutil.WaitFor(t, 10*time.Second, "the change everywhere", func() bool { return c.RuleCount() == n+1 })
	}
	stop.Store(true)
	for range tc.nodes {
		<-done
	}
	if err != nil || res != (rules.ChangeResult{Added: n, Deleted: 1}) {
		t.Fatalf("ChangeRules: %+v, %v", res, err)
	}
	for i := range tc.nodes {
		for count := range seen[i] {
			if count != 2 && count != n+1 {
				t.Errorf("node %d: a reader saw %d rules, a part of the change", i, count)
			}
		}
	}
	if _, ok := tc.nodes[leader].Rule("gone"); ok {
		t.Fatal("the deleted rule is still there")
	}
}
