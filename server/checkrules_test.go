package server_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/internal/testserver"
)

var ctx = context.Background()

// dial returns a go-redis client of node n speaking protocol (2 or 3).
func dial(t testing.TB, n *testserver.Node, protocol int) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr, Protocol: protocol})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// step is one command and its expected reply: a value, or an error that
// starts with wantErr.
type step struct {
	args    []any
	want    any
	wantErr string
}

func run(t *testing.T, rdb *redis.Client, steps []step) {
	t.Helper()
	for _, s := range steps {
		got, err := rdb.Do(ctx, s.args...).Result()
		if s.wantErr != "" {
			if err == nil || !strings.HasPrefix(err.Error(), s.wantErr) {
				t.Errorf("%v: got %#v, %v; want error %q", s.args, got, err, s.wantErr)
			}
			continue
		}
		if err == redis.Nil {
			got, err = nil, nil
		}
		if err != nil || !equal(got, s.want) {
			t.Errorf("%v: got %#v, %v; want %#v", s.args, got, err, s.want)
		}
	}
}

func equal(a, b any) bool {
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok != bok {
		return false
	}
	if !aok {
		return a == b
	}
	if len(as) != len(bs) {
		return false
	}
	for i := range as {
		if !equal(as[i], bs[i]) {
			return false
		}
	}
	return true
}

const (
	ruleA = `{"id":"per-user","target":"/api/*","tier":"free","key_type":"user","algo":"fixed","limit":3,"window":"10s"}`
	ruleB = `{"target":"*","tier":"*","key_type":"ip","algo":"token","limit":10,"window":"10s"}`
	ruleS = `{"id":"trial","target":"/api/*","tier":"*","key_type":"user","algo":"fixed","limit":1,"window":"10s","shadow":true}`
)

// A fixed clock 5 s into a 10 s window.
func clock() *testserver.Clock { return testserver.NewClock(time.Unix(1_700_000_005, 0)) }

func TestRuleCommands(t *testing.T) {
	n := testserver.Start(t, testserver.Options{Clock: clock().Now})
	rdb := dial(t, n, 2)
	stored := `{"id":"per-ip","target":"*","tier":"*","key_type":"ip","algo":"token","limit":10,"window":"10s","burst":0,"shadow":false}`
	run(t, rdb, []step{
		{args: []any{"RL.RULE.LIST"}, want: []any{}},
		{args: []any{"RL.RULE.SET", "per-ip", ruleB}, want: int64(1)},
		{args: []any{"rl.rule.set", "per-ip", ruleB}, want: int64(0)},
		{args: []any{"RL.RULE.GET", "per-ip"}, want: stored},
		{args: []any{"RL.RULE.GET", "nope"}, want: nil},
		{args: []any{"RL.RULE.SET", "per-user", ruleA}, want: int64(1)},
		{args: []any{"RL.RULE.LIST"}, want: []any{stored, `{"id":"per-user","target":"/api/*","tier":"free","key_type":"user","algo":"fixed","limit":3,"window":"10s","burst":0,"shadow":false}`}},
		{args: []any{"RL.RULE.SET", "other", ruleA}, wantErr: `ERR invalid rule: id "per-user" in the JSON does not match the argument "other"`},
		{args: []any{"RL.RULE.SET", "x", `{"limit":"3"}`}, wantErr: `ERR invalid rule: limit: has the wrong type (want an integer, got string)`},
		{args: []any{"RL.RULE.SET", "x", `{"limits":3}`}, wantErr: `ERR invalid rule: limits: is not a rule field`},
		{args: []any{"RL.RULE.SET", "x", `{"target":"*","tier":"*","key_type":"ip","algo":"fixed","limit":0,"window":"1s"}`},
			wantErr: `ERR invalid rule "x": limit: must be a positive integer`},
		{args: []any{"RL.RULE.SET", "x", `{"target":"*","tier":"*","key_type":"ip","algo":"log","limit":20000,"window":"1s"}`},
			wantErr: `ERR invalid rule "x": limit: must be a positive integer no larger than 2^48 (got 20000, above the maximum for 'log' of 10000`},
		{args: []any{"RL.RULE.SET", "x", `{"id":`}, wantErr: `ERR invalid rule: malformed JSON`},
		{args: []any{"RL.RULE.SET", "x"}, wantErr: `ERR wrong number of arguments for 'rl.rule.set' command; usage: RL.RULE.SET id json`},
		{args: []any{"RL.RULE.DEL", "per-ip"}, want: int64(1)},
		{args: []any{"RL.RULE.DEL", "per-ip"}, want: int64(0)},
		{args: []any{"RL.RULE.GET", "per-ip"}, want: nil},
	})
	if got := n.Metric(t, "rlserver_rules", nil); got != 1 {
		t.Errorf("rlserver_rules = %v, want 1", got)
	}
}

