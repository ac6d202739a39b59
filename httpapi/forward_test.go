package httpapi_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/clientid"
	"github.com/rlserver/rlserver/internal/testserver"
	"github.com/rlserver/rlserver/rules"
)

// forward sends method /v1/forward-auth+query with the header name/value
// pairs, as a gateway does.
func forward(t *testing.T, n *testserver.Node, method, query string, header ...string) reply {
	t.Helper()
	resp, body := testserver.Do(t, method, n.URL+"/v1/forward-auth"+query, header...)
	return reply{status: resp.StatusCode, header: resp.Header, body: body}
}

func setRules(t *testing.T, n *testserver.Node, list ...rules.Rule) {
	t.Helper()
	for _, r := range list {
		if _, err := n.Store.SetRule(r); err != nil {
			t.Fatal(err)
		}
	}
}

// hasKey reports whether n holds state for key.
func hasKey(n *testserver.Node, clk *testserver.Clock, key string) bool {
	return n.Store.CountKeys(clk.Now(), func(k []byte) bool { return string(k) == key }) == 1
}

var (
	loginPerIP  = rules.Rule{ID: "login-per-ip", Target: "/login", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 2, Window: "10s"}
	usersFree   = rules.Rule{ID: "users-free", Target: "/users/*", Tier: "free", KeyType: "user", Algo: "fixed", Limit: 3, Window: "10s"}
	usersPaid   = rules.Rule{ID: "users-paid", Target: "/users/*", Tier: "paid", KeyType: "user", Algo: "fixed", Limit: 5, Window: "10s"}
	keysPerHour = rules.Rule{ID: "keys", Target: "/api/*", Tier: "*", KeyType: "apikey", Algo: "fixed", Limit: 4, Window: "1h"}
)

// TestForwardAuthAllowsThenDenies: per ip (from X-Forwarded-For, the peer
// being a trusted proxy), 200s with the rate-limit headers, then 429 with
// Retry-After and the body of /v1/checkrules; ?deny_status=403 for nginx;
// another ip has its own counter; a path no rule names passes.
func TestForwardAuthAllowsThenDenies(t *testing.T) {
	n, _ := start(t, testserver.Options{})
	setRules(t, n, loginPerIP)
	ip := []string{"X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/login?next=%2Fhome", "X-Forwarded-For", "203.0.113.7"}
	for i, remaining := range []string{"1", "0"} {
		r := forward(t, n, "GET", "", ip...)
		expect(t, "allowed", r, 200)
		if r.body != "" || r.header.Get("Content-Length") != "0" {
			t.Errorf("allowed: body %q: want none (Caddy would close the connection of an unread one)", r.body)
		}
		header(t, r, "X-RateLimit-Remaining", remaining)
		header(t, r, "RateLimit-Policy", `"login-per-ip";q=2;w=10`)
		header(t, r, "RateLimit", `"login-per-ip";r=`+remaining+";t=5")
		if t.Failed() {
			t.Fatalf("request %d", i)
		}
	}
	r := forward(t, n, "GET", "", ip...)
	expect(t, "denied", r, 429, `{"allowed":false,"limit":2,"remaining":0,"retry_after_ms":4700,"reset_after_ms":4700,"rule":"login-per-ip"}`)
	header(t, r, "Retry-After", "5")
	header(t, r, "RateLimit-Policy", `"login-per-ip";q=2;w=10`)
	header(t, r, "X-RateLimit-Limit", "2")
	r = forward(t, n, "HEAD", "?deny_status=403", ip...)
	if r.status != 403 || r.header.Get("Retry-After") != "5" || r.header.Get("RateLimit") != `"login-per-ip";r=0;t=5` {
		t.Errorf("deny_status=403: %d %v", r.status, r.header)
	}
	other := forward(t, n, "POST", "", "X-Forwarded-Uri", "/login", "X-Forwarded-For", "198.51.100.1")
	expect(t, "another ip", other, 200)
	header(t, other, "X-RateLimit-Remaining", "1")
	// Envoy's ext_authz appends the path to the auth URL.
	envoy := forward(t, n, "POST", "/login", "X-Forwarded-For", "198.51.100.1")
	expect(t, "envoy ext_authz", envoy, 200)
	header(t, envoy, "X-RateLimit-Remaining", "0")
	// nginx's name for the URI, and a path no rule names.
	free := forward(t, n, "GET", "", "X-Original-URI", "/elsewhere", "X-Forwarded-For", "203.0.113.7")
	expect(t, "no rule", free, 200)
	header(t, free, "RateLimit", "")
	if got := n.Metric(t, "rlserver_rule_checks_total", map[string]string{"result": "denied"}); got != 2 {
		t.Errorf("rlserver_rule_checks_total{result=denied} = %v, want 2", got)
	}
	if got := n.Metric(t, "rlserver_http_requests_total", map[string]string{"handler": "forward_auth", "code": "429"}); got != 1 {
		t.Errorf("rlserver_http_requests_total{handler=forward_auth,code=429} = %v, want 1", got)
	}
}

