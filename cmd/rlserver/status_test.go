package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/internal/headless"
	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/statuspage"
)

// stats reads GET /v1/stats from p.
func stats(p *proc) (statuspage.Stats, error) {
	var s statuspage.Stats
	resp, err := http.Get("http://" + p.http + "/v1/stats")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// waitSeconds waits until p's page has sampled n seconds with checks in
// them.
func waitSeconds(t *testing.T, p *proc, n int) {
	testutil.WaitFor(t, 30*time.Second, "the page has samples of seconds with checks", func() bool {
		s, err := stats(p)
		busy := 0
		for _, c := range s.Series.Checks {
			if c > 0 {
				busy++
			}
		}
		return err == nil && busy >= n
	})
}

// hammer checks one key (and a rule, with RL.CHECKRULES) from a few
// goroutines until stop is closed; most checks of the key are denied.
func hammer(t *testing.T, rdb redis.UniversalClient, stop chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				rdb.Do(ctx, "RL.CHECK", "hot", "sliding", 100, 1)
				if i%10 == 0 {
					rdb.Do(ctx, "RL.CHECKRULES", "/login", "free", "ip=10.0.0."+string(rune('1'+w)))
				}
				if i%4 == 0 {
					rdb.Do(ctx, "RL.CHECK", "user:"+string(rune('a'+i%26)), "token", 50, 60)
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	return &wg
}

const (
	loginRule = `{"id":"login","target":"/login","tier":"*","key_type":"ip","algo":"fixed","limit":3,"window":"1m",` +
		`"block":{"after":2,"within":"1m","for":"15m"}}`
	trialRule = `{"id":"trial","target":"*","tier":"*","key_type":"ip","algo":"fixed","limit":1,"window":"1m","shadow":true}`
)

// TestStatusPageOfANode: a real rlserver process (durable, fast mode)
// under a load of one key checked many times, most denied, and of rule
// checks; its GET /status in headless chromium draws the checks and
// denials of the last seconds as plots with a point per second, the
// rule's denials and the shadow rule's would-be denials, the key first
// among the hot keys, the identifiers the rule blocked, and no cluster.
func TestStatusPageOfANode(t *testing.T) {
	parallel(t)
	headless.Browser(t)
	bin := buildBinary(t)
	p := startProc(t, bin, t.TempDir())
	ctx := context.Background()
	for _, r := range []string{loginRule, trialRule} {
		id := strings.Split(r, `"`)[3]
		if err := p.client.Do(ctx, "RL.RULE.SET", id, r).Err(); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	wg := hammer(t, p.client, stop)
	waitSeconds(t, p, 3)
	close(stop)
	wg.Wait()

	dom := headless.DumpDOM(t, "http://"+p.http+"/status")
	for _, chart := range []string{"chart-checks", "chart-denied"} {
		if n := headless.Points(dom, chart); n < 3 {
			t.Errorf("%s has %d points, want 3 or more:\n%s", chart, n, dom)
		}
	}
	for _, c := range []struct{ rule, class string }{{"login", "denied"}, {"trial", "shadow-denied"}, {"login", "checks"}} {
		row, ok := headless.Row(dom, "data-rule", c.rule)
		text, _ := headless.Cell(row, c.class)
		if n, err := headless.Number(text); !ok || err != nil || n < 1 {
			t.Errorf("rule %s: %s is %q, want at least 1:\n%s", c.rule, c.class, text, dom)
		}
	}
	for _, want := range []string{`<dd id="mode">fast</dd>`, `<dd id="writes" class="good">ok</dd>`,
		`<p id="single" class="muted">`} {
		if !strings.Contains(dom, want) {
			t.Errorf("no %s in:\n%s", want, dom)
		}
	}
	hotAndBlocked(t, dom)
}

// hotAndBlocked fails t unless the page in dom lists the key "hot" first
// among the hot keys, with most of hammer's checks of it, and the four
// identifiers that hammer's rule checks got blocked by the rule login.
func hotAndBlocked(t *testing.T, dom string) {
	t.Helper()
	first := `<table id="hotkeys"><thead><tr><th>key</th><th>checks</th><th>denied</th></tr></thead><tbody><tr data-key="hot">`
	if !strings.Contains(dom, first) {
		t.Errorf("the hot keys do not start with the key hot:\n%s", dom)
	}
	row, _ := headless.Row(dom, "data-key", "hot")
	checks, _ := headless.Cell(row, "checks")
	denied, _ := headless.Cell(row, "denied")
	c, err1 := headless.Number(checks)
	d, err2 := headless.Number(denied)
	if err1 != nil || err2 != nil || c < 100 || d < 1 || d > c {
		t.Errorf("hot key row %q: checks %q, denied %q", row, checks, denied)
	}
	for w := 0; w < 4; w++ {
		id := "ip=10.0.0." + string(rune('1'+w))
		row, ok := headless.Row(dom, "data-identifier", id)
		if !ok || !strings.Contains(row, "<td>login</td>") {
			t.Errorf("%s not shown blocked by login: %q", id, row)
		}
	}
}

// TestStatusPageOfACluster: three real processes, four groups, a cluster
// client's load; the page of one node (not the first) shows the three
// nodes up, every group with the leader GET /cluster names, the hot key
// and the blocks (made through any node, summed over all), and once
// n3 is killed, n3 down and the others up. With
// RLSERVER_STATUS_SCREENSHOT=file, a screenshot of that page is written
// to file after 40 s of load (docs/status.png is one).
func TestStatusPageOfACluster(t *testing.T) {
	parallel(t)
	headless.Browser(t)
	bin := buildBinary(t)
	procs := clusterProcsN(t, bin, 3, 4)
	rdb := clusterClient(t, procs)
	ctx := context.Background()
	for _, r := range []string{loginRule, trialRule} {
		id := strings.Split(r, `"`)[3]
		if err := rdb.Do(ctx, "RL.RULE.SET", id, r).Err(); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	wg := hammer(t, rdb, stop)
	defer func() { close(stop); wg.Wait() }()
	waitSeconds(t, procs[1], 2)
	shot := os.Getenv("RLSERVER_STATUS_SCREENSHOT")
	if shot != "" {
		time.Sleep(40 * time.Second)
	}

	page := "http://" + procs[1].http + "/status"
	dom := headless.DumpDOM(t, page)
	r, err := report(procs[1], "")
	if err != nil {
		t.Fatal(err)
	}
	if n := headless.Rows(dom, "data-node"); n != 3 {
		t.Errorf("the page shows %d nodes, want 3:\n%s", n, dom)
	}
	for _, name := range []string{"n1", "n2", "n3"} {
		row, ok := headless.Row(dom, "data-node", name)
		if !ok || !strings.Contains(row, `<td class="good">up</td>`) {
			t.Errorf("node %s not shown up: %q", name, row)
		}
	}
	if len(r.Groups) != 4 {
		t.Fatalf("GET /cluster has %d groups, want 4", len(r.Groups))
	}
	for _, g := range r.Groups {
		row, ok := headless.Row(dom, "data-group", strconv.Itoa(g.ID))
		leader, _ := headless.Cell(row, "leader")
		if !ok || g.Leader == "" || leader != g.Leader {
			t.Errorf("group %d: the page shows leader %q, GET /cluster %q", g.ID, leader, g.Leader)
		}
	}
	if n := headless.Points(dom, "chart-checks"); n < 2 {
		t.Errorf("chart-checks has %d points, want 2 or more", n)
	}
	hotAndBlocked(t, dom)
	// Which figures are whose: the node's own checks, denials and rule
	// counts; the cluster's hot keys and blocks. The plots have scales.
	for id, want := range map[string]string{"scope-totals": "node n2 only", "scope-checks": "node n2 only",
		"scope-denied": "node n2 only", "scope-rules": "node n2 only", "scope-hotkeys": "whole cluster", "scope-blocks": "whole cluster"} {
		if !strings.Contains(dom, `id="`+id+`" class="scope">`+want+`<`) {
			t.Errorf("%s does not say %q", id, want)
		}
	}
	for _, id := range []string{"y-checks", "y-denied"} {
		if ticks := headless.Ticks(dom, id); len(ticks) != 5 || ticks[4] != "0" || ticks[0] == "0" {
			t.Errorf("%s reads %q, want five values from a top down to 0", id, ticks)
		}
	}
	if shot != "" {
		headless.Screenshot(t, page, shot, 1280, 1480)
		t.Logf("screenshot of %s written to %s", page, shot)
	}

	procs[2].kill() // n3
	waitServedBy(t, procs[1], procs[2].resp, time.Now().Add(30*time.Second))
	dom = headless.DumpDOM(t, page)
	if row, ok := headless.Row(dom, "data-node", "n3"); !ok || !strings.Contains(row, `<td class="bad">down`) {
		t.Errorf("n3, killed, is not shown down: %q", row)
	}
	for _, name := range []string{"n1", "n2"} {
		if row, _ := headless.Row(dom, "data-node", name); !strings.Contains(row, `<td class="good">up</td>`) {
			t.Errorf("node %s not shown up after n3 was killed: %q", name, row)
		}
	}
}
