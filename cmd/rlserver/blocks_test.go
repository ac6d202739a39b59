package main

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testutil"
)

// blockRuleJSON allows one check per ip on /api/* (per 366 days: see
// testutil.NoRollover) and blocks an ip it denies 3 times within a minute, for 15
// minutes.
const blockRuleJSON = `{"target":"/api/*","tier":"*","key_type":"ip","algo":"fixed","limit":1,"window":"` + testutil.NoRollover + `",` +
	`"block":{"after":3,"within":"1m","for":"15m"}}`

// checkIP sends RL.CHECKRULES /api/x free ip=ip to p and returns the reply.
func checkIP(t *testing.T, p *proc, ip string) []any {
	t.Helper()
	v, err := p.client.Do(context.Background(), "RL.CHECKRULES", "/api/x", "free", "ip="+ip).Slice()
	if err != nil {
		t.Fatalf("RL.CHECKRULES ip=%s on %s: %v", ip, p.resp, err)
	}
	return v
}

// denyUntilBlocked spends ip's one check and has it denied 3 times by
// rule id, through p.
func denyUntilBlocked(t *testing.T, p *proc, id, ip string) {
	t.Helper()
	for i, want := range []int64{1, 0, 0, 0} {
		if v := checkIP(t, p, ip); v[0] != want || v[5] != id {
			t.Fatalf("ip=%s check %d: %v, want allowed=%d by %s", ip, i+1, v, want, id)
		}
	}
}

// blockedIDs returns the identifiers RL.BLOCKS lists on p, sorted.
func blockedIDs(t *testing.T, p *proc) []string {
	t.Helper()
	v, err := p.client.Do(context.Background(), "RL.BLOCKS").Slice()
	if err != nil {
		t.Fatalf("RL.BLOCKS on %s: %v", p.resp, err)
	}
	var out []string
	for _, row := range v {
		r := row.([]any)
		if ttl := r[1].(int64); ttl <= 0 {
			t.Errorf("RL.BLOCKS on %s: %v has ttl %d", p.resp, r, ttl)
		}
		out = append(out, r[0].(string))
	}
	sort.Strings(out)
	return out
}

// assertBlocked checks that p lists exactly want and denies each by its
// block.
func assertBlocked(t *testing.T, p *proc, want ...string) {
	t.Helper()
	if got := blockedIDs(t, p); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("RL.BLOCKS on %s: %v, want %v\n%s", p.resp, got, want, p.logs)
	}
	for _, id := range want {
		typ, val, _ := strings.Cut(id, "=")
		v, err := p.client.Do(context.Background(), "RL.CHECKRULES", "/api/x", "free", typ+"="+val).Slice()
		if err != nil || v[0] != int64(0) || v[5] != "block:"+id || v[3].(int64) <= 0 {
			t.Fatalf("RL.CHECKRULES %s on %s: %v %v, want denied by its block", id, p.resp, v, err)
		}
	}
}

// putBlock blocks type/value through PUT /v1/blocks on p's HTTP port.
func putBlock(t *testing.T, p *proc, typ, value string, seconds int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, "http://"+p.http+"/v1/blocks/"+typ+"/"+value,
		strings.NewReader(fmt.Sprintf(`{"seconds":%d,"reason":"over http"}`, seconds)))
	req.Header.Set("Content-Type", "application/json")
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("PUT /v1/blocks/%s/%s: %s", typ, value, res.Status)
	}
}