// TestForwardAuthIsCheckRules: for the same state, forward auth and POST
// /v1/checkrules give the same status, headers and body, and charge the
// same counters: the user's, the ip's, and the API key's digest.
func TestForwardAuthIsCheckRules(t *testing.T) {
	n, clk := start(t, testserver.Options{})
	setRules(t, n, usersFree, keysPerHour,
		rules.Rule{ID: "api-ip", Target: "/api/*", Tier: "*", KeyType: "ip", Algo: "token", Limit: 2, Window: "10s", Burst: 6})
	digest := clientid.HashAPIKey("s3cret")
	names := []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit", "RateLimit-Policy", "Retry-After"}
	for i := 0; i < 6; i++ {
		// Alternate: forward auth, then the same request as JSON; both charge.
		fa := forward(t, n, "GET", "", "X-Forwarded-Uri", "/api/items", "X-Forwarded-For", "192.0.2.9", "X-Api-Key", "s3cret")
		cr := do(t, "POST", n.URL+"/v1/checkrules",
			`{"target":"/api/items","tier":"default","ids":{"ip":"192.0.2.9","apikey":"`+digest+`"}}`, "")
		if i < 2 {
			if fa.status != 200 || cr.status != 200 {
				t.Fatalf("request %d: %d, %d", i, fa.status, cr.status)
			}
			continue
		}
		// From the third pair on, keys (4 per hour) has denied both.
		if fa.status != cr.status || fa.body != cr.body {
			t.Errorf("request %d: forward auth %d %s, checkrules %d %s", i, fa.status, fa.body, cr.status, cr.body)
		}
		for _, h := range names {
			if fa.header.Get(h) != cr.header.Get(h) {
				t.Errorf("request %d: %s: forward auth %q, checkrules %q", i, h, fa.header.Get(h), cr.header.Get(h))
			}
		}
	}
	if r := forward(t, n, "GET", "", "X-Forwarded-Uri", "/api/x", "X-Api-Key", "s3cret"); !strings.Contains(r.body, `"rule":"keys"`) ||
		r.status != 429 {
		t.Fatalf("the digest's counter: %d %s", r.status, r.body)
	}
	if hasKey(n, clk, "keys:s3cret") || !hasKey(n, clk, "keys:"+digest) {
		t.Fatal("the raw API key is a counter key, or its digest is not")
	}
}

