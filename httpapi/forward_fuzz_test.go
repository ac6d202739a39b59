package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/httpapi"
	"github.com/rlserver/rlserver/internal/urlpath"
	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/shards"
)

// FuzzForwardAuth: whatever a gateway (or a client through it) puts in the
// auth URL (query, and the path after /v1/forward-auth as Envoy sends it)
// and the headers, /v1/forward-auth answers 200, a denial or a 4xx with a
// JSON error; never a panic or a 5xx. The target cleaner is idempotent:
// what it makes of a URI it makes again of that result, escaped; and a URI
// it refuses is refused by the endpoint with a 400.
//
//	go test -run '^$' -fuzz FuzzForwardAuth ./httpapi
func FuzzForwardAuth(f *testing.F) {
	f.Add("tier=free", "", "/users/1", "", "203.0.113.7", "u1", "key", "free", "10.0.0.1:1")
	f.Add("deny_status=403&cost=2", "", "/login?x=1", "", "1.2.3.4, 127.0.0.1", "", "", "", "127.0.0.5:5")
	f.Add("user_header=&methods=POST", "", "http://h/a%zz", "", "bogus", "\x00", "k", "a:b", "[::1]:80")
	f.Add("uri_header=X-U&uri_header=Y", "", "", "", ",,,", "", "", "", "pipe")
	f.Add("", "", "/x/../login", "//login", "2001:db8::1%eth0", "", "", "", "127.0.0.1:9")
	f.Add("", "", "/%2e%2e/login", "/a%2fb", "", "", "", "", "127.0.0.1:9")
	f.Add("methods=NONE", "/x/%2e%2e/login", "", "", "", "", "", "", "127.0.0.1:9")
	f.Add("", "/%252e/login", "/login/.", "", "::ffff:1.2.3.4", "", "", "", "[fe80::1%2]:1")
	store := shards.NewStore(shards.Options{})
	for _, r := range []rules.Rule{loginPerIP, usersFree, keysPerHour} {
		store.SetRule(r)
	}
	h := httpapi.New(httpapi.Config{Checker: store, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	f.Fuzz(func(t *testing.T, query, envoy, uri, orig, xff, user, key, tier, peer string) {
		target, cleanErr := urlpath.Target(uri)
		if cleanErr == nil {
			checkCleaned(t, uri, target)
		}
		if envoy != "" && envoy[0] != '/' {
			envoy = "/" + envoy // Envoy's path_prefix meets a path
		}
		raw := "/v1/forward-auth" + envoy
		if query != "" {
			raw += "?" + query
		}
		u, err := url.ParseRequestURI(raw)
		if err != nil || strings.ContainsAny(raw, " \r\n") {
			t.Skip() // not a request line Go's server would hand over
		}
		req := &http.Request{Method: "GET", URL: u, RequestURI: raw, Header: http.Header{}, RemoteAddr: peer}
		for name, v := range map[string]string{"X-Forwarded-Uri": uri, "X-Original-URI": orig, "X-Forwarded-For": xff,
			"X-User-Id": user, "X-Api-Key": key, "X-Tier": tier} {
			if v != "" {
				req.Header[name] = []string{v}
			}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch {
		case w.Code == 200 || w.Code == 429 || w.Code == 403:
		case w.Code == 400:
			var body struct{ Error string }
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error == "" {
				t.Fatalf("400 without a JSON error: %q", w.Body.String())
			}
		default:
			t.Fatalf("status %d: %s", w.Code, w.Body.String())
		}
		if cleanErr != nil && uri != "" && envoy == "" && query == "" && w.Code != 400 {
			t.Fatalf("X-Forwarded-Uri %q refused by the cleaner (%v), answered %d", uri, cleanErr, w.Code)
		}
	})
}

// checkCleaned fails t unless target, what urlpath.Target made of uri, is
// clean (no empty or dot segment; Clean leaves it as it is) and comes back
// the same from itself escaped: the cleaner needs one pass, and a second
// (a gateway that cleans, then rlserver) changes nothing.
func checkCleaned(t *testing.T, uri, target string) {
	t.Helper()
	if !strings.HasPrefix(target, "/") || strings.Contains(target, "//") || urlpath.Clean(target) != target {
		t.Fatalf("Target(%q) = %q: not clean (Clean: %q)", uri, target, urlpath.Clean(target))
	}
	for _, seg := range strings.Split(target[1:], "/") {
		if seg == "." || seg == ".." {
			t.Fatalf("Target(%q) = %q: a dot segment", uri, target)
		}
	}
	escaped := strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(target)
	if again, err := urlpath.Target(escaped); err != nil || again != target {
		t.Fatalf("Target(%q) = %q, but Target(%q) = %q, %v", uri, target, escaped, again, err)
	}
}
