package rlheader

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestSet(t *testing.T) {
	now := time.Unix(1_700_000_000, 500_000_000)
	for _, tt := range []struct {
		v    Values
		want map[string]string
	}{
		{Values{Allowed: true, Limit: 100, Remaining: 37, ResetAfter: 11500 * time.Millisecond, Policy: "free-users",
			Window: time.Minute, Now: now}, map[string]string{
			"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "37", "X-RateLimit-Reset": "1700000012",
			"RateLimit": `"free-users";r=37;t=12`, "RateLimit-Policy": `"free-users";q=100;w=60`, "Retry-After": ""}},
		// A bucket of capacity 50 refilled at 10 per second; a sub-second
		// window rounds up to 1 (w is a whole, non-zero number of seconds).
		{Values{Limit: 50, RetryAfter: 100 * time.Millisecond, ResetAfter: 5 * time.Second, Policy: "b",
			Window: 500 * time.Millisecond, Quota: 10, Now: now}, map[string]string{
			"RateLimit": `"b";r=0;t=5`, "RateLimit-Policy": `"b";q=10;w=1;rlserver-burst=50`, "Retry-After": "1"}},
		// No window: no policy declared, so no RateLimit naming one (a
		// block's 429); never: no Retry-After.
		{Values{Limit: 5, Remaining: 5, RetryAfter: -1, Now: now}, map[string]string{
			"RateLimit": "", "RateLimit-Policy": "", "X-RateLimit-Remaining": "5", "Retry-After": ""}},
		{Values{Limit: 0, RetryAfter: 600 * time.Second, ResetAfter: 600 * time.Second, Now: now}, map[string]string{
			"RateLimit": "", "RateLimit-Policy": "", "X-RateLimit-Limit": "0", "Retry-After": "600"}},
		// No name: "default", declared and named alike.
		{Values{Limit: 5, Remaining: 4, Window: time.Second, Now: now}, map[string]string{
			"RateLimit": `"default";r=4;t=0`, "RateLimit-Policy": `"default";q=5;w=1`}},
		{Values{Limit: -1, Policy: "x", Window: time.Second}, map[string]string{"RateLimit": "", "X-RateLimit-Limit": ""}},
		{Values{Limit: 1, Policy: "a\"b\\c\né", Window: time.Second, Now: now}, map[string]string{"RateLimit": `"a\"b\\c???";r=0;t=0`}},
	} {
		h := http.Header{}
		Set(h, tt.v)
		for name, want := range tt.want {
			if got := h.Get(name); got != want {
				t.Errorf("%+v: %s = %q, want %q", tt.v, name, got, want)
			}
		}
	}
}

func TestPolicyName(t *testing.T) {
	for _, tt := range []struct {
		algo         string
		limit, burst int64
		window       time.Duration
		want         string
	}{
		{"token", 100, 0, time.Minute, "token-100-per-60s"},
		{"SLIDING", 20, 0, 500 * time.Millisecond, "sliding-20-per-500ms"},
		{"token", 10, 50, time.Second, "token-10-per-1s-burst-50"},
	} {
		if got := PolicyName(tt.algo, tt.limit, tt.window, tt.burst); got != tt.want {
			t.Errorf("PolicyName(%q, %d, %v, %d) = %q, want %q", tt.algo, tt.limit, tt.window, tt.burst, got, tt.want)
		}
	}
}

// TestRateLimitNamesADeclaredPolicy: whatever the values, a RateLimit
// field names the policy of the RateLimit-Policy field beside it.
func TestRateLimitNamesADeclaredPolicy(t *testing.T) {
	for _, v := range []Values{
		{Limit: 0, RetryAfter: time.Minute, ResetAfter: time.Minute},
		{Limit: 3, Remaining: 1, Policy: "p"},
		{Limit: 3, Remaining: 1, Policy: "p", Window: time.Second},
		{Limit: 3, Remaining: 1, Window: time.Second},
	} {
		h := http.Header{}
		Set(h, v)
		rl, pol := h.Get("RateLimit"), h.Get("RateLimit-Policy")
		if rl == "" {
			continue
		}
		name, _, _ := strings.Cut(rl, ";")
		if pname, _, _ := strings.Cut(pol, ";"); pol == "" || pname != name {
			t.Errorf("%+v: RateLimit %q names a policy RateLimit-Policy %q does not declare", v, rl, pol)
		}
	}
}