// TestForwardAuthRoutes: the query parameters rename the headers, set the
// route's tier, cost and the methods it checks; X-Tier beats ?tier.
func TestForwardAuthRoutes(t *testing.T) {
	n, _ := start(t, testserver.Options{})
	setRules(t, n, usersFree, usersPaid)
	// X-User-Id is the default header; a route that says otherwise reads its own.
	r := forward(t, n, "GET", "?tier=free", "X-Forwarded-Uri", "/users/1", "X-User-Id", "alice")
	decided(t, "default user header", r, "users-free", "2")
	r = forward(t, n, "GET", "?tier=free&user_header=X-Consumer", "X-Forwarded-Uri", "/users/1", "X-Consumer", "alice", "X-User-Id", "bob")
	decided(t, "renamed user header", r, "users-free", "1")
	r = forward(t, n, "GET", "?tier=paid", "X-Forwarded-Uri", "/users/1", "X-User-Id", "alice")
	decided(t, "paid route", r, "users-paid", "4")
	r = forward(t, n, "GET", "?tier=paid", "X-Forwarded-Uri", "/users/1", "X-User-Id", "alice", "X-Tier", "free")
	decided(t, "X-Tier beats ?tier", r, "users-free", "0")
	r = forward(t, n, "GET", "?tier=paid&cost=4", "X-Forwarded-Uri", "/users/1", "X-User-Id", "alice")
	decided(t, "cost", r, "users-paid", "0")
	// ?methods: other methods pass unchecked and uncharged.
	r = forward(t, n, "GET", "?tier=free&methods=post,put", "X-Forwarded-Uri", "/users/1", "X-User-Id", "carol", "X-Forwarded-Method", "GET")
	decided(t, "unchecked method", r, "", "")
	r = forward(t, n, "GET", "?tier=free&methods=post,put", "X-Forwarded-Uri", "/users/1", "X-User-Id", "carol", "X-Forwarded-Method", "PUT")
	decided(t, "checked method", r, "users-free", "2")
	// ?user_header= (empty) counts no user: nothing matches a user rule.
	r = forward(t, n, "GET", "?tier=free&user_header=", "X-Forwarded-Uri", "/users/1", "X-User-Id", "carol")
	decided(t, "no user", r, "", "")
}

// decided checks that r allowed the request under rule with remaining
// left (rule "": no rule, so no headers).
func decided(t *testing.T, what string, r reply, rule, remaining string) {
	t.Helper()
	policy := r.header.Get("RateLimit-Policy")
	if r.status != 200 || !strings.HasPrefix(policy, `"`+rule+`";`) && rule != "" || rule == "" && policy != "" ||
		r.header.Get("X-RateLimit-Remaining") != remaining {
		t.Errorf("%s: %d %v, want 200 with rule %q and %q remaining", what, r.status, r.header, rule, remaining)
	}
}

// TestForwardAuthTrustsOnlyTrustedProxies: from a peer outside
// --trusted-proxies, X-Forwarded-For is ignored and the peer is the
// caller, so spoofed addresses share the peer's counter. (Such a peer
// names its target in the path, as Envoy does: see forward_trust_test.go.)
func TestForwardAuthTrustsOnlyTrustedProxies(t *testing.T) {
	n, clk := start(t, testserver.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}})
	setRules(t, n, loginPerIP)
	for i, xff := range []string{"203.0.113.1", "203.0.113.2", "bogus"} {
		r := forward(t, n, "GET", "/login", "X-Forwarded-For", xff)
		if want := []int{200, 200, 429}[i]; r.status != want {
			t.Fatalf("request %d (X-Forwarded-For %s): %d %s, want %d", i, xff, r.status, r.body, want)
		}
	}
	if !hasKey(n, clk, "login-per-ip:127.0.0.1") {
		t.Fatal("the peer's counter was not charged")
	}
}

