// Package rlheader writes the rate-limit response headers that rlserver's
// HTTP API and the client middleware both send, so the two agree:
//
//	X-RateLimit-Limit: 100
//	X-RateLimit-Remaining: 37
//	X-RateLimit-Reset: 1700000100                  (Unix seconds, absolute)
//	RateLimit-Policy: "free-users";q=100;w=60      (when the window is known)
//	RateLimit: "free-users";r=37;t=12              (with its RateLimit-Policy only)
//	Retry-After: 3                                 (only when denied)
//
// RateLimit-Policy and RateLimit are written as
// draft-ietf-httpapi-ratelimit-headers-10 defines them: structured-field
// lists of one item, the policy's name as a string, with the quota q and
// window w (seconds) of the policy, and the remaining quota r and the
// seconds t until the full allowance is back. RateLimit is written only
// beside the RateLimit-Policy that declares the policy it names: a
// decision with no known window (a block, which is no quota) has the
// X-RateLimit-* fields and Retry-After alone. A bucket whose capacity
// differs from its limit per window adds the vendor parameter
// rlserver-burst=<capacity> to its policy.
//
// Every duration is rounded up to whole seconds, so a client that waits as
// told is never early; Retry-After is at least 1.
package rlheader

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Values describe one decision.
type Values struct {
	Allowed    bool
	Limit      int64         // -1: no limit applied, and no headers are written
	Remaining  int64         // requests of cost 1 still allowed now
	RetryAfter time.Duration // when denied: until the request would pass; < 0 never
	ResetAfter time.Duration // until the full allowance is back
	Policy     string        // the policy's name (a rule id, or PolicyName's); "" is "default"
	Window     time.Duration // the policy's window; 0 leaves out RateLimit-Policy and RateLimit
	Quota      int64         // the policy's limit per Window; 0 means Limit
	Now        time.Time     // the decision's time, for X-RateLimit-Reset
}

// Set writes the headers for v into h. A denial that can never pass
// (RetryAfter < 0) gets no Retry-After: there is no truthful value.
func Set(h http.Header, v Values) {
	if v.Limit < 0 {
		return
	}
	limit, remaining := strconv.FormatInt(v.Limit, 10), strconv.FormatInt(v.Remaining, 10)
	reset := strconv.FormatInt(CeilSeconds(v.ResetAfter), 10)
	name := v.Policy
	if name == "" {
		name = "default"
	}
	name = sfString(name)
	h.Set("X-RateLimit-Limit", limit)
	h.Set("X-RateLimit-Remaining", remaining)
	h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilUnix(v.Now.Add(v.ResetAfter)), 10))
	if v.Window > 0 { // RateLimit names only a policy that RateLimit-Policy declares
		h.Set("RateLimit", name+";r="+strconv.FormatInt(max(v.Remaining, 0), 10)+";t="+reset)
		quota := v.Quota
		if quota <= 0 {
			quota = v.Limit
		}
		policy := name + ";q=" + strconv.FormatInt(quota, 10) + ";w=" + strconv.FormatInt(max(CeilSeconds(v.Window), 1), 10)
		if quota != v.Limit {
			policy += ";rlserver-burst=" + limit // a bucket whose capacity is not its limit
		}
		h.Set("RateLimit-Policy", policy)
	}
	if !v.Allowed && v.RetryAfter >= 0 {
		h.Set("Retry-After", strconv.FormatInt(max(1, CeilSeconds(v.RetryAfter)), 10))
	}
}

// PolicyName names the policy of a plain check (RL.CHECK, POST /v1/check),
// which has no rule id, after its parameters: "token-100-per-60s",
// "sliding-20-per-500ms", "token-10-per-1s-burst-50".
func PolicyName(algo string, limit int64, window time.Duration, burst int64) string {
	w := strconv.FormatInt(window.Milliseconds(), 10) + "ms"
	if window%time.Second == 0 {
		w = strconv.FormatInt(int64(window/time.Second), 10) + "s"
	}
	name := strings.ToLower(algo) + "-" + strconv.FormatInt(limit, 10) + "-per-" + w
	if burst > 0 {
		name += "-burst-" + strconv.FormatInt(burst, 10)
	}
	return name
}

// sfString serialises s as a structured-field string (RFC 8941): quoted,
// with '"' and '\' escaped; characters a string may not hold (controls,
// non-ASCII) become '?'.
func sfString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// CeilSeconds rounds d up to whole seconds; negative durations give 0.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// ceilUnix returns t in Unix seconds, rounded up.
func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}
