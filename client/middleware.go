package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/rlserver/rlserver/internal/rlheader"
	"github.com/rlserver/rlserver/internal/urlpath"
)

// FailMode says what the middleware does when rlserver fails to answer in
// time. There is no default: the choice is the operator's.
type FailMode int

const (
	// FailOpen lets the request through unlimited.
	FailOpen FailMode = 1 + iota
	// FailClosed answers 503 Service Unavailable with Retry-After: 1.
	FailClosed
	// FailGrace decides locally, for at most GraceFor from the first
	// unanswered check, with a token bucket per rule and identifier at
	// GraceShare of the rule's limit and capacity, from the rules last
	// learned from rlserver; then GraceThen (FailOpen or FailClosed)
	// decides until rlserver answers again. See MiddlewareConfig.
	FailGrace
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
	// Target names the request for rule matching. By default it is the
	// path as the client wrote it, decoded once and cleaned as rlserver's
	// forward auth cleans a target ("//a", "/x/../a" and "/%2e%2e/a" are
	// "/a"), so that no spelling a backend serves as a limited path misses
	// its rule; a path that backends may read as different paths (an
	// encoded '/', a backslash, a control character, a bad or double
	// escape) is answered 400 and goes no further.
	Target func(*http.Request) string
	// Tier names the caller's tier; default: "default".
	Tier func(*http.Request) string
	// Identity of the caller: see Identify.
	Identity Identity
	// Cost of a request; default 1.
	Cost func(*http.Request) int64
	// OnError, if set, is told of every failed check (for logs, metrics).
	OnError func(*http.Request, error)

	// The grace mode (FailGrace). While rlserver does not answer, each
	// request is still asked of it first (within Timeout), so that
	// decisions go back to it as soon as it answers.
	//
	// GraceFor bounds the local decisions of an episode of
	// unavailability, from its first unanswered check (default
	// DefaultGraceFor, 30 s); after it GraceThen (FailOpen or FailClosed,
	// required) decides until rlserver answers.
	GraceFor  time.Duration
	GraceThen FailMode
	// GraceInstances is the number of gateway processes that share
	// rlserver's limits (default 1). GraceShare is the share of each
	// rule's limit and capacity that this process admits per identifier
	// in grace (default 1/GraceInstances): its bucket holds
	// max(1, floor(GraceShare × capacity)) and refills
	// max(1, floor(GraceShare × limit)) per window.
	GraceInstances int
	GraceShare     float64
	// GraceRules is where the rules are learned (RL.RULE.LIST): default
	// the Checker, which must then be a RuleLister (*Client is). They are
	// fetched when the middleware is made and again, in the background,
	// after a check rlserver answered once GraceRefresh (default
	// DefaultGraceRefresh, 10 s) has passed since the last fetch; a
	// process that never learned them decides by GraceThen.
	GraceRules   RuleLister
	GraceRefresh time.Duration
	// GraceMaxKeys bounds the local buckets (default
	// DefaultGraceMaxKeys); a new identifier beyond it, once the full
	// buckets are dropped, is decided by GraceThen.
	GraceMaxKeys int
	// OnGrace, if set, is told of every decision made without rlserver,
	// locally or by GraceThen (for metrics).
	OnGrace func(*http.Request, GraceDecision)
	// Logger receives the grace mode's lines: one when an episode begins,
	// one when GraceFor runs out, one when rlserver answers again (with
	// the episode's counts); nil is slog.Default().
	Logger *slog.Logger
	// Clock returns the current time; nil is time.Now. The grace mode
	// reads it for its buckets and episodes.
	Clock func() time.Time

	grace *grace // FailGrace's state
}

// ErrFailMode is returned by Middleware when FailMode is not set.
var ErrFailMode = errors.New("client: MiddlewareConfig.FailMode must be FailOpen, FailClosed or FailGrace")

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
	if cfg.FailMode != FailOpen && cfg.FailMode != FailClosed && cfg.FailMode != FailGrace {
		return nil, ErrFailMode
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.FailMode == FailGrace {
		g, err := newGrace(&cfg)
		if err != nil {
			return nil, err
		}
		cfg.grace = g
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
	target, err := cfg.target(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), cfg.Timeout)
	start := cfg.Clock()
	tier, ids, cost := cfg.Tier(r), cfg.Identity.Identify(r), cfg.Cost(r)
	res, err := cfg.Checker.CheckRules(ctx, target, tier, ids, cost)
	cancel()
	if err == nil {
		if cfg.grace != nil {
			cfg.grace.answered(cfg.Clock())
		}
		answer(w, r, next, res, start)
		return
	}
	if cfg.OnError != nil {
		cfg.OnError(r, err)
	}
	mode := cfg.FailMode
	if cfg.grace != nil {
		now := cfg.Clock()
		if res, ok := cfg.grace.decide(r, target, tier, ids, cost, now, err); ok {
			answer(w, r, next, res, now)
			return
		}
		mode = cfg.GraceThen
	}
	if mode == FailOpen {
		next.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "rate limiter unavailable"})
}

// target returns r's target for the rules: Target's, else the path the
// client wrote, decoded once and cleaned (internal/urlpath).
func (cfg *MiddlewareConfig) target(r *http.Request) (string, error) {
	if cfg.Target != nil {
		return cfg.Target(r), nil
	}
	raw := r.RequestURI
	if raw == "" { // a request made in the process, not read from a connection
		raw = r.URL.RequestURI()
	}
	t, err := urlpath.Target(raw)
	if err != nil {
		return "", fmt.Errorf("path %q: %w: refused, since backends may read it as different paths", raw, err)
	}
	return t, nil
}

// answer carries out the decision res, made at now: the request goes on
// to next with the rate-limit headers, or is answered 429.
func answer(w http.ResponseWriter, r *http.Request, next http.Handler, res Result, now time.Time) {
	h := rlheader.Values{
		Allowed: res.Allowed, Limit: res.Limit, Remaining: res.Remaining,
		RetryAfter: res.RetryAfter, ResetAfter: res.ResetAfter, Now: now,
		Policy: res.Policy, Quota: res.Quota, Window: res.Window,
	}
	if res.Shadow {
		h.Limit = -1 // a shadow rule limits nothing: advertise no limit
	}
	rlheader.Set(w.Header(), h)
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
