package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testserver"
)

func TestBlocksEndpoints(t *testing.T) {
	n, clk := start(t, testserver.Options{AdminToken: "adm", RequirePass: "pw"})
	u := n.URL + "/v1/blocks"
	put := `{"seconds":60,"reason":"scraping"}`
	// Admin only: no token, or the check token, are refused.
	expect(t, "list, no token", do(t, "GET", u, "", ""), 401, "listing blocks needs the admin token")
	expect(t, "list, check token", do(t, "GET", u, "", "pw"), 401)
	expect(t, "put, check token", do(t, "PUT", u+"/ip/1.2.3.4", put, "pw"), 401, "blocking an identifier needs the admin token")
	expect(t, "delete, no token", do(t, "DELETE", u+"/ip/1.2.3.4", "", ""), 401)
	expect(t, "list empty", do(t, "GET", u, "", "adm"), 200, "[]")

	expect(t, "put", do(t, "PUT", u+"/ip/1.2.3.4", put, "adm"), 200,
		`{"identifier":"ip=1.2.3.4","ttl_ms":60000,"reason":"scraping"}`)
	expect(t, "put ipv6", do(t, "PUT", u+"/ip/2001:db8::1", `{"seconds":5}`, "adm"), 200, `"identifier":"ip=2001:db8::1"`)
	clk.Advance(10 * time.Second)
	expect(t, "list", do(t, "GET", u, "", "adm"), 200,
		`[{"identifier":"ip=1.2.3.4","ttl_ms":50000,"reason":"scraping"}]`) // the 5 s one expired

	// A rules check naming the identifier is denied by the block, over
	// /v1/checkrules and forward auth alike.
	r := do(t, "POST", n.URL+"/v1/checkrules", `{"target":"/x","tier":"free","ids":{"ip":"1.2.3.4","user":"u1"}}`, "pw")
	expect(t, "checkrules blocked", r, 429, `"allowed":false`, `"limit":0`, `"remaining":0`, `"retry_after_ms":50000`, `"rule":"block:ip=1.2.3.4"`)
	if got := r.header.Get("Retry-After"); got != "50" {
		t.Errorf("Retry-After %q, want 50", got)
	}
	// A block is no quota: no RateLimit naming a policy that no
	// RateLimit-Policy declares (it read "default";r=0;t=50).
	if rl, pol := r.header.Get("RateLimit"), r.header.Get("RateLimit-Policy"); rl != "" || pol != "" {
		t.Errorf("blocked: RateLimit %q, RateLimit-Policy %q; want neither", rl, pol)
	}
	fr, body := testserver.Get(t, n.URL+"/v1/forward-auth", "X-Forwarded-For", "1.2.3.4", "X-Forwarded-Uri", "/x",
		"Authorization", "Bearer pw")
	if fr.StatusCode != 429 || !strings.Contains(body, `"rule":"block:ip=1.2.3.4"`) || fr.Header.Get("Retry-After") != "50" {
		t.Errorf("forward auth: %d %q Retry-After %q", fr.StatusCode, body, fr.Header.Get("Retry-After"))
	}

	expect(t, "delete", do(t, "DELETE", u+"/ip/1.2.3.4", "", "adm"), 204)
	expect(t, "delete again", do(t, "DELETE", u+"/ip/1.2.3.4", "", "adm"), 404, `the identifier is not blocked: \"ip=1.2.3.4\"`)
	expect(t, "checkrules after", do(t, "POST", n.URL+"/v1/checkrules", `{"target":"/x","tier":"free","ids":{"ip":"1.2.3.4"}}`, "pw"), 200)
	expect(t, "list after", do(t, "GET", u, "", "adm"), 200, "[]")
}

func TestBlocksEndpointsBadInput(t *testing.T) {
	n, _ := start(t, testserver.Options{})
	u := n.URL + "/v1/blocks"
	for _, tt := range []struct{ path, body, want string }{
		{"/ip/1.2.3.4", `{"reason":"x"}`, `seconds: missing`},
		{"/ip/1.2.3.4", `{"seconds":0}`, `seconds: must be a whole number of seconds from 1`},
		{"/ip/1.2.3.4", `{"seconds":"60"}`, `seconds: want an integer`},
		{"/ip/1.2.3.4", `{"seconds":60,"why":"x"}`, `why: unknown field`},
		{"/ip/1.2.3.4", `{"seconds":60,"reason":"` + strings.Repeat("r", 300) + `"}`, `reason: must be at most 256 bytes`},
		{"/i%20p/1.2.3.4", `{"seconds":60}`, `identifier: must be type=value`},
		{"/ip/1.2.3.4", `{"seconds":60`, `malformed JSON`},
	} {
		expect(t, "put "+tt.path+" "+tt.body, do(t, "PUT", u+tt.path, tt.body, ""), 400, tt.want)
	}
	expect(t, "nothing was blocked", do(t, "GET", u, "", ""), 200, "[]")
	expect(t, "post", do(t, "POST", u+"/ip/1", `{"seconds":1}`, ""), 405, "use PUT, DELETE")
	expect(t, "delete collection", do(t, "DELETE", u, "", ""), 405, "use GET")
}
