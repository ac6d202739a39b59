package main

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"
)

// --trusted-proxies defaults to loopback, is set like every flag, is
// listed by --help and refuses what is not a CIDR with one line.
func TestTrustedProxiesFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, "127.0.0.0/8,::1"},
		{[]string{"--trusted-proxies", "10.0.0.0/8, 192.168.1.7"}, nil, "10.0.0.0/8, 192.168.1.7"},
		{[]string{"--trusted-proxies", ""}, nil, ""},
		{nil, map[string]string{"RLSERVER_TRUSTED_PROXIES": "10.0.0.1"}, "10.0.0.1"},
	} {
		cfg, err := loadConfig(c.args, env(c.env), nil)
		if err != nil || cfg.TrustedProxies != c.want {
			t.Errorf("%v %v: %q, %v; want %q", c.args, c.env, cfg.TrustedProxies, err, c.want)
		}
	}
	_, err := loadConfig([]string{"--trusted-proxies", "10.0.0.0/33"}, env(nil), nil)
	if err == nil || err.Error() != `--trusted-proxies: "10.0.0.0/33" is neither a CIDR nor an IP address` {
		t.Errorf("bad CIDR: %v", err)
	}
	var out bytes.Buffer
	loadConfig([]string{"--help"}, env(nil), &out)
	if want := `--trusted-proxies (default "127.0.0.0/8,::1", env RLSERVER_TRUSTED_PROXIES)`; !strings.Contains(out.String(), want) {
		t.Errorf("--help lacks %q:\n%s", want, out.String())
	}
}

// forwardAuth asks node's /v1/forward-auth about a request to uri from
// the caller at xff with user id user; it returns the status and body.
func forwardAuth(t *testing.T, httpAddr, uri, xff, user string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+httpAddr+"/v1/forward-auth", nil)
	req.Header.Set("X-Forwarded-Uri", uri)
	req.Header.Set("X-Forwarded-For", xff)
	if user != "" {
		req.Header.Set("X-User-Id", user)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestForwardAuthBinary: the binary serves /v1/forward-auth and takes the
// caller's ip from X-Forwarded-For only from --trusted-proxies.
func TestForwardAuthBinary(t *testing.T) {
	bin := buildBinary(t)
	for _, c := range []struct {
		trusted string
		same    bool // two X-Forwarded-For addresses share one counter (the peer's)
	}{{"127.0.0.0/8,::1", false}, {"", true}} {
		p := startProc(t, bin, "", "--trusted-proxies", c.trusted)
		postRule(t, p, `{"id":"per-ip","target":"/login","tier":"*","key_type":"ip","algo":"fixed","limit":1,"window":"`+noRollover+`"}`)
		if status, body := forwardAuth(t, p.http, "/login", "203.0.113.1", ""); status != 200 {
			t.Fatalf("--trusted-proxies %q: first: %d %s", c.trusted, status, body)
		}
		status, body := forwardAuth(t, p.http, "/login", "203.0.113.2", "")
		if want := map[bool]int{false: 200, true: 429}[c.same]; status != want {
			t.Errorf("--trusted-proxies %q: another X-Forwarded-For: %d %s, want %d", c.trusted, status, body, want)
		}
		p.stop()
	}
}

// TestForwardAuthOnEveryClusterNode: forward auth asked of any node of a
// cluster charges the same counters, which live in their slots' groups,
// and admits exactly each rule's limit in all.
func TestForwardAuthOnEveryClusterNode(t *testing.T) {
	procs := startNodes(t, buildBinary(t), 3, 4)
	waitBalanced(t, procs, 30*time.Second)
	postRule(t, procs[0], `{"id":"per-user","target":"/users/*","tier":"*","key_type":"user","algo":"fixed","limit":7,"window":"`+noRollover+`"}`)
	postRule(t, procs[0], `{"id":"per-ip","target":"*","tier":"*","key_type":"ip","algo":"fixed","limit":10,"window":"`+noRollover+`"}`)
	waitFor(t, 10*time.Second, "every node knows the rules", func() bool {
		for _, p := range procs {
			if status, _ := forwardAuth(t, p.http, "/nothing", "198.51.100.99", ""); status != 200 {
				return false
			}
			for _, id := range []string{"per-user", "per-ip"} {
				resp, err := http.Get("http://" + p.http + "/rules/" + id)
				if err != nil {
					return false
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					return false
				}
			}
		}
		return true
	})
	// alice from one ip: per-user (7) binds; bob from ten ips: per-user
	// too; an anonymous caller from one ip: per-ip (10) binds.
	allowed := map[string]int{}
	var trace []string
	for i := 0; i < 30; i++ {
		for _, who := range []struct{ name, user, ip string }{
			{"alice", "alice", "203.0.113.1"}, {"bob", "bob", fmt.Sprintf("198.51.100.%d", i%10)}, {"anonymous", "", "203.0.113.3"},
		} {
			status, body := forwardAuth(t, procs[i%3].http, "/users/42", who.ip, who.user)
			if who.name == "anonymous" && i < 12 {
				trace = append(trace, fmt.Sprintf("node %d: %d %s", i%3+1, status, body))
			}
			switch status {
			case 200:
				allowed[who.name]++
			case 429:
			default:
				t.Fatalf("node %d: %d %s", i%3+1, status, body)
			}
		}
	}
	if want := map[string]int{"alice": 7, "bob": 7, "anonymous": 10}; !maps.Equal(allowed, want) {
		t.Errorf("allowed over three nodes: %v, want %v; the anonymous caller's first answers:\n%s", allowed, want, strings.Join(trace, ""))
	}
}
