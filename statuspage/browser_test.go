package statuspage_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/httpapi"
	"github.com/rlserver/rlserver/internal/headless"
	"github.com/rlserver/rlserver/internal/testserver"
	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/statuspage"
)

// TestPageInBrowser loads GET /status of a real server (RESP and HTTP on
// TCP, a real store) in headless chromium after a load of checks and
// rule checks, and reads what the page drew from the DOM: the plot of
// checks with a point per sampled second, each rule's denials and a
// shadow rule's would-be denials, and the hot keys and blocks of fake
// hooks — a key that looks like HTML shown as text. Skipped without
// chromium.
func TestPageInBrowser(t *testing.T) {
	headless.Browser(t)
	series := statuspage.NewSeries(0)
	n := testserver.Start(t, testserver.Options{Status: func(n *testserver.Node) httpapi.StatusPage {
		return statuspage.NewSource(statuspage.Options{Node: "t1", Version: "test", Mode: "memory", Series: series,
			Totals: func() statuspage.Totals { return totals(n) },
			Rules: func() []statuspage.Rule {
				var out []statuspage.Rule
				for _, c := range n.Server.RuleCounts() {
					out = append(out, statuspage.Rule{ID: c.ID, Shadow: c.Shadow, Checks: c.Checks, Denied: c.Denied, ShadowDenied: c.ShadowDenied})
				}
				return out
			},
			HotKeys: func(k int) []statuspage.HotKey {
				return []statuspage.HotKey{{Key: "user:1", Checks: 1200, Denied: 200}, {Key: "<b>bold</b>", Checks: 5}}
			},
			Blocks: func(int) ([]statuspage.Block, int, uint64) {
				return []statuspage.Block{{Identifier: "ip=1.2.3.4", TTLMillis: 90_000, Reason: "too many logins", Rule: "login"}}, 1200, 3
			},
		})
	}})
	for _, r := range []rules.Rule{
		{ID: "login", Target: "/login", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 5, Window: testutil.NoRollover},
		{ID: "trial", Target: "*", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 2, Window: testutil.NoRollover, Shadow: true},
	} {
		if _, err := n.Store.SetRule(r); err != nil {
			t.Fatal(err)
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr})
	defer rdb.Close()
	ctx := context.Background()
	t0 := time.Unix(1_700_000_000, 0)
	series.Record(t0, totals(n))
	const seconds = 6
	for s := 1; s <= seconds; s++ { // a second of load, then its sample
		for i := 0; i < 20*s; i++ {
			rdb.Do(ctx, "RL.CHECK", "hot", "fixed", 30, 60)
		}
		rdb.Do(ctx, "RL.CHECKRULES", "/login", "free", "ip=9.9.9.9")
		series.Record(t0.Add(time.Duration(s)*time.Second), totals(n))
	}

	dom := headless.DumpDOM(t, n.URL+"/status")
	if p := headless.Points(dom, "chart-checks"); p != seconds {
		t.Errorf("the checks plot has %d points, want %d (a point a second)", p, seconds)
	}
	if p := headless.Points(dom, "chart-denied"); p != seconds {
		t.Errorf("the denials plot has %d points, want %d", p, seconds)
	}
	wantCell(t, dom, "data-rule", "login", "denied", 1)        // 6 checks, limit 5
	wantCell(t, dom, "data-rule", "trial", "shadow-denied", 4) // 6 checks, limit 2, shadow
	wantCell(t, dom, "data-key", "user:1", "checks", 1200)
	if row, ok := headless.Row(dom, "data-identifier", "ip=1.2.3.4"); !ok || !strings.Contains(row, "too many logins") || !strings.Contains(row, "1m 30s") {
		t.Errorf("no block row for ip=1.2.3.4 with its reason and time left in:\n%s", dom)
	}
	if want := `<p id="blocks-summary" class="muted">1,200 blocked; the newest 1 shown; 3 dropped to keep within --max-blocks</p>`; !strings.Contains(dom, want) {
		t.Errorf("no %s in:\n%s", want, dom)
	}
	if !strings.Contains(dom, `<td class="key">&lt;b&gt;bold&lt;/b&gt;</td>`) {
		t.Errorf("the key <b>bold</b> is not shown as text:\n%s", dom)
	}
	if !strings.Contains(dom, `<p id="single" class="muted">`) {
		t.Errorf("a single node's page does not say it has no cluster:\n%s", dom)
	}
	// The plots' scales: the last second's 120 checks, and its 121
	// denials (the key's, past its limit, and a rule's), are the peaks, so
	// both plots read 0 to 200 in quarters.
	if got := strings.Join(headless.Ticks(dom, "y-checks"), " "); got != "200 150 100 50 0" {
		t.Errorf("the checks plot's y axis reads %q, want 200 150 100 50 0:\n%s", got, dom)
	}
	if got := strings.Join(headless.Ticks(dom, "y-denied"), " "); got != "200 150 100 50 0" {
		t.Errorf("the denials plot's y axis reads %q, want 200 150 100 50 0", got)
	}
	for _, id := range []string{"scope-totals", "scope-checks", "scope-rules", "scope-hotkeys", "scope-blocks"} {
		if !strings.Contains(dom, `id="`+id+`" class="scope">this node<`) {
			t.Errorf("%s does not say this node on a single node", id)
		}
	}
}

