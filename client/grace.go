package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/rules"
)

// Defaults of the grace mode (FailGrace).
const (
	// DefaultGraceFor bounds an episode's local decisions.
	DefaultGraceFor = 30 * time.Second
	// DefaultGraceRefresh is how often the rules are fetched again while
	// rlserver answers.
	DefaultGraceRefresh = 10 * time.Second
	// DefaultGraceMaxKeys bounds the local buckets of one process.
	DefaultGraceMaxKeys = 100_000
)

// RuleLister lists the server's rules; *Client satisfies it with
// RL.RULE.LIST. FailGrace learns the rules it decides with from it.
type RuleLister interface {
	Rules(ctx context.Context) ([]rules.Rule, error)
}

// GraceDecision describes one decision the middleware made without
// rlserver, for MiddlewareConfig.OnGrace.
type GraceDecision struct {
	Allowed bool
	// Local is true for a decision of the local buckets (within GraceFor
	// and with rules learned); false for one made by GraceThen.
	Local bool
	// RuleID is the local rule that decided ("" when none matched, or
	// GraceThen decided).
	RuleID string
	// Episode is the time since rlserver stopped answering.
	Episode time.Duration
}

// ErrGraceThen is returned by Middleware for FailGrace without GraceThen.
var ErrGraceThen = errors.New("client: FailGrace needs MiddlewareConfig.GraceThen: FailOpen or FailClosed, what to do once GraceFor has passed")

// grace is FailGrace's state: the rules last learned, the local buckets
// and the current episode of unavailability. It is safe for concurrent
// use.
type grace struct {
	cfg      *MiddlewareConfig
	share    float64
	rules    atomic.Pointer[rules.Set] // nil until first learned
	fetched  atomic.Int64              // Unix ns of the last successful fetch (cfg.Clock)
	fetching atomic.Bool

	mu       sync.Mutex
	buckets  map[string]*localBucket
	since    time.Time // start of the current episode; zero: rlserver answers
	ranOut   bool      // GraceFor has passed in this episode (logged)
	admitted int64     // this episode's local decisions, and GraceThen's
	denied   int64
	then     int64
}

// localBucket is a token bucket of one rule and identifier: the rule's
// capacity and limit per window scaled by the share.
type localBucket struct {
	st engine.State
	p  engine.Params
}

func newGrace(cfg *MiddlewareConfig) (*grace, error) {
	if cfg.GraceThen != FailOpen && cfg.GraceThen != FailClosed {
		return nil, ErrGraceThen
	}
	if cfg.GraceRules == nil {
		lister, ok := cfg.Checker.(RuleLister)
		if !ok {
			return nil, errors.New("client: FailGrace needs MiddlewareConfig.GraceRules, or a Checker that lists rules (a *Client does)")
		}
		cfg.GraceRules = lister
	}
	if cfg.GraceInstances == 0 {
		cfg.GraceInstances = 1
	}
	if cfg.GraceInstances < 0 {
		return nil, fmt.Errorf("client: GraceInstances %d: want the number of gateway processes sharing the limits", cfg.GraceInstances)
	}
	if cfg.GraceShare == 0 {
		cfg.GraceShare = 1 / float64(cfg.GraceInstances)
	}
	if !(cfg.GraceShare > 0 && cfg.GraceShare <= 1) {
		return nil, fmt.Errorf("client: GraceShare %v: want a fraction above 0, at most 1", cfg.GraceShare)
	}
	if cfg.GraceFor <= 0 {
		cfg.GraceFor = DefaultGraceFor
	}
	if cfg.GraceRefresh <= 0 {
		cfg.GraceRefresh = DefaultGraceRefresh
	}
	if cfg.GraceMaxKeys <= 0 {
		cfg.GraceMaxKeys = DefaultGraceMaxKeys
	}
	g := &grace{cfg: cfg, share: cfg.GraceShare, buckets: map[string]*localBucket{}}
	g.fetch() // at once, so that a process started with rlserver up knows the rules
	return g, nil
}

// fetch learns the rules; a failure keeps those it knew and is retried
// after the next successful check.
func (g *grace) fetch() {
	if !g.fetching.CompareAndSwap(false, true) {
		return
	}
	defer g.fetching.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), max(g.cfg.Timeout, time.Second))
	defer cancel()
	list, err := g.cfg.GraceRules.Rules(ctx)
	if err != nil {
		g.cfg.Logger.Debug("rate limiter: the rules could not be fetched for the grace mode", "err", err)
		return
	}
	compiled := make([]*rules.Compiled, 0, len(list))
	for _, r := range list {
		if c, err := rules.Compile(r, 0); err == nil {
			compiled = append(compiled, c)
		}
	}
	g.rules.Store(rules.NewSet(compiled...))
	g.fetched.Store(g.cfg.Clock().UnixNano())
}

