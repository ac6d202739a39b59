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
