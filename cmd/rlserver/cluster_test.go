package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/internal/testutil"
)

// The cluster tests run three real rlserver processes, drive them with
// go-redis's ClusterClient, and kill one with SIGKILL.

// clusterProcs starts n nodes of one cluster of 8 groups with extra flags
// and waits until every group is served by its preferred leader.
func clusterProcs(t testing.TB, bin string, n int, extra ...string) []*proc {
	t.Helper()
	return clusterProcsN(t, bin, n, 8, extra...)
}

// clusterProcsN is clusterProcs with the given number of groups.
func clusterProcsN(t testing.TB, bin string, n, groups int, extra ...string) []*proc {
	t.Helper()
	procs := startNodes(t, bin, n, groups, extra...)
	waitBalanced(t, procs, 20*time.Second)
	return procs
}

// report reads GET /cluster (with query) from p.
func report(p *proc, query string) (cluster.Report, error) {
	var r cluster.Report
	req, err := http.NewRequest(http.MethodGet, "http://"+p.http+"/cluster"+query, nil)
	if err != nil {
		return r, err
	}
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("GET /cluster: %s", resp.Status)
	}
	return r, json.NewDecoder(resp.Body).Decode(&r)
}

// waitBalanced waits until every group has exactly one serving replica,
// its preferred leader (its first voter), as node procs[0] reports.
func waitBalanced(t testing.TB, procs []*proc, d time.Duration) {
	t.Helper()
	var r cluster.Report
	var err error
	if testutil.Poll(d, func() error {
		if r, err = report(procs[0], ""); err == nil && !r.IsBalanced() {
			return errors.New("not balanced")
		}
		return err
	}) != nil {
		t.Fatalf("the cluster did not balance within %v: %+v %v\n%s", d, r, err, procs[0].logs)
	}
}

