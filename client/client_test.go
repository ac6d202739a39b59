package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/client"
	"github.com/rlserver/rlserver/internal/testserver"
)

var ctx = context.Background()

// 5.3 s into a 10 s window.
var t0 = time.Unix(1_700_000_005, 300_000_000)

func start(t *testing.T) (*testserver.Node, *client.Client) {
	t.Helper()
	n := testserver.Start(t, testserver.Options{Clock: testserver.NewClock(t0).Now})
	c := client.Dial(n.Addr)
	t.Cleanup(func() { c.Close() })
	return n, c
}

func TestCheck(t *testing.T) {
	_, c := start(t)
	l := client.Limit{Algo: "fixed", Limit: 2, Window: 10 * time.Second}
	for i, want := range []client.Result{
		{Allowed: true, Limit: 2, Remaining: 1, ResetAfter: 4700 * time.Millisecond},
		{Allowed: true, Limit: 2, Remaining: 0, ResetAfter: 4700 * time.Millisecond},
		{Allowed: false, Limit: 2, Remaining: 0, RetryAfter: 4700 * time.Millisecond, ResetAfter: 4700 * time.Millisecond},
	} {
		want.Policy, want.Quota, want.Window = "fixed-2-per-10s", 2, 10*time.Second
		got, err := c.Check(ctx, "k", l, 1)
		if err != nil || got != want {
			t.Fatalf("check %d: %+v, %v; want %+v", i, got, err, want)
		}
	}
	got, err := c.Check(ctx, "big", client.Limit{Algo: "token", Limit: 5, Window: 500 * time.Millisecond, Burst: 8}, 9)
	if err != nil || got.Allowed || got.RetryAfter != client.Never || got.Limit != 8 {
		t.Fatalf("cost above the burst: %+v, %v", got, err)
	}
	if _, err := c.Check(ctx, "k", client.Limit{Algo: "fixed", Limit: 2, Window: 1500 * time.Microsecond}, 1); !errors.Is(err, client.ErrWindow) {
		t.Fatalf("sub-millisecond window: %v", err)
	}
	if _, err := c.Check(ctx, "k", client.Limit{Algo: "token", Limit: 2, Window: time.Second}, 1); err == nil ||
		!strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("wrong type: %v", err)
	}
}

func TestCheckRules(t *testing.T) {
	n, c := start(t)
	if _, err := n.Store.SetRule(rule("per-user", "user", 1)); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{"user": "u1", "ip": "10.0.0.1"}
	got, err := c.CheckRules(ctx, "/api/x", "free", ids, 1)
	if err != nil || !got.Allowed || got.RuleID != "per-user" || got.Remaining != 0 {
		t.Fatalf("first: %+v, %v", got, err)
	}
	// The rule's quota and window, for RateLimit-Policy, come from RL.RULE.GET.
	if got.Policy != "per-user" || got.Quota != 1 || got.Window != 10*time.Second {
		t.Fatalf("first: policy %q, quota %d, window %v", got.Policy, got.Quota, got.Window)
	}
	// A changed rule is seen by the next check whose limit differs.
	if _, err := n.Store.SetRule(rule("per-user", "user", 5)); err != nil {
		t.Fatal(err)
	}
	if got, err := c.CheckRules(ctx, "/api/x", "free", map[string]string{"user": "u2"}, 1); err != nil || got.Quota != 5 {
		t.Fatalf("after the change: %+v, %v", got, err)
	}
	if _, err := n.Store.SetRule(rule("per-user", "user", 1)); err != nil {
		t.Fatal(err)
	}
	got, err = c.CheckRules(ctx, "/api/x", "free", ids, 1)
	if err != nil || got.Allowed || got.RuleID != "per-user" || got.RetryAfter != 4700*time.Millisecond {
		t.Fatalf("second: %+v, %v", got, err)
	}
	got, err = c.CheckRules(ctx, "/other", "free", ids, 1)
	if err != nil || !got.Allowed || got.RuleID != "" || got.Limit != -1 {
		t.Fatalf("no rule: %+v, %v", got, err)
	}
	if _, err := c.CheckRules(ctx, "/api/x", "free", nil, 1); err == nil {
		t.Fatal("no identifiers: no error")
	}
}

func TestCheckBatch(t *testing.T) {
	_, c := start(t)
	var reqs []client.Request
	for i := 0; i < 5; i++ {
		reqs = append(reqs, client.Request{Key: "b", Limit: client.Limit{Algo: "sliding", Limit: 3, Window: time.Minute}, Cost: 1})
	}
	res, err := c.CheckBatch(ctx, reqs)
	if err != nil || len(res) != 5 {
		t.Fatalf("%v %v", res, err)
	}
	for i, r := range res {
		if r.Allowed != (i < 3) {
			t.Errorf("check %d: %+v", i, r)
		}
	}
	reqs[2] = client.Request{Key: "b", Limit: client.Limit{Algo: "gcra", Limit: 3, Window: time.Minute}, Cost: 1}
	res, err = c.CheckBatch(ctx, reqs)
	if err == nil || !strings.Contains(err.Error(), "check 2") || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("batch with a bad check: %v", err)
	}
	if res[0].Limit != 3 || res[4].Limit != 3 {
		t.Fatalf("the other results were not filled: %+v", res)
	}
}
