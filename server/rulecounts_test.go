package server

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/shards"
)

// TestTotalsAndRuleCounts: RL.CHECK, CL.THROTTLE and RL.CHECKRULES from a
// go-redis client over TCP, and a rule check counted from outside RESP,
// add up in Totals; each rule's evaluations and denials, and a shadow
// rule's would-be denials, in RuleCounts; a deleted rule's counts go.
func TestTotalsAndRuleCounts(t *testing.T) {
	store := shards.New(16)
	for _, r := range []rules.Rule{
		{ID: "login", Target: "/login", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 3, Window: "1m"},
		{ID: "try", Target: "*", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 1, Window: "1m", Shadow: true},
		{ID: "idle", Target: "/never", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 1, Window: "1m"},
	} {
		if _, err := store.SetRule(r); err != nil {
			t.Fatal(err)
		}
	}
	s, addr := startServer(t, Config{Limiter: store, Clock: fakeClock()})
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx := context.Background()
	for i := 0; i < 5; i++ { // 2 allowed, 3 denied
		rdb.Do(ctx, "RL.CHECK", "k", "fixed", 2, 60)
	}
	for i := 0; i < 2; i++ { // 1 allowed, 1 denied
		rdb.Do(ctx, "CL.THROTTLE", "c", 0, 1, 60)
	}
	for i := 0; i < 5; i++ { // login: 3 allowed, 2 denied; try would deny 4
		if err := rdb.Do(ctx, "RL.CHECKRULES", "/login", "free", "ip=1.2.3.4").Err(); err != nil {
			t.Fatal(err)
		}
	}
	q := &rules.Query{Target: []byte("/login"), Tier: []byte("free"), Cost: 1}
	q.AddID([]byte("ip"), []byte("5.6.7.8"))
	if err := store.CheckRules(q, t0); err != nil {
		t.Fatal(err)
	}
	s.CountRuleCheck(q) // allowed by login; try, fresh, allows too

	if got, want := s.Totals(), (Totals{Checks: 5 + 2 + 5 + 1, Denied: 3 + 1 + 2}); got != want {
		t.Errorf("Totals() = %+v, want %+v", got, want)
	}
	want := []RuleCount{
		{ID: "idle"},
		{ID: "login", Checks: 6, Denied: 2},
		{ID: "try", Shadow: true, Checks: 6, ShadowDenied: 4},
	}
	assertRuleCounts(t, s.RuleCounts(), want)

	if _, err := store.DeleteRule("login"); err != nil {
		t.Fatal(err)
	}
	assertRuleCounts(t, s.RuleCounts(), []RuleCount{want[0], want[2]})
	store.SetRule(rules.Rule{ID: "login", Target: "/login", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 3, Window: "1m"})
	assertRuleCounts(t, s.RuleCounts(), []RuleCount{want[0], {ID: "login"}, want[2]})
}

func assertRuleCounts(t *testing.T, got, want []RuleCount) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("RuleCounts() = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("RuleCounts()[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestRuleCountsOfAReplacedRule: a rule replaced many times (a compiled
// rule each time) keeps one id's counts, and the map of compiled rules
// stays bounded.
func TestRuleCountsOfAReplacedRule(t *testing.T) {
	var r ruleCounters
	for i := 0; i < 1000; i++ {
		c, err := rules.Compile(rules.Rule{ID: "x", Target: "*", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: int64(i + 1), Window: "1m"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		r.count(uint32(i), c, &engine.Result{Allowed: i%2 == 0})
		r.count(uint32(i), c, &engine.Result{Allowed: true})
	}
	if checks, denied, shadow := r.find("x").sums(); checks != 2000 || denied != 500 || shadow != 0 {
		t.Errorf("counts %d %d %d, want 2000 500 0", checks, denied, shadow)
	}
	if n := len(*r.fast.Load()); n > 18 {
		t.Errorf("%d compiled rules remembered for one id", n)
	}
}

// BenchmarkCountRules: what the per-rule counts add to one rule check
// that evaluated three rules (one in shadow mode, denying).
func BenchmarkCountRules(b *testing.B) {
	var r ruleCounters
	q := &rules.Query{}
	for _, rule := range []rules.Rule{
		{ID: "per-user", Target: "*", Tier: "*", KeyType: "user", Algo: "fixed", Limit: 10, Window: "1m"},
		{ID: "per-ip", Target: "*", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 10, Window: "1m"},
		{ID: "trial", Target: "*", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 10, Window: "1m", Shadow: true},
	} {
		c, err := rules.Compile(rule, 0)
		if err != nil {
			b.Fatal(err)
		}
		q.Evals = append(q.Evals, rules.Eval{Rule: c})
	}
	q.Evals[0].Result.Allowed, q.Evals[1].Result.Allowed = true, true
	b.ReportAllocs()
	i := uint32(0)
	for b.Loop() {
		i++
		r.countRules(i, q)
	}
}