// clusterClient returns a ClusterClient over procs' RESP addresses. It
// reloads the slots every 250ms (ClusterStateReloadInterval, 10s by
// default): a client cannot learn from a dead node that its slots moved,
// so a failover is followed as fast as the client asks again (see the
// README's cluster section).
func clusterClient(t *testing.T, procs []*proc) *redis.ClusterClient {
	var addrs []string
	for _, p := range procs {
		addrs = append(addrs, p.resp)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 8, ReadTimeout: 5 * time.Second,
		MinRetryBackoff: 5 * time.Millisecond, MaxRetryBackoff: 50 * time.Millisecond,
		ClusterStateReloadInterval: 250 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	return c
}

// mostLeader returns the index of the node that leads the most groups.
func mostLeader(t *testing.T, procs []*proc) int {
	r, err := report(procs[0], "")
	if err != nil {
		t.Fatal(err)
	}
	best, most := 0, -1
	for i, p := range procs {
		for _, n := range r.Nodes {
			if n.RESP == p.resp && n.Leads > most {
				best, most = i, n.Leads
			}
		}
	}
	return best
}

// waitServedBy polls p's GET /cluster until every group is served by a
// node other than the one at dead (its RESP address), and returns when.
func waitServedBy(t *testing.T, p *proc, dead string, deadline time.Time) time.Time {
	t.Helper()
	for {
		r, err := report(p, "")
		if err == nil && r.ServedWithout(nodeAt(r, dead)) {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("groups still not served without %s: %+v %v", dead, r, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// nodeAt returns the name of the node whose RESP address is resp, or "".
func nodeAt(r cluster.Report, resp string) string {
	for _, n := range r.Nodes {
		if n.RESP == resp {
			return n.Name
		}
	}
	return ""
}

// checkUntil runs RL.CHECK through c, retrying errors (a failover under
// way) until deadline, and returns the reply.
func checkUntil(c *redis.ClusterClient, deadline time.Time, args ...any) ([]any, error) {
	var v []any
	err := testutil.Poll(time.Until(deadline), func() (err error) {
		v, err = c.Do(context.Background(), append([]any{"RL.CHECK"}, args...)...).Slice()
		return err
	})
	return v, err
}

// TestClusterKill9StrongForgetsNothing: three nodes in strong mode; 200
// keys are each admitted 5 times (fixed, 5 per 366 days: see testutil.NoRollover)
// through go-redis's ClusterClient; the node leading the most groups is
// killed with SIGKILL; every key's sixth check (through slotClient, see its
// comment) is then denied — nothing admitted was forgotten — and the time
// until every key is served again is measured.
func TestClusterKill9StrongForgetsNothing(t *testing.T) {
	parallel(t)
	bin := buildBinary(t)
	// With --admin-token, the nodes' Raft listeners authenticate each
	// other with it (cluster/transport/auth.go): replication, failover and
	// the internal calls all run through that.
	procs := clusterProcs(t, bin, 3, "--consistency", "strong", "--admin-token", "cluster-t0ken")
	c := clusterClient(t, procs)
	early := 0 // keys spent before five admissions: a charge retried after a lost lead
	for i := 0; i < 200; i++ {
		for j := 0; j < 5; j++ {
			v, err := checkUntil(c, time.Now().Add(5*time.Second), fmt.Sprint("key:", i), "fixed", 5, testutil.NoRollover)
			if err == nil && v[0] == int64(0) && leadsLost(t) > 0 {
				early++ // a TRYAGAIN after a lost lead is retried by go-redis: its first try may have been committed
				break
			}
			if err != nil || v[0] != int64(1) {
				t.Fatalf("key:%d check %d: %v %v", i, j+1, v, err)
			}
		}
	}
	if early > 0 {
		t.Logf("%d keys were spent before their fifth admission, after %d leads lost to missed heartbeats (a busy machine)", early, leadsLost(t))
	}
	victim := mostLeader(t, procs)
	killed := time.Now()
	procs[victim].kill()
	live := without(procs, victim)
	served := waitServedBy(t, live[0], procs[victim].resp, killed.Add(15*time.Second))
	var liveAddrs []string
	for _, p := range live {
		liveAddrs = append(liveAddrs, p.resp)
	}
	c2 := newSlotClient(liveAddrs)
	defer c2.Close()
	for i := 0; i < 200; i++ {
		ctx, cancel := context.WithDeadline(context.Background(), killed.Add(15*time.Second))
		v, err := c2.Do(ctx, "RL.CHECK", fmt.Sprint("key:", i), "fixed", 5, testutil.NoRollover).Slice()
		cancel()
		if err != nil {
			t.Fatalf("key:%d after the crash: %v", i, err)
		}
		if v[0] != int64(0) {
			t.Fatalf("key:%d: the sixth check was allowed after the crash (%v): an admission was forgotten", i, v)
		}
	}
	took := time.Since(killed)
	t.Logf("strong: kill -9 of the node leading the most groups; every group led by a live node after %v, every key answered again (its sixth check denied) after %v",
		served.Sub(killed).Round(time.Millisecond), took.Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("full service took %v after kill -9 (goal 2s, test bound 5s)", took)
	}
}

// TestClusterKill9FastBounded: three nodes in fast mode under the kill -9
// load of crash_test.go (16 clients, all six algorithms) through
// ClusterClients; one node is killed; what the cluster forgot is at most
// what was acknowledged within three flush intervals before the kill.
func TestClusterKill9FastBounded(t *testing.T) {
	alone(t)
	bin := buildBinary(t)
	const interval = 100 * time.Millisecond
	procs := clusterProcs(t, bin, 3, "--consistency", "fast", "--flush-interval", interval.String(),
		"--max-log-limit", fmt.Sprint(crashLimit))
	var addrs []string
	for _, p := range procs {
		addrs = append(addrs, p.resp)
	}
	l := startLoadWith(t, func() doer {
		c := newSlotClient(addrs)
		c.stopOnUnsure = true
		return c
	})
	victim := mostLeader(t, procs)
	killed := l.crash(t, procs[victim], 3*time.Second)
	live := without(procs, victim)
	var liveAddrs []string
	for _, p := range live {
		liveAddrs = append(liveAddrs, p.resp)
	}
	c := newSlotClient(liveAddrs)
	defer c.Close()
	peek := func(args ...any) []any {
		var v []any
		err := testutil.Poll(15*time.Second, func() (err error) {
			v, err = c.Do(context.Background(), args...).Slice()
			return err
		})
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return v
	}
	missing, tally := l.compareWith(t, peek)
	window := 3 * interval
	bound := l.acksBetween(killed.Add(-window), killed)
	t.Logf("fast: %d checks, %d allowed, %d missing after kill -9 of one node of three; bound %d (allowed within %s before the kill)",
		l.total.Load(), tally, missing, bound, window)
	if missing > bound {
		t.Fatalf("fast mode forgot %d admissions, more than the %d acknowledged within %s of the kill", missing, bound, window)
	}
	if bound >= tally/2 {
		t.Fatalf("the bound (%d of %d) says nothing: the load was too short", bound, tally)
	}
}

// TestClusterProxyPlainClients: three nodes with --proxy serve clients that
// do not follow MOVED — redis-cli without -c, redis-py's plain Redis
// (pipelined), redis-benchmark without --cluster — on any node, and the
// counts are exact (fixed windows of 366 days: see testutil.NoRollover).
func TestClusterProxyPlainClients(t *testing.T) {
	alone(t)
	bin := buildBinary(t)
	procs := clusterProcs(t, bin, 3, "--proxy", "--consistency", "strong", "--admin-token", "cluster-t0ken")
	py := testutil.RequirePython(t, "redis")
	// redis-cli without -c: 20 keys, checked once on each node.
	for k := 0; k < 20; k++ {
		for _, p := range procs {
			host, port := splitAddr(p.resp)
			out, err := exec.Command("redis-cli", "-h", host, "-p", fmt.Sprint(port), "RL.CHECK", fmt.Sprint("cli:", k), "fixed", "10", testutil.NoRollover).CombinedOutput()
			if err != nil || !strings.HasPrefix(string(out), "1\n") {
				t.Fatalf("redis-cli on %s: %v %q", p.resp, err, out)
			}
		}
	}
	// Redis values and scripts are forwarded too: each node sets a key on
	// whichever node serves it, and a script reads them all back there.
	for i, p := range procs {
		host, port := splitAddr(p.resp)
		cli := func(args ...string) string {
			out, err := exec.Command("redis-cli", append([]string{"-h", host, "-p", fmt.Sprint(port)}, args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("redis-cli %v on %s: %v %q", args, p.resp, err, out)
			}
			return strings.TrimSpace(string(out))
		}
		for k := 0; k < 10; k++ {
			if out := cli("SET", fmt.Sprint("val:", i, ":", k), fmt.Sprint(i*k)); out != "OK" {
				t.Fatalf("SET through %s: %q", p.resp, out)
			}
		}
		for k := 0; k < 10; k++ {
			key := fmt.Sprint("val:", i, ":", k)
			if out := cli("EVAL", "return redis.call('INCRBY', KEYS[1], ARGV[1])", "1", key, "1"); out != fmt.Sprint(i*k+1) {
				t.Fatalf("EVAL through %s on %s: %q, want %d", p.resp, key, out, i*k+1)
			}
		}
	}
	// redis-py, a plain (non-transactional) pipeline of 20 checks per node.
	script := `
import sys, redis
for addr in sys.argv[1:]:
    host, port = addr.rsplit(":", 1)
    r = redis.Redis(host=host, port=int(port))
    p = r.pipeline(transaction=False)
    for k in range(20):
        p.execute_command("RL.CHECK", "cli:%d" % k, "fixed", 10, "` + testutil.NoRollover + `")
    for res in p.execute():
        assert res[0] == 1, res
print("ok")
`
	args := []string{"-c", script}
	for _, p := range procs {
		args = append(args, p.resp)
	}
	if out, err := exec.Command(py, args...).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("redis-py: %v\n%s", err, out)
	}
	// Every key: 3 checks by redis-cli and 3 by redis-py of 10.
	c := procs[0].client
	for k := 0; k < 20; k++ {
		if rem := procs[k%3].remaining("RL.PEEK", fmt.Sprint("cli:", k), "fixed", 10, testutil.NoRollover); rem != 4 {
			t.Fatalf("cli:%d: remaining %d, want 4 (6 checks of 10)", k, rem)
		}
	}
	// redis-benchmark without --cluster: 1000 checks of one key on each node.
	for _, p := range procs {
		host, port := splitAddr(p.resp)
		out, err := exec.Command("redis-benchmark", "-h", host, "-p", fmt.Sprint(port), "-n", "1000", "-c", "8", "-P", "4", "-q",
			"RL.CHECK", "bench:one", "fixed", "100000", testutil.NoRollover).CombinedOutput()
		if err != nil || strings.Contains(string(out), "rror") {
			t.Fatalf("redis-benchmark on %s: %v\n%s", p.resp, err, out)
		}
	}
	if v, err := c.Do(context.Background(), "RL.PEEK", "bench:one", "fixed", 100000, testutil.NoRollover).Slice(); err != nil || v[2] != int64(100000-3000) {
		t.Fatalf("bench:one after 3 x 1000 checks: %v %v, want remaining 97000", v, err)
	}
}

// leadsGroups reports whether node name leads a group, as p reports.
func leadsGroups(t testing.TB, p *proc, name string) bool {
	r, err := report(p, "")
	if err != nil {
		return false
	}
	for _, n := range r.Nodes {
		if n.Name == name {
			return n.Leads > 0
		}
	}
	return false
}

func hasNode(r cluster.Report, name string) bool {
	for _, n := range r.Nodes {
		if n.Name == name {
			return true
		}
	}
	return false
}

// without returns procs but the one at victim: the nodes left after it is
// killed.
func without(procs []*proc, victim int) []*proc {
	return append(append([]*proc(nil), procs[:victim]...), procs[victim+1:]...)
}