// TestBlocksSurviveRestartAndKill9: in strong mode, blocks made by a rule,
// by RL.BLOCK and over HTTP survive SIGTERM and kill -9 right after they
// were acknowledged; a lifted block stays lifted and an expired one does
// not come back; a blocked ip charged nothing meanwhile.
func TestBlocksSurviveRestartAndKill9(t *testing.T) {
	parallel(t)
	bin, dir := buildBinary(t), t.TempDir()
	p := startProc(t, bin, dir, "--consistency", "strong")
	p.do("RL.RULE.SET", "per-ip", blockRuleJSON)
	denyUntilBlocked(t, p, "per-ip", "1.1.1.1")
	p.do("RL.BLOCK", "user=u1", 600, "abuse")
	p.do("RL.BLOCK", "ip=9.9.9.9", 1, "short")
	putBlock(t, p, "ip", "2.2.2.2", 600)
	assertBlocked(t, p, "ip=1.1.1.1", "ip=2.2.2.2", "ip=9.9.9.9", "user=u1")
	p.stop()

	time.Sleep(1100 * time.Millisecond) // ip=9.9.9.9's second passes
	p = startProc(t, bin, dir, "--consistency", "strong")
	assertBlocked(t, p, "ip=1.1.1.1", "ip=2.2.2.2", "user=u1")
	// Blocked checks charged nothing: the counters are as the rule left them.
	if r := p.remaining("RL.PEEK", "per-ip:1.1.1.1", "fixed", 1, testutil.NoRollover); r != 0 {
		t.Fatalf("per-ip:1.1.1.1 remaining %d, want 0", r)
	}
	if got := p.do("RL.UNBLOCK", "ip=2.2.2.2"); got != int64(1) {
		t.Fatalf("RL.UNBLOCK: %v", got)
	}
	p.do("RL.BLOCK", "ip=3.3.3.3", 600)
	denyUntilBlocked(t, p, "per-ip", "4.4.4.4")
	p.kill()

	p = startProc(t, bin, dir, "--consistency", "strong")
	assertBlocked(t, p, "ip=1.1.1.1", "ip=3.3.3.3", "ip=4.4.4.4", "user=u1")
	if v := checkIP(t, p, "2.2.2.2"); v[0] != int64(1) || v[5] != "per-ip" {
		t.Fatalf("ip=2.2.2.2 after kill -9: %v, want allowed by per-ip (lifted)", v)
	}
	p.stop()
}

// TestClusterBlocksSurviveFailover: in a three-node cluster a rule's
// blocks (from denials through one node, and through all three) and manual
// ones made over RESP and HTTP through others reach every node; the meta group's leader is killed with SIGKILL; the blocks still
// deny through the others, and one is lifted through a survivor once the
// meta group has a new leader.
func TestClusterBlocksSurviveFailover(t *testing.T) {
	parallel(t)
	bin := buildBinary(t)
	procs := clusterProcs(t, bin, 3, "--consistency", "strong")
	procs[0].do("RL.RULE.SET", "per-ip", blockRuleJSON)
	testutil.WaitFor(t, 10*time.Second, "the rule on every node", func() bool {
		for _, p := range procs {
			if v, err := p.client.Do(context.Background(), "RL.RULE.GET", "per-ip").Result(); err != nil || v == nil {
				return false
			}
		}
		return true
	})
	denyUntilBlocked(t, procs[0], "per-ip", "1.1.1.1")
	// Denials through different nodes count together: the count lives in
	// its slot's group, like the rule's counters.
	for i, want := range []int64{1, 0, 0, 0} {
		if v := checkIP(t, procs[i%3], "5.5.5.5"); v[0] != want || v[5] != "per-ip" {
			t.Fatalf("ip=5.5.5.5 check %d through node %d: %v, want allowed=%d by per-ip", i+1, i%3, v, want)
		}
	}
	procs[1].do("RL.BLOCK", "user=u1", 600, "abuse")
	putBlock(t, procs[2], "apikey", "k1", 600)
	want := []string{"apikey=k1", "ip=1.1.1.1", "ip=5.5.5.5", "user=u1"}
	testutil.WaitFor(t, 10*time.Second, "the blocks on every node", func() bool {
		for _, p := range procs {
			if strings.Join(blockedIDs(t, p), ",") != strings.Join(want, ",") {
				return false
			}
		}
		return true
	})
	r, err := report(procs[0], "")
	if err != nil || r.MetaLeader == "" {
		t.Fatalf("GET /cluster: %+v %v", r, err)
	}
	victim := -1
	for i, p := range procs {
		if nodeAt(r, p.resp) == r.MetaLeader {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("meta leader %q is not one of the nodes: %+v", r.MetaLeader, r)
	}
	killed := time.Now()
	procs[victim].kill()
	live := without(procs, victim)
	for _, p := range live { // at once: a block is read locally, no leader needed
		assertBlocked(t, p, want...)
	}
	var lifted any
	testutil.WaitFor(t, 15*time.Second, "RL.UNBLOCK through a survivor", func() bool {
		lifted, err = live[0].client.Do(context.Background(), "RL.UNBLOCK", "user=u1").Result()
		return err == nil
	})
	if lifted != int64(1) {
		t.Fatalf("RL.UNBLOCK user=u1: %v", lifted)
	}
	left := []string{"apikey=k1", "ip=1.1.1.1", "ip=5.5.5.5"}
	testutil.WaitFor(t, 10*time.Second, "the lift on the other survivor", func() bool {
		return strings.Join(blockedIDs(t, live[1]), ",") == strings.Join(left, ",")
	})
	assertBlocked(t, live[1], left...)
	t.Logf("meta leader %s killed; RL.UNBLOCK committed through a survivor %v later", r.MetaLeader, time.Since(killed).Round(time.Millisecond))
}
