package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/httpapi"
	"github.com/rlserver/rlserver/internal/testserver"
	"github.com/rlserver/rlserver/statuspage"
)

// statusOf is the status page of n, fed by its server's counters.
func statusOf(n *testserver.Node) httpapi.StatusPage {
	return statuspage.NewSource(statuspage.Options{Node: "t1", Mode: "memory",
		Totals: func() statuspage.Totals {
			t := n.Server.Totals()
			return statuspage.Totals{Checks: t.Checks, Denied: t.Denied}
		}})
}

// TestStatusPageRoutes: GET /status and its files are served with their
// types to anyone, even on a node with a password; an unknown file is a
// JSON 404; /status/ goes to /status; GET /v1/stats needs the password
// (401 naming what it refused) and then reports the checks made over
// RESP.
func TestStatusPageRoutes(t *testing.T) {
	n, _ := start(t, testserver.Options{RequirePass: "pw", Status: statusOf})
	for path, want := range map[string][2]string{
		"/status":           {"text/html; charset=utf-8", `<svg id="chart-checks"`},
		"/status/app.js":    {"text/javascript; charset=utf-8", `fetch("v1/stats"`},
		"/status/style.css": {"text/css; charset=utf-8", "#chart-denied"},
	} {
		r := do(t, "GET", n.URL+path, "", "")
		if r.status != 200 || r.header.Get("Content-Type") != want[0] || !strings.Contains(r.body, want[1]) {
			t.Errorf("GET %s: %d %q, want 200 %q with %q", path, r.status, r.header.Get("Content-Type"), want[0], want[1])
		}
	}
	expect(t, "GET /status/nope", do(t, "GET", n.URL+"/status/nope", "", ""), 404, "no such file")
	req, _ := http.NewRequest("GET", n.URL+"/status/", nil)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 301 || resp.Header.Get("Location") != "/status" {
		t.Errorf("GET /status/: %d to %q, want 301 to /status", resp.StatusCode, resp.Header.Get("Location"))
	}

	expect(t, "GET /v1/stats without the password", do(t, "GET", n.URL+"/v1/stats", "", ""), 401,
		"reading the status figures needs the password")
	expect(t, "GET /v1/stats with a wrong one", do(t, "GET", n.URL+"/v1/stats", "", "nope"), 401)

	rdb := redis.NewClient(&redis.Options{Addr: n.Addr, Password: "pw"})
	defer rdb.Close()
	for i := 0; i < 3; i++ {
		if err := rdb.Do(context.Background(), "RL.CHECK", "k", "fixed", 2, 60).Err(); err != nil {
			t.Fatal(err)
		}
	}
	r := do(t, "GET", n.URL+"/v1/stats", "", "pw")
	expect(t, "GET /v1/stats", r, 200, `"node":"t1"`, `"totals":{"checks":3,"denied":1}`, `"cluster":null`)
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("GET /v1/stats: Cache-Control %q, want no-store", cc)
	}
}

// TestNoStatusPageWithoutIt: a handler without a status page answers
// 404 for its routes.
func TestNoStatusPageWithoutIt(t *testing.T) {
	n, _ := start(t, testserver.Options{})
	expect(t, "GET /v1/stats", do(t, "GET", n.URL+"/v1/stats", "", ""), 404, "no such endpoint")
	expect(t, "GET /status", do(t, "GET", n.URL+"/status", "", ""), 404, "no such endpoint")
}

// TestStatusPageFirstPaintAndRoot: GET / leads to the status page; the
// page comes with the figures of its first paint (as JSON for its script,
// and as text in its header) for a reader who may see them, and without
// them for one who may not (who is asked for the token).
func TestStatusPageFirstPaintAndRoot(t *testing.T) {
	n, _ := start(t, testserver.Options{Status: statusOf})
	req, _ := http.NewRequest("GET", n.URL+"/", nil)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/status" {
		t.Errorf("GET /: %d to %q, want 302 to /status", resp.StatusCode, resp.Header.Get("Location"))
	}
	expect(t, "GET /nope", do(t, "GET", n.URL+"/nope", "", ""), 404, "no such endpoint")

	rdb := redis.NewClient(&redis.Options{Addr: n.Addr})
	defer rdb.Close()
	for i := 0; i < 1234; i++ {
		rdb.Do(context.Background(), "RL.CHECK", "k", "fixed", 1000, 60)
	}
	r := do(t, "GET", n.URL+"/status", "", "")
	for _, want := range []string{`<script id="initial-stats" type="application/json">{"node":"t1"`,
		`"totals":{"checks":1234,"denied":234}`, `<span id="node">t1</span>`, `<dd id="total-checks">1,234</dd>`,
		`<dd id="total-denied">234</dd>`, `<dd id="mode">memory</dd>`} {
		if r.status != 200 || !strings.Contains(r.body, want) {
			t.Errorf("GET /status: %d, no %s in:\n%s", r.status, want, r.body)
		}
	}
	if strings.Contains(r.body, "waiting for /v1/stats") {
		t.Errorf("GET /status still waits for /v1/stats:\n%s", r.body)
	}

	locked, _ := start(t, testserver.Options{RequirePass: "pw", Status: statusOf})
	r = do(t, "GET", locked.URL+"/status", "", "")
	for _, want := range []string{`<script id="initial-stats" type="application/json"></script>`, `<span id="node">…</span>`} {
		if r.status != 200 || !strings.Contains(r.body, want) {
			t.Errorf("GET /status, no password: %d, no %s in:\n%s", r.status, want, r.body)
		}
	}
}
