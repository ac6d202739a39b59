package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testserver"
	"github.com/rlserver/rlserver/rules"
)

// startGateway runs the gateway in-process with args and returns its URL.
func startGateway(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-listen", "127.0.0.1:0"}, args...), io.Discard, func(a net.Addr) { addr <- a })
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case a := <-addr:
		return "http://" + a.String()
	case err := <-done:
		t.Fatalf("gateway: %v", err)
	}
	return ""
}

func startBackend(t *testing.T) string {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "backend saw "+r.URL.Path)
	}))
	t.Cleanup(s.Close)
	return s.URL
}

func setRules(t *testing.T, n *testserver.Node) {
	for _, r := range []rules.Rule{
		{ID: "free-users", Target: "/users/*", Tier: "free", KeyType: "user", Algo: "fixed", Limit: 3, Window: "10s"},
		{ID: "pro-users", Target: "/users/*", Tier: "pro", KeyType: "user", Algo: "token", Limit: 100, Window: "10s"},
	} {
		if _, err := n.Store.SetRule(r); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGatewayEndToEnd: requests through the gateway reach the backend
// until the caller's rule denies; then 429 with the headers.
func TestGatewayEndToEnd(t *testing.T) {
	n := testserver.Start(t, testserver.Options{Clock: testserver.NewClock(time.Unix(1_700_000_005, 300e6)).Now})
	setRules(t, n)
	gw := startGateway(t, "-backend", startBackend(t), "-rlserver", n.Addr, "-fail", "closed",
		"-api-tiers", "acme-key=pro")
	for i := 1; i <= 3; i++ {
		resp, body := testserver.Get(t, gw+"/users/42", "X-User-ID", "alice")
		if resp.StatusCode != 200 || body != "backend saw /users/42" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
		if got := resp.Header.Get("X-RateLimit-Remaining"); got != strconv.Itoa(3-i) {
			t.Errorf("request %d: X-RateLimit-Remaining %q", i, got)
		}
	}
	before := time.Now()
	resp, body := testserver.Get(t, gw+"/users/42", "X-User-ID", "alice")
	if resp.StatusCode != 429 || !strings.Contains(body, `"rule":"free-users"`) {
		t.Fatalf("fourth: %d %q", resp.StatusCode, body)
	}
	for h, want := range map[string]string{"Retry-After": "5", "X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "0",
		"RateLimit": `"free-users";r=0;t=5`, "RateLimit-Policy": `"free-users";q=3;w=10`} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("429 %s: %q, want %q", h, got, want)
		}
	}
	// X-RateLimit-Reset is on the gateway's clock: 4.7 s from the check, rounded up.
	reset, _ := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64)
	if reset < before.Add(4700*time.Millisecond).Unix() || reset > time.Now().Add(5700*time.Millisecond).Unix() {
		t.Errorf("429 X-RateLimit-Reset %d, checked at %d", reset, before.Unix())
	}
	// The API key maps alice to the pro tier, which has room.
	if resp, _ := testserver.Get(t, gw+"/users/42", "X-User-ID", "alice", "X-API-Key", "acme-key"); resp.StatusCode != 200 ||
		resp.Header.Get("X-RateLimit-Limit") != "100" {
		t.Fatalf("pro tier: %d %v", resp.StatusCode, resp.Header)
	}
	// No rule for this path: straight through.
	if resp, body := testserver.Get(t, gw+"/health", "X-User-ID", "alice"); resp.StatusCode != 200 || body != "backend saw /health" {
		t.Fatalf("unlimited path: %d %q", resp.StatusCode, body)
	}
}

// TestGatewayFailModes: with rlserver stopped, a fail-open gateway lets
// requests through and a fail-closed one answers 503, both within their
// timeout.
func TestGatewayFailModes(t *testing.T) {
	n := testserver.Start(t, testserver.Options{})
	setRules(t, n)
	backend := startBackend(t)
	open := startGateway(t, "-backend", backend, "-rlserver", n.Addr, "-fail", "open", "-timeout", "200ms")
	closed := startGateway(t, "-backend", backend, "-rlserver", n.Addr, "-fail", "closed", "-timeout", "200ms")
	for _, gw := range []string{open, closed} {
		if resp, _ := testserver.Get(t, gw+"/users/1", "X-User-ID", "bob"); resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Limit") != "3" {
			t.Fatalf("before the stop: %d %v", resp.StatusCode, resp.Header)
		}
	}
	n.Stop()
	for _, tt := range []struct {
		gw     string
		status int
		body   string
	}{{open, 200, "backend saw /users/1"}, {closed, 503, `{"error":"rate limiter unavailable"}`}} {
		for i := 0; i < 3; i++ {
			begin := time.Now()
			resp, body := testserver.Get(t, tt.gw+"/users/1", "X-User-ID", "bob")
			if took := time.Since(begin); took > 200*time.Millisecond+2*time.Second { // not go-redis's 3 s, nor for ever
				t.Errorf("%s: answered after %v, timeout 200ms", tt.gw, took)
			}
			if resp.StatusCode != tt.status || strings.TrimSpace(body) != tt.body {
				t.Errorf("%s: %d %q, want %d %q", tt.gw, resp.StatusCode, body, tt.status, tt.body)
			}
		}
	}
}

