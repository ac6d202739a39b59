package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/rlserver/rlserver/httpapi"
	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/shards"
)

// FuzzForwardAuth: whatever a gateway (or a client through it) puts in the
// query and the headers, /v1/forward-auth answers 200, a denial or a 4xx
// with a JSON error; never a panic or a 5xx.
//
//	go test -run '^$' -fuzz FuzzForwardAuth ./httpapi
func FuzzForwardAuth(f *testing.F) {
	f.Add("tier=free", "/users/1", "203.0.113.7", "u1", "key", "free", "10.0.0.1:1")
	f.Add("deny_status=403&cost=2", "/login?x=1", "1.2.3.4, 127.0.0.1", "", "", "", "127.0.0.1:5")
	f.Add("user_header=&methods=POST", "http://h/a%zz", "bogus", "\x00", "k", "a:b", "[::1]:80")
	f.Add("uri_header=X-U&uri_header=Y", "", ",,,", "", "", "", "pipe")
	store := shards.NewStore(shards.Options{})
	for _, r := range []rules.Rule{loginPerIP, usersFree, keysPerHour} {
		store.SetRule(r)
	}
	h := httpapi.New(httpapi.Config{Checker: store, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	f.Fuzz(func(t *testing.T, query, uri, xff, user, key, tier, peer string) {
		req, err := http.NewRequest("GET", "/v1/forward-auth", nil)
		if err != nil {
			t.Skip()
		}
		req.URL.RawQuery = query
		req.RemoteAddr = peer
		for name, v := range map[string]string{"X-Forwarded-Uri": uri, "X-Forwarded-For": xff, "X-User-Id": user, "X-Api-Key": key, "X-Tier": tier} {
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
	})
}
