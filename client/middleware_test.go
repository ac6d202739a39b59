package client_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/client"
	"github.com/rlserver/rlserver/internal/testserver"
	"github.com/rlserver/rlserver/rules"
)

func rule(id, keyType string, limit int64) rules.Rule {
	return rules.Rule{ID: id, Target: "/api/*", Tier: "*", KeyType: keyType, Algo: "fixed", Limit: limit, Window: "10s"}
}

var backend = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "backend") })

// serve runs backend behind the middleware of cfg.
func serve(t *testing.T, cfg client.MiddlewareConfig) *httptest.Server {
	t.Helper()
	mw, err := client.Middleware(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(mw(backend))
	t.Cleanup(s.Close)
	return s
}

func TestMiddlewareLimits(t *testing.T) {
	n, c := start(t)
	n.Store.SetRule(rule("per-user", "user", 2))
	s := serve(t, client.MiddlewareConfig{Checker: c, FailMode: client.FailClosed,
		Identity: client.Identity{UserHeader: "X-User-ID"}})
	for i := 1; i <= 2; i++ {
		resp, body := testserver.Get(t, s.URL+"/api/items", "X-User-ID", "alice")
		if resp.StatusCode != 200 || body != "backend" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
		if got := resp.Header.Get("X-RateLimit-Remaining"); got != strconv.Itoa(2-i) {
			t.Errorf("request %d: X-RateLimit-Remaining %q", i, got)
		}
		if got := resp.Header.Get("RateLimit"); got != `"per-user";r=`+strconv.Itoa(2-i)+";t=5" {
			t.Errorf("request %d: RateLimit %q", i, got)
		}
		if got := resp.Header.Get("RateLimit-Policy"); got != `"per-user";q=2;w=10` {
			t.Errorf("request %d: RateLimit-Policy %q", i, got)
		}
	}
	resp, body := testserver.Get(t, s.URL+"/api/items", "X-User-ID", "alice")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "5" || resp.Header.Get("X-RateLimit-Limit") != "2" {
		t.Fatalf("third: %d %v", resp.StatusCode, resp.Header)
	}
	if want := `{"error":"rate limit exceeded","rule":"per-user","limit":2,"remaining":0,"retry_after_ms":4700,"reset_after_ms":4700}`; strings.TrimSpace(body) != want {
		t.Fatalf("429 body %s", body)
	}
	if resp, _ := testserver.Get(t, s.URL+"/api/items", "X-User-ID", "bob"); resp.StatusCode != 200 {
		t.Fatalf("another user: %d", resp.StatusCode)
	}
	resp, body = testserver.Get(t, s.URL+"/elsewhere", "X-User-ID", "alice")
	if resp.StatusCode != 200 || body != "backend" || resp.Header.Get("X-RateLimit-Limit") != "" {
		t.Fatalf("no matching rule: %d %q %v", resp.StatusCode, body, resp.Header)
	}
}

// TestMiddlewareSendsTheAPIHeaders: for the same rule and state, the
// middleware sends the headers POST /v1/checkrules sends (but
// X-RateLimit-Reset, which each computes on its own clock).
func TestMiddlewareSendsTheAPIHeaders(t *testing.T) {
	n, c := start(t)
	n.Store.SetRule(rules.Rule{ID: "bucket", Target: "/api/*", Tier: "*", KeyType: "user", Algo: "token",
		Limit: 2, Window: "10s", Burst: 3})
	s := serve(t, client.MiddlewareConfig{Checker: c, FailMode: client.FailClosed,
		Identity: client.Identity{UserHeader: "X-User-ID"}})
	names := []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "RateLimit", "RateLimit-Policy", "Retry-After"}
	for i := 0; i < 4; i++ {
		mw, _ := testserver.Get(t, s.URL+"/api/items", "X-User-ID", "alice")
		api, err := http.Post(n.URL+"/v1/checkrules", "application/json",
			strings.NewReader(`{"target":"/api/items","tier":"default","ids":{"user":"bob"}}`))
		if err != nil {
			t.Fatal(err)
		}
		api.Body.Close()
		if mw.StatusCode != api.StatusCode {
			t.Fatalf("request %d: middleware %d, API %d", i, mw.StatusCode, api.StatusCode)
		}
		for _, h := range names {
			if mw.Header.Get(h) != api.Header.Get(h) {
				t.Errorf("request %d: %s: middleware %q, API %q", i, h, mw.Header.Get(h), api.Header.Get(h))
			}
		}
		if mw.Header.Get("RateLimit-Policy") != `"bucket";q=2;w=10;rlserver-burst=3` {
			t.Errorf("request %d: RateLimit-Policy %q", i, mw.Header.Get("RateLimit-Policy"))
		}
	}
}