// onlyFirst is a status page whose figures can be read once: the page
// is served with them; every GET /v1/stats after is cut off.
type onlyFirst struct {
	httpapi.StatusPage
	calls atomic.Int32
}

func (o *onlyFirst) StatusReport(ctx context.Context, details bool) any {
	if o.calls.Add(1) > 1 {
		panic(http.ErrAbortHandler) // the connection is closed, silently
	}
	return o.StatusPage.StatusReport(ctx, details)
}

// TestFirstPaintHasData: the page draws the figures it was served with
// before /v1/stats ever answers (here it never does): no bare
// "waiting for /v1/stats…" placeholders.
func TestFirstPaintHasData(t *testing.T) {
	headless.Browser(t)
	n := testserver.Start(t, testserver.Options{Status: func(n *testserver.Node) httpapi.StatusPage {
		return &onlyFirst{StatusPage: statuspage.NewSource(statuspage.Options{Node: "t1", Version: "test", Mode: "memory",
			Totals: func() statuspage.Totals { return statuspage.Totals{Checks: 4321, Denied: 21} }})}
	}})
	dom := headless.DumpDOM(t, n.URL+"/status")
	for _, want := range []string{`<span id="node">t1</span>`, `<dd id="mode">memory</dd>`,
		`<dd id="total-checks">4,321</dd>`, `<dd id="total-denied">21</dd>`, "no answer from the node"} {
		if !strings.Contains(dom, want) {
			t.Errorf("no %s in:\n%s", want, dom)
		}
	}
	if strings.Contains(dom, "waiting for /v1/stats") || strings.Contains(dom, `>…<`) {
		t.Errorf("the page shows placeholders:\n%s", dom)
	}
}

func totals(n *testserver.Node) statuspage.Totals {
	t := n.Server.Totals()
	return statuspage.Totals{Checks: t.Checks, Denied: t.Denied}
}

// wantCell asserts that the row marked attr=value has the figure want in
// its cell of class.
func wantCell(t *testing.T, dom, attr, value, class string, want int64) {
	t.Helper()
	row, ok := headless.Row(dom, attr, value)
	if !ok {
		t.Errorf("no row %s=%q in:\n%s", attr, value, dom)
		return
	}
	text, _ := headless.Cell(row, class)
	if got, err := headless.Number(text); err != nil || got != want {
		t.Errorf("row %s=%q: %s is %q, want %d", attr, value, class, text, want)
	}
}

// TestPageAsksForTheToken: on a node with a password, the page (open)
// gets 401 from /v1/stats and shows its field for the token instead of
// figures.
func TestPageAsksForTheToken(t *testing.T) {
	headless.Browser(t)
	n := testserver.Start(t, testserver.Options{RequirePass: "pw", Status: func(n *testserver.Node) httpapi.StatusPage {
		return statuspage.NewSource(statuspage.Options{Node: "t1"})
	}})
	dom := headless.DumpDOM(t, n.URL+"/status")
	if !strings.Contains(dom, `<form id="auth">`) || !strings.Contains(dom, "this node asks for a token") {
		t.Errorf("the page does not ask for the token:\n%s", dom)
	}
	if !strings.Contains(dom, `<span id="node">…</span>`) {
		t.Errorf("the page shows figures it was refused:\n%s", dom)
	}
}
