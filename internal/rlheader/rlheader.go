// Package rlheader writes the rate-limit response headers that rlserver's
// HTTP API and the client middleware both send, so the two agree:
//
//	X-RateLimit-Limit: 100
//	X-RateLimit-Remaining: 37
//	X-RateLimit-Reset: 1700000100          (Unix seconds, absolute)
//	RateLimit-Policy: 100;w=60             (IETF draft; when the window is known;
//	                                        ";burst=N" for a bucket of capacity N)
//	RateLimit: limit=100, remaining=37, reset=12
//	Retry-After: 3                         (only when denied)
//
// Every duration is rounded up to whole seconds, so a client that waits as
// told is never early; Retry-After is at least 1.
package rlheader

import (
	"net/http"
	"strconv"
	"time"
)

// Values describe one decision.
type Values struct {
	Allowed    bool
	Limit      int64         // -1: no limit applied, and no headers are written
	Remaining  int64         // requests of cost 1 still allowed now
	RetryAfter time.Duration // when denied: until the request would pass; < 0 never
	ResetAfter time.Duration // until the full allowance is back
	Window     time.Duration // the policy's window; 0 leaves out RateLimit-Policy
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
	reset := CeilSeconds(v.ResetAfter)
	h.Set("X-RateLimit-Limit", limit)
	h.Set("X-RateLimit-Remaining", remaining)
	h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilUnix(v.Now.Add(v.ResetAfter)), 10))
	h.Set("RateLimit", "limit="+limit+", remaining="+remaining+", reset="+strconv.FormatInt(reset, 10))
	if v.Window > 0 {
		policy := strconv.FormatInt(max(v.Quota, 0), 10)
		if v.Quota <= 0 {
			policy = limit
		}
		policy += ";w=" + strconv.FormatInt(CeilSeconds(v.Window), 10)
		if v.Quota > 0 && v.Quota != v.Limit {
			policy += ";burst=" + limit // a bucket whose capacity is not its limit
		}
		h.Set("RateLimit-Policy", policy)
	}
	if !v.Allowed && v.RetryAfter >= 0 {
		h.Set("Retry-After", strconv.FormatInt(max(1, CeilSeconds(v.RetryAfter)), 10))
	}
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
