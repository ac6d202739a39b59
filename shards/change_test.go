package shards_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/shards"
)

// manyRules returns n valid rules with ids prefix0..prefix(n-1).
func manyRules(prefix string, n int, limit int64) []rules.Rule {
	out := make([]rules.Rule, n)
	for i := range out {
		out[i] = rule(fmt.Sprintf("%s%d", prefix, i), "fixed", limit, false)
	}
	return out
}

// TestChangeRulesIsOneChange: ChangeRules of 20,000 rules (a --rules file)
// is seen whole or not at all by a reader polling the count, goes into the
// journal as one collection of records, and replays (a restart, a
// follower) as one change of the rule set, which a reader of the replica
// also sees whole (before, the replay stored them one by one: O(n²), and
// a reader saw every count on the way).
// A change with an invalid rule changes nothing.
func TestChangeRulesIsOneChange(t *testing.T) {
	const n = 20000
	s := shards.New(4)
	s.EnableJournal()
	s.SetRule(rule("old", "fixed", 1, false))
	s.SetRule(rule("kept", "fixed", 1, false))
	s.AppendChanges(nil)

	bad := manyRules("x", 3, 5)
	bad[2].Limit = -1
	if _, err := s.ChangeRules(rules.Change{Set: bad, Delete: []string{"old"}}); err == nil || s.RuleCount() != 2 {
		t.Fatalf("a change with an invalid rule: %v, %d rules", err, s.RuleCount())
	}

	watch := watchCounts(s)
	res, err := s.ChangeRules(rules.Change{Set: manyRules("f", n, 5), Delete: []string{"old", "absent"}})
	if err != nil || res != (rules.ChangeResult{Added: n, Deleted: 1}) {
		t.Fatalf("ChangeRules: %+v, %v", res, err)
	}
	for _, c := range watch() {
		if c != 2 && c != n+1 {
			t.Errorf("a reader saw %d rules: a part of the change", c)
		}
	}

	entry, records := s.AppendChanges(nil)
	if records != n+2 {
		t.Fatalf("the journal holds %d records, want %d (the change's, together)", records, n+2)
	}
	replica := shards.New(4)
	replica.SetRule(rule("old", "fixed", 1, false))
	replica.SetRule(rule("kept", "fixed", 1, false))
	watch = watchCounts(replica)
	if _, err := replica.ApplyRecords(entry, time.Now().UnixNano()); err != nil {
		t.Fatal(err)
	}
	for _, c := range watch() {
		if c != 2 && c != n+1 {
			t.Errorf("a reader of the replica saw %d rules: a part of the change", c)
		}
	}
	if got, want := replica.RuleCount(), s.RuleCount(); got != want {
		t.Fatalf("replica has %d rules, want %d", got, want)
	}
	if _, ok := replica.Rule("old"); ok {
		t.Fatal("the replica kept the deleted rule")
	}
	if r, ok := replica.Rule(fmt.Sprintf("f%d", n-1)); !ok || r.Limit != 5 {
		t.Fatalf("the replica's last rule: %+v, %v", r, ok)
	}
}

// watchCounts polls s.RuleCount from a goroutine until the returned
// function is called, which returns the counts seen.
func watchCounts(s *shards.Store) func() []int {
	var stop atomic.Bool
	done := make(chan []int)
	go func() {
		seen := map[int]bool{}
		for !stop.Load() {
			seen[s.RuleCount()] = true
			runtime.Gosched()
		}
		var out []int
		for c := range seen {
			out = append(out, c)
		}
		done <- out
	}()
	return func() []int {
		stop.Store(true)
		return <-done
	}
}

// TestApplyRecordsRuleOrder: rule records replayed in one run keep the
// meaning of their order: the last record of an id wins.
func TestApplyRecordsRuleOrder(t *testing.T) {
	s := shards.New(4)
	s.EnableJournal()
	s.SetRule(rule("a", "fixed", 1, false))
	s.DeleteRule("a")
	s.SetRule(rule("b", "fixed", 1, false))
	s.SetRule(rule("b", "fixed", 2, false))
	s.ChangeRules(rules.Change{Set: []rules.Rule{rule("c", "fixed", 3, false)}, Delete: []string{"b"}})
	s.SetRule(rule("b", "fixed", 4, false))
	entry, _ := s.AppendChanges(nil)
	replica := shards.New(4)
	replica.SetRule(rule("a", "fixed", 9, false))
	if _, err := replica.ApplyRecords(entry, time.Now().UnixNano()); err != nil {
		t.Fatal(err)
	}
	_, a := replica.Rule("a")
	b, _ := replica.Rule("b")
	c, _ := replica.Rule("c")
	if a || b.Limit != 4 || c.Limit != 3 || replica.RuleCount() != 2 {
		t.Fatalf("replica: a %v, b %+v, c %+v, %d rules", a, b, c, replica.RuleCount())
	}
}