// TestForwardAuthBadInput: what a gateway cannot describe is a 4xx with a
// JSON error that says what is wrong, never a panic or a 5xx.
func TestForwardAuthBadInput(t *testing.T) {
	n, _ := start(t, testserver.Options{})
	setRules(t, n, usersFree, loginPerIP)
	long := strings.Repeat("u", 100<<10)
	for _, tt := range []struct {
		name, query string
		header      []string
		status      int
		want        string
	}{
		{"missing target", "", []string{"X-User-Id", "u1"}, 400, "missing target: the gateway must send the request's URI in X-Forwarded-Uri or X-Original-URI"},
		{"target not a path", "", []string{"X-Forwarded-Uri", "users/1"}, 400, `X-Forwarded-Uri: want the request's URI`},
		{"target with a bad escape", "", []string{"X-Forwarded-Uri", "/users/%zz"}, 400, `X-Forwarded-Uri: \"/users/%zz\" holds a '%' not followed by two hex digits`},
		{"target too long", "", []string{"X-Forwarded-Uri", "/" + strings.Repeat("a", 2000)}, 400, "target or tier is longer than the limit of 1024 bytes"},
		{"malformed X-Forwarded-For", "", []string{"X-Forwarded-Uri", "/login", "X-Forwarded-For", "10.0.0.1, not-an-ip"}, 400,
			`X-Forwarded-For: \"not-an-ip\" is not an IP address (sent by the trusted proxy 127.0.0.1)`},
		{"huge user id", "", []string{"X-Forwarded-Uri", "/users/1", "X-User-Id", long}, 400, "ids.user: want a non-empty type and a value of 1 to 959 bytes"},
		{"huge tier", "", []string{"X-Forwarded-Uri", "/users/1", "X-Tier", long}, 400, "target or tier is longer"},
		{"unknown parameter", "?user_heder=X-Consumer", []string{"X-Forwarded-Uri", "/users/1"}, 400, `query parameter \"user_heder\": unknown`},
		{"parameter twice", "?tier=a&tier=b", []string{"X-Forwarded-Uri", "/users/1"}, 400, "query parameter tier: given more than once"},
		{"bad header name", "?user_header=X%20User", []string{"X-Forwarded-Uri", "/users/1"}, 400, `user_header: want a header name, got \"X User\"`},
		{"bad tier", "?tier=a:b", []string{"X-Forwarded-Uri", "/users/1"}, 400, "tier: want 1 to 64 letters"},
		{"bad cost", "?cost=-1", []string{"X-Forwarded-Uri", "/users/1"}, 400, "cost: want a non-negative integer"},
		{"cost too large", "?cost=999999999999999999", []string{"X-Forwarded-Uri", "/users/1"}, 400, "cost: want a non-negative integer"},
		{"bad deny status", "?deny_status=500", []string{"X-Forwarded-Uri", "/users/1"}, 400, "deny_status: want 429 (the default), 403"},
		{"no identifier", "?ip_header=", []string{"X-Forwarded-Uri", "/users/1"}, 400, "ids: want at least one identifier"},
	} {
		r := forward(t, n, "GET", tt.query, tt.header...)
		expect(t, tt.name, r, tt.status, `{"error":"bad request: `, tt.want)
	}
	if n.Store.Len() != 0 {
		t.Errorf("%d counters charged by bad requests", n.Store.Len())
	}
}

// TestForwardAuthShadowAndAuth: a shadow rule reports and counts but
// never denies; with --requirepass forward auth needs the password, as
// every check over HTTP does.
func TestForwardAuthShadowAndAuth(t *testing.T) {
	n, _ := start(t, testserver.Options{RequirePass: "pw"})
	setRules(t, n, rules.Rule{ID: "trial", Target: "*", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 1, Window: "10s", Shadow: true})
	r := forward(t, n, "GET", "", "X-Forwarded-Uri", "/x")
	expect(t, "no token", r, 401, "checking a forwarded request needs the password")
	for i := 0; i < 3; i++ {
		r = forward(t, n, "GET", "", "X-Forwarded-Uri", "/x", "Authorization", "Bearer pw")
		decided(t, "shadow", r, "", "") // a shadow rule limits nothing: no headers advertise it
	}
	if got := n.Metric(t, "rlserver_rule_shadow_denials_total", map[string]string{"rule": "trial"}); got != 2 {
		t.Errorf("rlserver_rule_shadow_denials_total{rule=trial} = %v, want 2", got)
	}
}
