package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/rlserver/rlserver/internal/rlheader"
)

// FailMode says what the middleware does when rlserver fails to answer in
// time. There is no default: the choice is the operator's.
type FailMode int

const (
	// FailOpen lets the request through unlimited.
	FailOpen FailMode = 1 + iota
	// FailClosed answers 503 Service Unavailable with Retry-After: 1.
	FailClosed
)

// RuleChecker is what the middleware asks; *Client satisfies it.
type RuleChecker interface {
	CheckRules(ctx context.Context, target, tier string, ids map[string]string, cost int64) (Result, error)
}

// DefaultTimeout bounds a check when MiddlewareConfig.Timeout is zero.
const DefaultTimeout = 100 * time.Millisecond

// MiddlewareConfig configures Middleware. Checker and FailMode are
// required.
type MiddlewareConfig struct {
	Checker  RuleChecker
	FailMode FailMode
	// Timeout bounds each check (default DefaultTimeout). The Checker must
	// honour its context: with Client, build the go-redis client with
	// ContextTimeoutEnabled (Dial does).
	Timeout time.Duration
	// Target names the request for rule matching; default: the URL path.
	Target func(*http.Request) string
	// Tier names the caller's tier; default: "default".
	Tier func(*http.Request) string
	// Identity of the caller: see Identify.
	Identity Identity
	// Cost of a request; default 1.
	Cost func(*http.Request) int64
	// OnError, if set, is told of every failed check (for logs, metrics).
	OnError func(*http.Request, error)
}

// ErrFailMode is returned by Middleware when FailMode is not set.
var ErrFailMode = errors.New("client: MiddlewareConfig.FailMode must be FailOpen or FailClosed")

// Middleware returns net/http middleware that checks each request against
// rlserver's rules before passing it on. An allowed request gets the
// rate-limit headers of its most restrictive rule; a denied one is answered
// 429 with those headers, Retry-After and a JSON body; a request that no
// rule matches passes without headers. When the check fails or times out,
// FailMode decides.
func Middleware(cfg MiddlewareConfig) (func(http.Handler) http.Handler, error) {
	if cfg.Checker == nil {
		return nil, errors.New("client: MiddlewareConfig.Checker is nil")
	}
	if cfg.FailMode != FailOpen && cfg.FailMode != FailClosed {
		return nil, ErrFailMode
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Target == nil {
		cfg.Target = func(r *http.Request) string { return r.URL.Path }
	}
	if cfg.Tier == nil {
		cfg.Tier = func(*http.Request) string { return "default" }
	}
	if cfg.Cost == nil {
		cfg.Cost = func(*http.Request) int64 { return 1 }
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			cfg.serve(w, r, next)
		})
	}, nil
}

func (cfg *MiddlewareConfig) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	ctx, cancel := context.WithTimeout(r.Context(), cfg.Timeout)
	start := time.Now()
	res, err := cfg.Checker.CheckRules(ctx, cfg.Target(r), cfg.Tier(r), cfg.Identity.Identify(r), cfg.Cost(r))
	cancel()
	if err != nil {
		if cfg.OnError != nil {
			cfg.OnError(r, err)
		}
		if cfg.FailMode == FailOpen {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "rate limiter unavailable"})
		return
	}
	rlheader.Set(w.Header(), rlheader.Values{
		Allowed: res.Allowed, Limit: res.Limit, Remaining: res.Remaining,
		RetryAfter: res.RetryAfter, ResetAfter: res.ResetAfter, Now: start,
		Policy: res.Policy, Quota: res.Quota, Window: res.Window,
	})
	if res.Allowed {
		next.ServeHTTP(w, r)
		return
	}
	writeJSON(w, http.StatusTooManyRequests, deniedBody{
		Error: "rate limit exceeded", Rule: res.RuleID, Limit: res.Limit, Remaining: res.Remaining,
		RetryAfterMs: res.RetryAfter.Milliseconds(), ResetAfterMs: res.ResetAfter.Milliseconds(),
	})
}

// deniedBody is the JSON of a 429.
type deniedBody struct {
	Error        string `json:"error"`
	Rule         string `json:"rule"`
	Limit        int64  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	RetryAfterMs int64  `json:"retry_after_ms"`
	ResetAfterMs int64  `json:"reset_after_ms"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