func TestRuleWritesNeedAdmin(t *testing.T) {
	n := testserver.Start(t, testserver.Options{AdminToken: "s3cret"})
	rdb := dial(t, n, 3)
	run(t, rdb, []step{
		{args: []any{"RL.RULE.SET", "per-ip", ruleB}, wantErr: "NOPERM"},
		{args: []any{"RL.RULE.DEL", "per-ip"}, wantErr: "NOPERM"},
		{args: []any{"RL.RULE.LIST"}, want: []any{}},
		{args: []any{"AUTH", "admin", "s3cret"}, want: "OK"},
		{args: []any{"RL.RULE.SET", "per-ip", ruleB}, want: int64(1)},
		{args: []any{"RL.RULE.DEL", "per-ip"}, want: int64(1)},
	})
}

func TestCheckRulesReplies(t *testing.T) {
	n := testserver.Start(t, testserver.Options{Clock: clock().Now})
	rdb := dial(t, n, 2)
	run(t, rdb, []step{
		{args: []any{"RL.RULE.SET", "per-user", ruleA}, want: int64(1)},
		{args: []any{"RL.RULE.SET", "per-ip", ruleB}, want: int64(1)},
		// Nothing matches: allowed, limit -1, remaining -1, nil rule.
		{args: []any{"RL.CHECKRULES", "/api/x", "free", "apikey=k1"}, want: []any{int64(1), int64(-1), int64(-1), int64(0), int64(0), nil}},
		// per-user (3 per fixed 10 s window, 5 s left) is the most restrictive.
		{args: []any{"RL.CHECKRULES", "/api/x", "free", "user=u1", "ip=1.2.3.4"}, want: []any{int64(1), int64(3), int64(2), int64(0), int64(5000), "per-user"}},
		{args: []any{"rl.checkrules", "/api/x", "free", "user=u1", "ip=1.2.3.4", "COST", "2"}, want: []any{int64(1), int64(3), int64(0), int64(0), int64(5000), "per-user"}},
		// Denied by per-user: retry when its window ends, and per-ip is not charged.
		{args: []any{"RL.CHECKRULES", "/api/x", "free", "user=u1", "ip=1.2.3.4"}, want: []any{int64(0), int64(3), int64(0), int64(5000), int64(5000), "per-user"}},
		{args: []any{"RL.PEEK", "per-ip:1.2.3.4", "token", "10", "10s"}, want: []any{int64(1), int64(10), int64(7), int64(0), int64(3000)}},
		// Another tier: only per-ip applies.
		{args: []any{"RL.CHECKRULES", "/api/x", "pro", "user=u1", "ip=1.2.3.4"}, want: []any{int64(1), int64(10), int64(6), int64(0), int64(4000), "per-ip"}},
		// A cost above every capacity can never pass.
		{args: []any{"RL.CHECKRULES", "/other", "pro", "ip=9.9.9.9", "COST", "11"}, want: []any{int64(0), int64(10), int64(10), int64(-1), int64(0), "per-ip"}},
		{args: []any{"RL.CHECKRULES", "/api/x", "free"}, wantErr: "ERR wrong number of arguments for 'rl.checkrules' command; usage: RL.CHECKRULES target tier identifier [identifier ...] [COST cost]"},
		{args: []any{"RL.CHECKRULES", "/api/x", "free", "COST", "1"}, wantErr: "ERR syntax error: want at least one type=value identifier"},
		{args: []any{"RL.CHECKRULES", "/api/x", "free", "user"}, wantErr: "ERR syntax error: 'user' is not type=value"},
		{args: []any{"RL.CHECKRULES", "/api/x", "free", "user="}, wantErr: "ERR syntax error: 'user=' is not type=value"},
		{args: []any{"RL.CHECKRULES", "/api/x", "free", "user=a", "user=b"}, wantErr: "ERR syntax error: identifier type 'user' is given twice"},
		{args: []any{"RL.CHECKRULES", "/api/x", "free", "user=a", "COST", "-1"}, wantErr: "ERR invalid 'COST' '-1'"},
		{args: []any{"RL.CHECKRULES", "/api/x", "free", "user=a", "COST"}, wantErr: "ERR syntax error: 'COST' is not type=value"},
		{args: []any{"RL.CHECKRULES", "/api/x", "free", "user=" + strings.Repeat("x", 1000)}, wantErr: "ERR identifier 'user' has a value of 1000 bytes"},
	})
}