// answered is called after every check rlserver answered: it ends an
// episode and refreshes the rules when they are older than GraceRefresh.
func (g *grace) answered(now time.Time) {
	if now.UnixNano()-g.fetched.Load() > int64(g.cfg.GraceRefresh) && !g.fetching.Load() {
		go g.fetch()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.since.IsZero() {
		return
	}
	g.cfg.Logger.Info("rate limiter: rlserver answers again; the grace episode is over",
		"unavailable", now.Sub(g.since).Round(time.Millisecond), "admitted_locally", g.admitted,
		"denied_locally", g.denied, "decided_by_grace_then", g.then)
	g.since, g.ranOut, g.admitted, g.denied, g.then = time.Time{}, false, 0, 0, 0
}

// decide decides a request rlserver did not answer (err): locally while
// the episode is younger than GraceFor and the rules are known, else as
// GraceThen says (ok false, res unset).
func (g *grace) decide(r *http.Request, target, tier string, ids map[string]string, cost int64, now time.Time, err error) (res Result, ok bool) {
	episode := g.begin(now, err)
	set := g.rules.Load()
	local := episode < g.cfg.GraceFor && set != nil
	var rule string
	if local {
		res, rule, local = g.check(set, target, tier, ids, cost, now)
	}
	g.mu.Lock()
	switch {
	case !local:
		g.then++
		if episode >= g.cfg.GraceFor && !g.ranOut {
			g.ranOut = true
			g.cfg.Logger.Warn("rate limiter: rlserver still does not answer; the grace mode has run out",
				"grace_for", g.cfg.GraceFor, "now", failName(g.cfg.GraceThen))
		}
	case res.Allowed:
		g.admitted++
	default:
		g.denied++
	}
	g.mu.Unlock()
	if g.cfg.OnGrace != nil {
		allowed := res.Allowed
		if !local {
			allowed = g.cfg.GraceThen == FailOpen
		}
		g.cfg.OnGrace(r, GraceDecision{Allowed: allowed, Local: local, RuleID: rule, Episode: episode})
	}
	return res, local
}

// begin starts an episode if none runs, and returns its age.
func (g *grace) begin(now time.Time, err error) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.since.IsZero() {
		g.since = now
		g.cfg.Logger.Warn("rate limiter: rlserver does not answer; deciding locally (grace mode)",
			"err", err, "grace_for", g.cfg.GraceFor, "share", g.share, "then", failName(g.cfg.GraceThen),
			"rules_known", g.rules.Load() != nil)
	}
	return now.Sub(g.since)
}

// check decides a request with the local buckets of the enforcing rules
// that match it: all or nothing, as RL.CHECKRULES. ok is false when a
// bucket cannot be kept (GraceMaxKeys reached, parameters out of range).
func (g *grace) check(set *rules.Set, target, tier string, ids map[string]string, cost int64, now time.Time) (res Result, rule string, ok bool) {
	var q rules.Query
	q.Reset()
	q.Target, q.Tier = []byte(target), []byte(tier)
	types := make([]string, 0, len(ids))
	for t := range ids {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		q.AddID([]byte(t), []byte(ids[t]))
	}
	set.Match(&q)
	evals := q.Evals[:0]
	for _, e := range q.Evals {
		if !e.Rule.Rule.Shadow { // shadow rules never deny
			evals = append(evals, e)
		}
	}
	if len(evals) == 0 {
		return Result{Allowed: true, Limit: -1, Remaining: -1}, "", true
	}
	ns := now.UnixNano()
	g.mu.Lock()
	defer g.mu.Unlock()
	states := make([]engine.State, len(evals))
	params := make([]engine.Params, len(evals))
	allowed := true
	for i := range evals {
		b, ok := g.bucket(string(evals[i].Key), evals[i].Rule, ns)
		if !ok {
			return Result{}, "", false
		}
		states[i], params[i] = b.st, b.p
		evals[i].Result = engine.Check(engine.Token, &states[i], params[i], cost, ns)
		allowed = allowed && evals[i].Result.Allowed
	}
	if allowed { // denied: no bucket is charged
		for i := range evals {
			g.buckets[string(evals[i].Key)].st = states[i]
		}
	}
	best := rules.Best(evals)
	e := evals[best]
	res = Result{Allowed: allowed, Limit: e.Result.Limit, Remaining: e.Result.Remaining,
		RetryAfter: nanos(e.Result.RetryAfter), ResetAfter: nanos(e.Result.ResetAfter),
		RuleID: e.Rule.Rule.ID, Policy: e.Rule.Rule.ID, Quota: params[best].Limit, Window: time.Duration(params[best].Window),
		Shadow: e.Rule.Rule.Shadow}
	return res, e.Rule.Rule.ID, true
}

// bucket returns the bucket of key under rule c, made (full) if new.
// Called with g.mu held.
func (g *grace) bucket(key string, c *rules.Compiled, now int64) (*localBucket, bool) {
	p := engine.Params{Limit: g.scale(c.Params.Limit), Window: c.Params.Window, Burst: g.scale(c.Params.Capacity(c.Algo))}
	if p.Validate(engine.Token) != nil {
		return nil, false
	}
	if b, ok := g.buckets[key]; ok {
		b.p = p // the rule may have changed
		return b, true
	}
	if len(g.buckets) >= g.cfg.GraceMaxKeys {
		for k, b := range g.buckets {
			if engine.ExpiresAt(engine.Token, &b.st, b.p) <= now { // full again: as good as new
				delete(g.buckets, k)
			}
		}
		if len(g.buckets) >= g.cfg.GraceMaxKeys {
			return nil, false
		}
	}
	b := &localBucket{p: p}
	g.buckets[key] = b
	return b, true
}

// scale returns this process's share of n: floor(share × n), at least 1.
func (g *grace) scale(n int64) int64 {
	return max(1, int64(math.Floor(g.share*float64(n))))
}

func nanos(ns int64) time.Duration {
	if ns < 0 {
		return Never
	}
	return time.Duration(ns)
}

func failName(m FailMode) string {
	if m == FailOpen {
		return "fail open"
	}
	return "fail closed"
}