// TestGatewayGrace: with -fail grace, a gateway whose rlserver stops
// admits each user its share of free-users (3 / 3 instances = 1, refilled
// 1 per 10 s) for -grace-for, then fails closed (-grace-then closed). Each
// request waits for -timeout first (go-redis dials again and again), so
// -grace-for leaves room for the six requests of the grace.
func TestGatewayGrace(t *testing.T) {
	n := testserver.Start(t, testserver.Options{})
	setRules(t, n)
	gw := startGateway(t, "-backend", startBackend(t), "-rlserver", n.Addr, "-fail", "grace", "-timeout", "200ms",
		"-grace-for", "4s", "-grace-then", "closed", "-grace-instances", "3")
	if resp, _ := testserver.Get(t, gw+"/users/1", "X-User-ID", "bob"); resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Limit") != "3" {
		t.Fatalf("before the stop: %d %v", resp.StatusCode, resp.Header)
	}
	n.Stop()
	stopped := time.Now()
	for _, user := range []string{"bob", "carol"} {
		for i, want := range []int{200, 429, 429} {
			resp, body := testserver.Get(t, gw+"/users/1", "X-User-ID", user)
			if resp.StatusCode != want {
				t.Fatalf("%s's request %d in grace: %d %q, want %d", user, i+1, resp.StatusCode, body, want)
			}
			if want == 429 && (resp.Header.Get("RateLimit-Policy") != `"free-users";q=1;w=10` || resp.Header.Get("Retry-After") == "") {
				t.Errorf("%s's request %d in grace: %v", user, i+1, resp.Header)
			}
		}
	}
	if time.Since(stopped) > 3900*time.Millisecond {
		t.Skip("too slow a machine to see the six requests within -grace-for 4s")
	}
	time.Sleep(time.Until(stopped.Add(4100 * time.Millisecond)))
	if resp, body := testserver.Get(t, gw+"/users/1", "X-User-ID", "dave"); resp.StatusCode != 503 {
		t.Fatalf("after -grace-for: %d %q, want 503", resp.StatusCode, body)
	}
}

func TestGatewayFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-fail", "open"}, "-backend is required"},
		{[]string{"-backend", "http://x"}, `-fail must be "open", "closed" or "grace"`},
		{[]string{"-backend", "http://x", "-fail", "sometimes"}, `-fail must be "open", "closed" or "grace"`},
		{[]string{"-backend", "http://x", "-fail", "grace"}, `-fail grace needs -grace-then "open" or "closed"`},
		{[]string{"-backend", "http://x", "-fail", "grace", "-grace-then", "open", "-grace-instances", "0"}, "-grace-instances must be at least 1"},
		{[]string{"-backend", "nourl", "-fail", "open"}, "want a URL"},
		{[]string{"-backend", "http://x", "-fail", "open", "-api-tiers", "k"}, `"k" is not key=tier`},
		{[]string{"-backend", "http://x", "-fail", "open", "-trusted-proxies", "10.0.0.0/99"}, "-trusted-proxies"},
	} {
		err := run(context.Background(), tt.args, io.Discard, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want %q", tt.args, err, tt.want)
		}
	}
}

// rawGet sends "GET target" to the gateway at gw exactly as written (no
// client-side cleaning), and returns the status and body.
func rawGet(t *testing.T, gw, target string, header ...string) (int, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(gw, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET " + target + " HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n"
	for i := 0; i+1 < len(header); i += 2 {
		req += header[i] + ": " + header[i+1] + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestGatewayPathSpellings (issue 27): the middleware checks the path the
// client wrote, decoded once and cleaned, so once alice's limit on
// /users/* is used up no spelling of /users/42 reaches the backend, and a
// path that backends may read in two ways is refused with 400.
func TestGatewayPathSpellings(t *testing.T) {
	n := testserver.Start(t, testserver.Options{})
	setRules(t, n)
	gw := startGateway(t, "-backend", startBackend(t), "-rlserver", n.Addr, "-fail", "closed")
	for i := 1; i <= 3; i++ {
		if status, body := rawGet(t, gw, "/users/42", "X-User-ID", "alice"); status != 200 {
			t.Fatalf("request %d: %d %q", i, status, body)
		}
	}
	through := 0
	spellings := []string{"//users/42", "/./users/42", "/x/../users/42", "/%2e%2e/users/42", "/users/42/.", "/users//42",
		"/%75sers/42", "/users/./42", "///users/42", "/users/x/../42"}
	for _, s := range spellings {
		status, body := rawGet(t, gw, s, "X-User-ID", "alice")
		if strings.HasPrefix(body, "backend saw") {
			through++
		}
		if status != 429 {
			t.Errorf("%s over alice's limit: %d %q, want 429", s, status, body)
		}
	}
	t.Logf("spellings of /users/42 over alice's limit: %d of %d reached the backend", through, len(spellings))
	for _, s := range []string{"/users%2f42", "/users/%252e%252e/42", "/users/4%002", "/users/42%5c"} {
		status, body := rawGet(t, gw, s, "X-User-ID", "bob")
		if status != 400 || !strings.Contains(body, `"error"`) {
			t.Errorf("%s: %d %q, want 400 with a JSON error", s, status, body)
		}
	}
}