func TestCheckRulesRESP3NilRule(t *testing.T) {
	n := testserver.Start(t, testserver.Options{})
	got, err := dial(t, n, 3).Do(ctx, "RL.CHECKRULES", "/", "free", "user=u").Result()
	if err != nil || !equal(got, []any{int64(1), int64(-1), int64(-1), int64(0), int64(0), nil}) {
		t.Fatalf("got %#v, %v", got, err)
	}
}

func TestCheckRulesShadowCountsButNeverDenies(t *testing.T) {
	n := testserver.Start(t, testserver.Options{Clock: clock().Now})
	rdb := dial(t, n, 2)
	run(t, rdb, []step{
		{args: []any{"RL.RULE.SET", "trial", ruleS}, want: int64(1)},
		// Only a shadow rule matches: it is reported, as allowed.
		{args: []any{"RL.CHECKRULES", "/api/x", "free", "user=u1"}, want: []any{int64(1), int64(1), int64(0), int64(0), int64(5000), "trial"}},
		{args: []any{"RL.CHECKRULES", "/api/x", "free", "user=u1"}, want: []any{int64(1), int64(1), int64(0), int64(0), int64(5000), "trial"}},
		{args: []any{"RL.RULE.SET", "per-user", ruleA}, want: int64(1)},
		// An enforcing rule matches too: it is the one reported.
		{args: []any{"RL.CHECKRULES", "/api/x", "free", "user=u1"}, want: []any{int64(1), int64(3), int64(2), int64(0), int64(5000), "per-user"}},
	})
	if got := n.Metric(t, "rlserver_rule_shadow_denials_total", map[string]string{"rule": "trial"}); got != 2 {
		t.Errorf("shadow denials = %v, want 2", got)
	}
	if got := n.Metric(t, "rlserver_rule_checks_total", map[string]string{"result": "allowed"}); got != 3 {
		t.Errorf("allowed rule checks = %v, want 3", got)
	}
	// Latency is sampled: one command in 16 per connection.
	one := redis.NewClient(&redis.Options{Addr: n.Addr, PoolSize: 1})
	defer one.Close()
	before := n.Metric(t, "rlserver_check_duration_seconds", map[string]string{"command": "rl.checkrules"})
	for i := 0; i < 32; i++ {
		if err := one.Do(ctx, "RL.CHECKRULES", "/api/x", "free", "user=u2").Err(); err != nil {
			t.Fatal(err)
		}
	}
	after := n.Metric(t, "rlserver_check_duration_seconds", map[string]string{"command": "rl.checkrules"})
	if after-before != 2 {
		t.Errorf("rl.checkrules latency samples grew by %v over 32 checks, want 2", after-before)
	}
}

// TestCheckRulesNoChargeOnDenyConcurrent: 32 clients on their own
// connections race through two rules; exactly the narrower limit is
// admitted, and the wider rule's counter was charged for exactly those
// admissions.
func TestCheckRulesNoChargeOnDenyConcurrent(t *testing.T) {
	n := testserver.Start(t, testserver.Options{Clock: clock().Now})
	admin := dial(t, n, 2)
	run(t, admin, []step{
		{args: []any{"RL.RULE.SET", "wide", `{"target":"*","tier":"*","key_type":"user","algo":"sliding","limit":1000,"window":"1m"}`}, want: int64(1)},
		{args: []any{"RL.RULE.SET", "narrow", `{"target":"/api/*","tier":"*","key_type":"ip","algo":"log","limit":150,"window":"1m"}`}, want: int64(1)},
	})
	const clients, perClient = 32, 20
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rdb := redis.NewClient(&redis.Options{Addr: n.Addr, PoolSize: 1})
			defer rdb.Close()
			for j := 0; j < perClient; j++ {
				v, err := rdb.Do(ctx, "RL.CHECKRULES", "/api/x", "free", "user=u1", "ip=10.0.0.1").Slice()
				if err != nil {
					t.Error(err)
					return
				}
				if v[0].(int64) == 1 {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if got := admitted.Load(); got != 150 {
		t.Fatalf("admitted %d of %d, want exactly 150", got, clients*perClient)
	}
	peek, err := admin.Do(ctx, "RL.PEEK", "wide:u1", "sliding", "1000", "1m").Slice()
	if err != nil || peek[2].(int64) != 850 {
		t.Fatalf("wide:u1 after 150 admissions: %v, %v; want remaining 850", peek, err)
	}
	if got := n.Metric(t, "rlserver_rule_checks_total", map[string]string{"result": "denied"}); got != clients*perClient-150 {
		t.Fatalf("denied rule checks = %v", got)
	}
}
