package main

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testutil"
)

// --trusted-proxies defaults to loopback, is set like every flag, is
// listed by --help and refuses what is not a CIDR with one line.
func TestTrustedProxiesFlag(t *testing.T) {
	parallel(t)
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

// --ipv6-prefix defaults to 64, is set like every flag (command line,
// environment, config file), is listed by --help and refuses what is not
// 1 to 128 with one line.
func TestIPv6PrefixFlag(t *testing.T) {
	parallel(t)
	file := filepath.Join(t.TempDir(), "rlserver.yaml")
	if err := os.WriteFile(file, []byte("ipv6-prefix: 56\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
		want int
	}{
		{nil, nil, 64},
		{[]string{"--ipv6-prefix", "48"}, nil, 48},
		{[]string{"--ipv6-prefix=128"}, nil, 128},
		{nil, map[string]string{"RLSERVER_IPV6_PREFIX": "60"}, 60},
		{[]string{"--config", file}, nil, 56},
	} {
		cfg, err := loadConfig(c.args, env(c.env), nil)
		if err != nil || cfg.IPv6Prefix != c.want {
			t.Errorf("%v %v: %d, %v; want %d", c.args, c.env, cfg.IPv6Prefix, err, c.want)
		}
	}
	for _, bad := range []string{"0", "129", "-1"} {
		_, err := loadConfig([]string{"--ipv6-prefix", bad}, env(nil), nil)
		if want := "--ipv6-prefix " + bad + ": want 1 to 128"; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("--ipv6-prefix %s: %v, want %q...", bad, err, want)
		}
	}
	var out bytes.Buffer
	loadConfig([]string{"--help"}, env(nil), &out)
	if want := `--ipv6-prefix (default "64", env RLSERVER_IPV6_PREFIX)`; !strings.Contains(out.String(), want) {
		t.Errorf("--help lacks %q:\n%s", want, out.String())
	}
}

// forwardAuth asks node's /v1/forward-auth about a request to uri from
// the caller at xff with user id user; it returns the status and body.
func forwardAuth(t *testing.T, httpAddr, uri, xff, user string) (int, string) {
	t.Helper()
	return forwardAuthAt(t, "http://"+httpAddr+"/v1/forward-auth", "X-Forwarded-Uri", uri, "X-Forwarded-For", xff, "X-User-Id", user)
}

// forwardAuthAt sends GET url with the header name/value pairs (an empty
// value is left out) and returns the status and body.
func forwardAuthAt(t *testing.T, url string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] != "" {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestForwardAuthBinary: the binary serves /v1/forward-auth, believes the
// headers of --trusted-proxies alone (another peer is the caller itself,
// and names its target in the path, as Envoy does), and counts IPv6
// callers by --ipv6-prefix.
func TestForwardAuthBinary(t *testing.T) {
	parallel(t)
	bin := buildBinary(t)
	rule := `{"id":"per-ip","target":"/login","tier":"*","key_type":"ip","algo":"fixed","limit":1,"window":"` + testutil.NoRollover + `"}`
	// Trusted (loopback, the default): each X-Forwarded-For is a caller;
	// the seven addresses of one /64 are one.
	p := startProc(t, bin, "")
	postRule(t, p, rule)
	for i, xff := range []string{"203.0.113.1", "203.0.113.2"} {
		if status, body := forwardAuth(t, p.http, "/login", xff, ""); status != 200 {
			t.Fatalf("trusted, caller %d: %d %s", i+1, status, body)
		}
	}
	if got := allowedOf(t, p, ipv6Callers); got != 1 {
		t.Errorf("seven addresses of one /64: %d allowed, want 1", got)
	}
	p.stop()
	// --ipv6-prefix 128: each address is a caller.
	p = startProc(t, bin, "", "--ipv6-prefix", "128")
	postRule(t, p, rule)
	if got := allowedOf(t, p, ipv6Callers); got != 7 {
		t.Errorf("--ipv6-prefix 128: %d of 7 addresses allowed, want 7", got)
	}
	p.stop()
	// Trusting none: the target headers are refused; Envoy's path is
	// checked with the peer as the caller, whatever X-Forwarded-For says.
	p = startProc(t, bin, "", "--trusted-proxies", "")
	postRule(t, p, rule)
	if status, body := forwardAuth(t, p.http, "/login", "203.0.113.1", ""); status != 400 || !strings.Contains(body, "not in --trusted-proxies") {
		t.Errorf("untrusted, X-Forwarded-Uri: %d %s, want 400", status, body)
	}
	for i, want := range []int{200, 429} {
		status, body := forwardAuthAt(t, "http://"+p.http+"/v1/forward-auth/login", "X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i+1))
		if status != want {
			t.Errorf("untrusted, Envoy's path, caller %d: %d %s, want %d", i+1, status, body, want)
		}
	}
	p.stop()
}

// ipv6Callers are seven addresses of 2001:db8:1:2::/64.
var ipv6Callers = []string{"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff::1", "2001:db8:1:2:1:2:3:4",
	"2001:db8:1:2::abcd", "2001:db8:1:2:aaaa::9", "2001:db8:1:2:5::7"}

// allowedOf asks p about /login once from each of xffs, and returns how
// many were allowed.
func allowedOf(t *testing.T, p *proc, xffs []string) int {
	t.Helper()
	allowed := 0
	for _, xff := range xffs {
		status, body := forwardAuth(t, p.http, "/login", xff, "")
		switch status {
		case 200:
			allowed++
		case 429:
		default:
			t.Fatalf("%s: %d %s", xff, status, body)
		}
	}
	return allowed
}

// TestForwardAuthOnEveryClusterNode: forward auth asked of any node of a
// cluster charges the same counters, which live in their slots' groups,
// and admits exactly each rule's limit in all.
func TestForwardAuthOnEveryClusterNode(t *testing.T) {
	alone(t)
	procs := startNodes(t, buildBinary(t), 3, 4)
	waitBalanced(t, procs, 30*time.Second)
	postRule(t, procs[0], `{"id":"per-user","target":"/users/*","tier":"*","key_type":"user","algo":"fixed","limit":7,"window":"`+testutil.NoRollover+`"}`)
	postRule(t, procs[0], `{"id":"per-ip","target":"*","tier":"*","key_type":"ip","algo":"fixed","limit":10,"window":"`+testutil.NoRollover+`"}`)
	// Each probe comes from an address of its own (TEST-NET-1, apart from
	// the callers below): once the per-ip rule has reached a node, a probe
	// is charged to it, and ten probes from one address, spent while the
	// rules reach the other nodes, would have that address denied for good.
	probes := 0
	testutil.WaitFor(t, 10*time.Second, "every node knows the rules", func() bool {
		for _, p := range procs {
			probes++
			if status, _ := forwardAuth(t, p.http, "/nothing", fmt.Sprintf("192.0.2.%d", probes%254+1), ""); status != 200 {
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
