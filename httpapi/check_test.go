package httpapi_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testserver"
)

// header checks that r has header name with value want.
func header(t *testing.T, r reply, name, want string) {
	t.Helper()
	if got := r.header.Get(name); got != want {
		t.Errorf("%s: %q, want %q", name, got, want)
	}
}

func TestCheck200Then429WithHeaders(t *testing.T) {
	n, _ := start(t, testserver.Options{})
	body := `{"key":"user:1","algo":"fixed","limit":3,"window":"10s"}`
	for i := 1; i <= 3; i++ {
		r := do(t, "POST", n.URL+"/v1/check", body, "")
		expect(t, "allowed", r, 200, `"allowed":true`, `"remaining":`+strconv.Itoa(3-i))
		header(t, r, "X-RateLimit-Limit", "3")
		header(t, r, "X-RateLimit-Remaining", strconv.Itoa(3-i))
		// The window ends at t0's next multiple of 10 s: 4.7 s away.
		header(t, r, "X-RateLimit-Reset", "1700000010")
		// draft-ietf-httpapi-ratelimit-headers-10, the policy named after
		// the parameters.
		header(t, r, "RateLimit-Policy", `"fixed-3-per-10s";q=3;w=10`)
		header(t, r, "RateLimit", `"fixed-3-per-10s";r=`+strconv.Itoa(3-i)+";t=5")
		header(t, r, "Retry-After", "")
	}
	r := do(t, "POST", n.URL+"/v1/check", body, "")
	expect(t, "denied", r, 429, `"allowed":false`, `"limit":3`, `"remaining":0`, `"retry_after_ms":4700`, `"reset_after_ms":4700`)
	header(t, r, "Retry-After", "5") // 4.7 s rounded up: never early
	header(t, r, "X-RateLimit-Remaining", "0")
	header(t, r, "X-RateLimit-Reset", "1700000010")
	// Cost 0 peeks; a bucket reports its capacity and its burst in the policy.
	r = do(t, "POST", n.URL+"/v1/check", `{"key":"b","algo":"token","limit":10,"window":"1m","burst":20,"cost":0}`, "")
	expect(t, "peek", r, 200, `"remaining":20`)
	header(t, r, "RateLimit-Policy", `"token-10-per-60s-burst-20";q=10;w=60;rlserver-burst=20`)
	header(t, r, "RateLimit", `"token-10-per-60s-burst-20";r=20;t=0`)
	// A cost above the capacity can never pass: no Retry-After.
	r = do(t, "POST", n.URL+"/v1/check", `{"key":"c","algo":"fixed","limit":2,"window":"1s","cost":3}`, "")
	expect(t, "never", r, 429, `"retry_after_ms":-1`)
	header(t, r, "Retry-After", "")
}

// TestRetryAfterIsNeverEarly: on every 429, Retry-After is at least 1 and
// the request passes once that many seconds have gone by, not before
// X-RateLimit-Reset's window.
func TestRetryAfterIsNeverEarly(t *testing.T) {
	n, clk := start(t, testserver.Options{})
	for _, algo := range []string{"fixed", "sliding", "log", "token", "leaky", "gcra"} {
		body := `{"key":"r:` + algo + `","algo":"` + algo + `","limit":2,"window":"3s"}`
		denied := 0
		for i := 0; i < 40 && denied < 3; i++ {
			r := do(t, "POST", n.URL+"/v1/check", body, "")
			now := time.Unix(0, clk.Now())
			// The full allowance is back within one window, except for
			// sliding: a request's weight fades over the window after its
			// own, so up to two windows.
			window := 3 * time.Second
			if algo == "sliding" {
				window *= 2
			}
			reset, _ := strconv.ParseInt(r.header.Get("X-RateLimit-Reset"), 10, 64)
			if reset < now.Unix() || reset > now.Add(window).Unix()+1 {
				t.Errorf("%s: X-RateLimit-Reset %d not within %v of %d", algo, reset, window, now.Unix())
			}
			if r.status == 200 {
				clk.Advance(100 * time.Millisecond)
				continue
			}
			denied++
			secs, err := strconv.Atoi(r.header.Get("Retry-After"))
			if r.status != 429 || err != nil || secs < 1 {
				t.Fatalf("%s: status %d, Retry-After %q", algo, r.status, r.header.Get("Retry-After"))
			}
			ms, _ := r.json(t)["retry_after_ms"].(float64)
			clk.Advance(time.Duration(ms)*time.Millisecond - time.Millisecond)
			expect(t, algo+" 1 ms before retry_after_ms", do(t, "POST", n.URL+"/v1/check", body, ""), 429)
			clk.Advance(time.Duration(secs)*time.Second - time.Duration(ms-1)*time.Millisecond)
			expect(t, algo+" after Retry-After", do(t, "POST", n.URL+"/v1/check", body, ""), 200)
		}
		if denied < 3 {
			t.Errorf("%s: only %d denials", algo, denied)
		}
	}
}

