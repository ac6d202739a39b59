package shards_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/shards"
)

func rule(id, algo string, limit int64, shadow bool) rules.Rule {
	return rules.Rule{ID: id, Target: "/api/*", Tier: "*", KeyType: "user", Algo: algo, Limit: limit, Window: "1m", Shadow: shadow}
}

func query(user string, cost int64) *rules.Query {
	q := &rules.Query{}
	q.Reset()
	q.Target, q.Tier, q.Cost = []byte("/api/x"), []byte("free"), cost
	q.AddID([]byte("user"), []byte(user))
	return q
}

func TestRuleTable(t *testing.T) {
	s := shards.New(4)
	if added, err := s.SetRule(rule("a", "fixed", 5, false)); !added || err != nil {
		t.Fatalf("SetRule: %v %v", added, err)
	}
	if err := s.CreateRule(rule("a", "fixed", 9, false)); !errors.Is(err, rules.ErrExists) {
		t.Fatalf("CreateRule of an existing id: %v", err)
	}
	if added, err := s.SetRule(rule("a", "FIXED", 7, false)); added || err != nil {
		t.Fatalf("replace: %v %v", added, err)
	}
	if r, ok := s.Rule("a"); !ok || r.Limit != 7 || r.Algo != "fixed" {
		t.Fatalf("Rule: %+v %v", r, ok)
	}
	bad := rule("b", "fixed", 0, false)
	if _, err := s.SetRule(bad); !errors.Is(err, rules.ErrLimit) || s.RuleCount() != 1 {
		t.Fatalf("invalid rule: %v, count %d", err, s.RuleCount())
	}
	s.CreateRule(rule("0first", "token", 3, false))
	if all := s.Rules(); len(all) != 2 || all[0].ID != "0first" {
		t.Fatalf("Rules: %+v", all)
	}
	if ok, _ := s.DeleteRule("a"); !ok {
		t.Fatal("DeleteRule of an existing rule reported false")
	}
	if ok, _ := s.DeleteRule("a"); ok {
		t.Fatal("DeleteRule of an absent rule reported true")
	}
	if s.RuleCount() != 1 {
		t.Fatal("count after delete")
	}
}

func TestCheckRulesMostRestrictiveAndChangedRules(t *testing.T) {
	s := shards.New(8)
	s.SetRule(rule("wide", "fixed", 10, false))
	s.SetRule(rule("narrow", "sliding", 3, false))
	q := query("u1", 1)
	for i := 1; i <= 3; i++ {
		if err := s.CheckRules(q, now0); err != nil || !q.Allowed {
			t.Fatalf("check %d: %v %v", i, q.Allowed, err)
		}
		r, c := q.Reply()
		if c.Rule.ID != "narrow" || r.Remaining != int64(3-i) {
			t.Fatalf("check %d: reply %+v from %s", i, r, c.Rule.ID)
		}
	}
	s.CheckRules(q, now0)
	if r, c := q.Reply(); q.Allowed || r.Allowed || c.Rule.ID != "narrow" || r.RetryAfter <= 0 {
		t.Fatalf("fourth check: %+v %s", r, c.Rule.ID)
	}
	// Raising the limit keeps the counter: 3 used of 5.
	s.SetRule(rule("narrow", "sliding", 5, false))
	s.CheckRules(q, now0)
	if r, _ := q.Reply(); !r.Allowed || r.Remaining != 1 {
		t.Fatalf("after raising the limit: %+v", r)
	}
	// Changing the algorithm restarts the rule's counters.
	s.SetRule(rule("narrow", "token", 5, false))
	s.CheckRules(q, now0)
	if r, c := q.Reply(); !r.Allowed || c.Rule.ID != "narrow" || r.Remaining != 4 {
		t.Fatalf("after changing the algorithm: %+v %s", r, c.Rule.ID)
	}
	// The counter of each rule is id:value.
	if r := peek(t, s, "wide:u1", engine.Fixed, engine.Params{Limit: 10, Window: 60e9}, now0); r.Remaining != 5 {
		t.Fatalf("wide:u1 remaining %d, want 5", r.Remaining)
	}
}

func TestCheckRulesNoMatch(t *testing.T) {
	s := shards.New(4)
	s.SetRule(rule("a", "fixed", 1, false))
	q := query("u1", 1)
	q.Target = []byte("/other")
	if err := s.CheckRules(q, now0); err != nil || !q.Allowed || q.Best != -1 {
		t.Fatalf("%v %+v", err, q)
	}
	if r, c := q.Reply(); !r.Allowed || r.Limit != -1 || c != nil {
		t.Fatalf("reply %+v", r)
	}
}

// TestCheckRulesConcurrentNoChargeOnDeny: 32 clients race on two rules
// whose limits differ; exactly the smaller limit is admitted, and the wider
// rule's counter holds exactly the admissions (denied checks charged
// nothing), for every algorithm.
func TestCheckRulesConcurrentNoChargeOnDeny(t *testing.T) {
	for _, algo := range []string{"fixed", "sliding", "log", "token", "leaky", "gcra"} {
		t.Run(algo, func(t *testing.T) {
			s := shards.New(64)
			s.SetRule(rule("wide", algo, 1000, false))
			s.SetRule(rule("narrow", "fixed", 100, false))
			s.SetRule(rule("shadow", algo, 10, true))
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for c := 0; c < 32; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					q := query("u1", 1)
					for i := 0; i < 20; i++ {
						if err := s.CheckRules(q, now0+int64(i)); err != nil {
							t.Error(err)
							return
						}
						if q.Allowed {
							admitted.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			if admitted.Load() != 100 {
				t.Fatalf("admitted %d of 640, want exactly 100", admitted.Load())
			}
			p, _ := rules.Compile(rule("wide", algo, 1000, false), 0)
			if r := peek(t, s, "wide:u1", p.Algo, p.Params, now0+20); r.Remaining != 900 {
				t.Fatalf("wide:u1 remaining %d, want 900: denied checks were charged", r.Remaining)
			}
		})
	}
}
