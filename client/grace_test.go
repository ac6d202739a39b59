package client_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/client"
	"github.com/rlserver/rlserver/internal/logbuf"
	"github.com/rlserver/rlserver/internal/redistest"
	"github.com/rlserver/rlserver/internal/testserver"
	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/rules"
)

// fakeClock is the middleware's Clock in the grace tests.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// decisions counts OnGrace's calls by kind.
type decisions struct {
	mu                        sync.Mutex
	localAllowed, localDenied int
	then                      int
}

func (d *decisions) add(_ *http.Request, g client.GraceDecision) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case !g.Local:
		d.then++
	case g.Allowed:
		d.localAllowed++
	default:
		d.localDenied++
	}
}

func (d *decisions) get() (int, int, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.localAllowed, d.localDenied, d.then
}

var graceRules = []rules.Rule{
	{ID: "per-user", Target: "/api/*", Tier: "*", KeyType: "user", Algo: "fixed", Limit: 10, Window: "10s"},
	{ID: "per-ip", Target: "/api/*", Tier: "*", KeyType: "ip", Algo: "sliding", Limit: 100, Window: "10s"},
	{ID: "trial", Target: "*", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 1, Window: "1h", Shadow: true},
}

// startRules starts rlserver on addr with graceRules, on a fake clock
// stopped at t0. Per-user's window is 10 s, which the grace needs, and
// fixed windows are aligned to the Unix epoch: on the wall clock, one
// could end between the ten checks that spend alice's allowance and the
// eleventh that TestGrace wants denied.
func startRules(t *testing.T, addr string) *testserver.Node {
	n := testserver.Start(t, testserver.Options{Addr: addr, Clock: testserver.NewClock(t0).Now})
	for _, r := range graceRules {
		if _, err := n.Store.SetRule(r); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// TestGrace: rlserver stops mid-traffic. For GraceFor, each user is
// admitted exactly its share of per-user's limit (10 × 1/2 = 5) at once,
// and a share of the limit per window after that; then GraceThen decides;
// when rlserver is back, it decides again. Every decision without it is
// counted, and each episode is logged when it begins, when its grace runs
// out and when it ends.
func TestGrace(t *testing.T) {
	for _, then := range []client.FailMode{client.FailClosed, client.FailOpen} {
		port, err := redistest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		n := startRules(t, addr)
		// One try per check, one dial per try: a refused check fails at once.
		c := client.Dial(addr, func(o *redis.Options) { o.MaxRetries, o.DialerRetries = -1, 1 })
		defer c.Close()
		clk := &fakeClock{now: t0}
		var logs logbuf.Buffer
		var d decisions
		s := serve(t, client.MiddlewareConfig{Checker: c, FailMode: client.FailGrace, GraceThen: then,
			GraceInstances: 2, Timeout: time.Second, Clock: clk.Now, OnGrace: d.add,
			Logger: slog.New(slog.NewTextHandler(&logs, nil)), Identity: client.Identity{UserHeader: "X-User-ID"}})
		get := func(user string) *http.Response {
			resp, _ := testserver.Get(t, s.URL+"/api/items", "X-User-ID", user)
			return resp
		}
		for i := 0; i < 3; i++ {
			if resp := get("alice"); resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Limit") != "10" {
				t.Fatalf("rlserver up: %d %v", resp.StatusCode, resp.Header)
			}
		}
		n.Stop()

		// Grace: the local bucket of each user holds 5 and refills 5 per 10 s.
		for _, user := range []string{"alice", "bob"} {
			for i := 1; i <= 7; i++ {
				resp := get(user)
				want := 200
				if i > 5 {
					want = 429
				}
				if resp.StatusCode != want {
					t.Fatalf("then %v: %s's request %d in grace: %d, want %d", then, user, i, resp.StatusCode, want)
				}
				if got := resp.Header.Get("RateLimit-Policy"); got != `"per-user";q=5;w=10` {
					t.Errorf("%s's request %d in grace: RateLimit-Policy %q", user, i, got)
				}
				if want == 429 && resp.Header.Get("Retry-After") != "2" { // a token every 2 s
					t.Errorf("%s's request %d in grace: Retry-After %q", user, i, resp.Header.Get("Retry-After"))
				}
			}
		}
		clk.Advance(10 * time.Second) // one window: 5 more for alice, and no more
		admitted := 0
		for i := 0; i < 8; i++ {
			if get("alice").StatusCode == 200 {
				admitted++
			}
		}
		if admitted != 5 {
			t.Errorf("then %v: a window later alice got %d more, want 5", then, admitted)
		}
		if a, dn, th := d.get(); a != 15 || dn != 4+3 || th != 0 {
			t.Errorf("then %v: OnGrace counted %d admitted, %d denied, %d by GraceThen; want 15, 7, 0", then, a, dn, th)
		}

		// GraceFor (30 s) after the first unanswered check: GraceThen.
		clk.Advance(20 * time.Second)
		for i := 0; i < 3; i++ {
			resp := get("carol")
			if want := map[client.FailMode]int{client.FailClosed: 503, client.FailOpen: 200}[then]; resp.StatusCode != want {
				t.Fatalf("then %v: after GraceFor: %d, want %d", then, resp.StatusCode, want)
			}
		}
		if _, _, th := d.get(); th != 3 {
			t.Errorf("then %v: %d decisions by GraceThen counted, want 3", then, th)
		}

		// rlserver is back (empty): it decides again, with its own limit.
		n2 := startRules(t, addr)
		// go-redis's pool, refused, dials again once a second: poll.
		if err := testutil.Poll(10*time.Second, func() error {
			if resp := get("alice"); resp.Header.Get("X-RateLimit-Limit") != "10" {
				return fmt.Errorf("%d %v", resp.StatusCode, resp.Header)
			}
			return nil
		}); err != nil {
			t.Fatalf("then %v: rlserver is back but does not decide within 10 s (last: %v)", then, err)
		}
		a, dn, th := d.get()
		for i := 0; i < 9; i++ {
			get("alice")
		}
		if resp := get("alice"); resp.StatusCode != 429 || resp.Header.Get("X-RateLimit-Limit") != "10" {
			t.Errorf("then %v: rlserver's 11th: %d %v", then, resp.StatusCode, resp.Header)
		}
		if a2, dn2, th2 := d.get(); a2 != a || dn2 != dn || th2 != th {
			t.Errorf("then %v: decisions without rlserver counted while it answers", then)
		}
		n2.Stop()

		for _, line := range []string{"rlserver does not answer; deciding locally (grace mode)",
			"the grace mode has run out", "rlserver answers again; the grace episode is over"} {
			if got := strings.Count(logs.String(), line); got != 1 {
				t.Errorf("then %v: %q logged %d times, want once:\n%s", then, line, got, logs.String())
			}
		}
		if !strings.Contains(logs.String(), "admitted_locally=15 denied_locally=7") {
			t.Errorf("then %v: the episode's end does not give its counts:\n%s", then, logs.String())
		}
	}
}

// TestGraceWithoutRules: a process that never learned the rules (rlserver
// down from the start) decides by GraceThen at once.
func TestGraceWithoutRules(t *testing.T) {
	c := client.Dial(blackHole(t))
	defer c.Close()
	var d decisions
	s := serve(t, client.MiddlewareConfig{Checker: c, FailMode: client.FailGrace, GraceThen: client.FailClosed,
		Timeout: 50 * time.Millisecond, OnGrace: d.add, Logger: slog.New(slog.DiscardHandler)})
	if resp, _ := testserver.Get(t, s.URL+"/api/x"); resp.StatusCode != 503 {
		t.Fatalf("%d", resp.StatusCode)
	}
	if _, _, th := d.get(); th != 1 {
		t.Fatalf("%d decisions by GraceThen", th)
	}
}

// TestGraceDenialChargesNothing: in grace as in rlserver, a request one
// rule denies charges no other rule.
func TestGraceDenialChargesNothing(t *testing.T) {
	n := testserver.Start(t, testserver.Options{})
	for _, r := range []rules.Rule{
		{ID: "narrow", Target: "/api/*", Tier: "*", KeyType: "user", Algo: "fixed", Limit: 2, Window: "1h"},
		{ID: "wide", Target: "/api/*", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 4, Window: "1h"},
	} {
		n.Store.SetRule(r)
	}
	c := client.Dial(n.Addr)
	defer c.Close()
	clk := &fakeClock{now: t0}
	s := serve(t, client.MiddlewareConfig{Checker: c, FailMode: client.FailGrace, GraceThen: client.FailClosed,
		Clock: clk.Now, Logger: slog.New(slog.DiscardHandler), Identity: client.Identity{UserHeader: "X-User-ID"}})
	n.Stop()
	var got []int
	for _, user := range []string{"a", "a", "a", "a", "b", "b", "c"} {
		resp, _ := testserver.Get(t, s.URL+"/api/x", "X-User-ID", user)
		got = append(got, resp.StatusCode)
	}
	// a: 2 admitted, 2 denied by narrow (wide keeps 2); b: 2; c: wide is spent.
	if want := []int{200, 200, 429, 429, 200, 200, 429}; !slices.Equal(got, want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
}

func TestGraceConfigErrors(t *testing.T) {
	_, c := start(t)
	for _, tt := range []struct {
		cfg  client.MiddlewareConfig
		want string
	}{
		{client.MiddlewareConfig{Checker: c, FailMode: client.FailGrace}, "FailGrace needs MiddlewareConfig.GraceThen"},
		{client.MiddlewareConfig{Checker: c, FailMode: client.FailGrace, GraceThen: client.FailGrace}, "GraceThen"},
		{client.MiddlewareConfig{Checker: c, FailMode: client.FailGrace, GraceThen: client.FailOpen, GraceShare: 1.5}, "GraceShare 1.5"},
		{client.MiddlewareConfig{Checker: c, FailMode: client.FailGrace, GraceThen: client.FailOpen, GraceInstances: -1}, "GraceInstances -1"},
		{client.MiddlewareConfig{Checker: onlyChecks{c}, FailMode: client.FailGrace, GraceThen: client.FailOpen}, "needs MiddlewareConfig.GraceRules"},
	} {
		if _, err := client.Middleware(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.cfg, err, tt.want)
		}
	}
}

// onlyChecks is a RuleChecker that cannot list rules.
type onlyChecks struct{ client.RuleChecker }