func TestCheckValidation(t *testing.T) {
	n, _ := start(t, testserver.Options{})
	for _, tt := range []struct{ body, want string }{
		{`{"algo":"fixed","limit":3,"window":"10s"}`, `key: want 1 to 1024 bytes`},
		{`{"key":"k","algo":"nope","limit":3,"window":"10s"}`, `algo: must be one of`},
		{`{"key":"k","algo":"fixed","limit":0,"window":"10s"}`, `limit: want a positive integer`},
		{`{"key":"k","algo":"log","limit":10001,"window":"10s"}`, `--max-log-limit`},
		{`{"key":"k","algo":"fixed","limit":3,"window":"0"}`, `window: must be a duration`},
		{`{"key":"k","algo":"fixed","limit":3,"window":10}`, `window: want a string, got number`},
		{`{"key":"k","algo":"fixed","limit":"3","window":"10s"}`, `limit: want an integer, got string`},
		{`{"key":"k","algo":"fixed","limit":3,"window":"10s","burst":4}`, `burst: must be`},
		{`{"key":"k","algo":"fixed","limit":3,"window":"10s","cost":-1}`, `cost: want a non-negative integer`},
		{`{"key":"k","algo":"fixed","limit":3,"window":"10s","extra":1}`, `extra: unknown field`},
		{`{"key":"k"`, `malformed JSON`},
		{`{"key":"k"} x`, `malformed JSON`},
	} {
		expect(t, tt.body, do(t, "POST", n.URL+"/v1/check", tt.body, ""), 400, tt.want)
	}
	do(t, "POST", n.URL+"/v1/check", `{"key":"k","algo":"fixed","limit":3,"window":"10s"}`, "")
	expect(t, "wrong type", do(t, "POST", n.URL+"/v1/check", `{"key":"k","algo":"token","limit":3,"window":"10s"}`, ""),
		409, "WRONGTYPE")
	expect(t, "GET", do(t, "GET", n.URL+"/v1/check", "", ""), 405, "use POST")
	for _, tt := range []struct{ body, want string }{
		{`{"target":"/a","tier":"free"}`, `ids: want at least one identifier`},
		{`{"target":"/a","tier":"free","ids":{"user":""}}`, `ids.user: want a non-empty type`},
		{`{"target":"/a","tier":"free","ids":{"user":"u"},"cost":-2}`, `cost: want a non-negative integer`},
		{`{"target":"/a","tier":"free","ids":["u"]}`, `ids: want an object, got array`},
		{`{"target":"/a","tier":"free","ids":{"user":5}}`, `ids: want a string, got number`},
		{`{"target":"/a","tier":"free","ids":{"user":"u"},"tiers":"x"}`, `tiers: unknown field`},
	} {
		expect(t, tt.body, do(t, "POST", n.URL+"/v1/checkrules", tt.body, ""), 400, tt.want)
	}
}

func TestCheckRules(t *testing.T) {
	n, _ := start(t, testserver.Options{})
	expect(t, "rule", do(t, "POST", n.URL+"/rules",
		`{"id":"users","target":"/users/*","tier":"free","key_type":"user","algo":"fixed","limit":2,"window":"10s"}`, ""), 201)
	expect(t, "rule", do(t, "POST", n.URL+"/rules",
		`{"id":"ips","target":"*","tier":"*","key_type":"ip","algo":"fixed","limit":100,"window":"1m"}`, ""), 201)
	q := `{"target":"/users/7","tier":"free","ids":{"user":"u1","ip":"1.2.3.4"}}`
	r := do(t, "POST", n.URL+"/v1/checkrules", q, "")
	expect(t, "first", r, 200, `"allowed":true`, `"remaining":1`, `"rule":"users"`)
	header(t, r, "RateLimit-Policy", `"users";q=2;w=10`)
	header(t, r, "RateLimit", `"users";r=1;t=5`)
	header(t, r, "X-RateLimit-Limit", "2")
	expect(t, "second", do(t, "POST", n.URL+"/v1/checkrules", q, ""), 200, `"remaining":0`)
	r = do(t, "POST", n.URL+"/v1/checkrules", q, "")
	expect(t, "third", r, 429, `"allowed":false`, `"rule":"users"`, `"retry_after_ms":4700`)
	header(t, r, "Retry-After", "5")
	// The denied check charged nothing: ips has 100-2 left.
	r = do(t, "POST", n.URL+"/v1/checkrules", `{"target":"/other","tier":"free","ids":{"ip":"1.2.3.4"},"cost":0}`, "")
	expect(t, "ips", r, 200, `"remaining":98`, `"rule":"ips"`)
	r = do(t, "POST", n.URL+"/v1/checkrules", `{"target":"/x","tier":"pro","ids":{"apikey":"k"}}`, "")
	expect(t, "no rule", r, 200, `{"allowed":true,"limit":-1,"remaining":-1,"retry_after_ms":0,"reset_after_ms":0,"rule":null}`)
	for _, h := range []string{"X-RateLimit-Limit", "RateLimit", "RateLimit-Policy", "Retry-After"} {
		header(t, r, h, "")
	}
}

func TestHealthReadyMetricsAndUnknown(t *testing.T) {
	n, _ := start(t, testserver.Options{})
	expect(t, "healthz", do(t, "GET", n.URL+"/healthz", "", ""), 200, `"ok"`)
	expect(t, "readyz", do(t, "GET", n.URL+"/readyz", "", ""), 200, `"ready"`)
	expect(t, "unknown", do(t, "GET", n.URL+"/nope", "", ""), 404, `no such endpoint: GET /nope`)
	do(t, "POST", n.URL+"/v1/check", `{"key":"k","algo":"fixed","limit":3,"window":"10s"}`, "")
	r := do(t, "GET", n.URL+"/metrics", "", "")
	for _, want := range []string{"rlserver_rules 0", `rlserver_http_requests_total{code="200",handler="check"} 1`,
		"rlserver_check_duration_seconds_bucket", "rlserver_state_bytes"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