// TestMiddlewareLeavesShadowRulesOut: a request that only a shadow rule
// matches passes with no rate-limit headers, as POST /v1/forward-auth
// answers it: the shadow rule limits nothing, so no header advertises it.
func TestMiddlewareLeavesShadowRulesOut(t *testing.T) {
	n, c := start(t)
	shadow := rule("new-global-cap", "user", 999)
	shadow.Shadow = true
	n.Store.SetRule(shadow)
	s := serve(t, client.MiddlewareConfig{Checker: c, FailMode: client.FailClosed,
		Identity: client.Identity{UserHeader: "X-User-ID"}})
	for i := 0; i < 2; i++ {
		resp, body := testserver.Get(t, s.URL+"/api/items", "X-User-ID", "alice")
		if resp.StatusCode != 200 || body != "backend" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
		for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "RateLimit", "RateLimit-Policy"} {
			if v := resp.Header.Get(h); v != "" {
				t.Errorf("request %d: %s: %q, want none for a shadow rule", i, h, v)
			}
		}
	}
}

func TestMiddlewareHashesAPIKeys(t *testing.T) {
	n, c := start(t)
	n.Store.SetRule(rule("per-key", "apikey", 5))
	s := serve(t, client.MiddlewareConfig{Checker: c, FailMode: client.FailOpen,
		Identity: client.Identity{APIKeyHeader: "X-API-Key"}})
	if resp, _ := testserver.Get(t, s.URL+"/api/x", "X-API-Key", "s3cret"); resp.Header.Get("X-RateLimit-Remaining") != "4" {
		t.Fatalf("%v", resp.Header)
	}
	if n.Store.Len() != 1 {
		t.Fatalf("%d keys", n.Store.Len())
	}
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr})
	defer rdb.Close()
	if v, _ := rdb.Do(ctx, "RL.RESET", "per-key:s3cret").Int(); v != 0 {
		t.Fatal("the raw API key is a counter key")
	}
}

func TestMiddlewareConfigErrors(t *testing.T) {
	_, c := start(t)
	if _, err := client.Middleware(client.MiddlewareConfig{Checker: c}); err != client.ErrFailMode {
		t.Fatalf("no FailMode: %v", err)
	}
	if _, err := client.Middleware(client.MiddlewareConfig{FailMode: client.FailOpen}); err == nil {
		t.Fatal("no Checker: no error")
	}
}

// blackHole accepts connections and never answers.
func blackHole(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { nc.Close() })
		}
	}()
	return ln.Addr().String()
}

// TestFailOpenAndClosed: with rlserver stopped (connections refused) or
// hung (accepting, never answering), each mode answers as configured
// within its timeout.
func TestFailOpenAndClosed(t *testing.T) {
	const timeout = 150 * time.Millisecond
	for _, mode := range []client.FailMode{client.FailOpen, client.FailClosed} {
		for _, hang := range []bool{false, true} {
			n, _ := start(t)
			n.Store.SetRule(rule("per-ip", "ip", 100))
			addr := n.Addr
			if hang {
				addr = blackHole(t)
			}
			c := client.Dial(addr)
			defer c.Close()
			var failures atomic.Int64
			s := serve(t, client.MiddlewareConfig{Checker: c, FailMode: mode, Timeout: timeout,
				OnError: func(*http.Request, error) { failures.Add(1) }})
			if !hang {
				if resp, _ := testserver.Get(t, s.URL+"/api/x"); resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Limit") != "100" {
					t.Fatalf("before the stop: %d %v", resp.StatusCode, resp.Header)
				}
				n.Stop()
			}
			for i := 0; i < 3; i++ {
				begin := time.Now()
				resp, body := testserver.Get(t, s.URL+"/api/x")
				// A middleware that waited past its timeout would wait for
				// go-redis's own (3 s) or, hung, for ever.
				if took := time.Since(begin); took > timeout+2*time.Second {
					t.Errorf("mode %d, hung %v: answered after %v, timeout %v", mode, hang, took, timeout)
				}
				switch mode {
				case client.FailOpen:
					if resp.StatusCode != 200 || body != "backend" {
						t.Errorf("fail-open, hung %v: %d %q", hang, resp.StatusCode, body)
					}
				case client.FailClosed:
					if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(body, "rate limiter unavailable") {
						t.Errorf("fail-closed, hung %v: %d %q", hang, resp.StatusCode, body)
					}
				}
			}
			if got := failures.Load(); got != 3 {
				t.Errorf("mode %d, hung %v: OnError called %d times, want 3", mode, hang, got)
			}
		}
	}
}
