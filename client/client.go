package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/rlheader"
	"github.com/rlserver/rlserver/rules"
)

// Never is the RetryAfter of a request that can never pass: its cost is
// larger than the capacity.
const Never time.Duration = -1

// Result is rlserver's decision on one check.
type Result struct {
	Allowed    bool
	Limit      int64         // for X-RateLimit-Limit; -1 when no rule matched
	Remaining  int64         // requests of cost 1 still allowed now; -1 when no rule matched
	RetryAfter time.Duration // 0 if allowed; else until this request would pass; Never
	ResetAfter time.Duration // until the full allowance is back
	RuleID     string        // CheckRules: the most restrictive rule; "" if none matched

	// The policy, for the RateLimit-Policy and RateLimit headers: its name
	// (the rule id, or for Check a name made of the limit's parameters),
	// its limit per window and its window. CheckRules learns a rule's
	// Quota and Window with RL.RULE.GET and caches them (see Client); they
	// are zero if that failed.
	Policy string
	Quota  int64
	Window time.Duration
	// Shadow: the rule is in shadow mode (it counts but never denies), so
	// the middleware sends none of its figures in the rate-limit headers.
	Shadow bool
}

// Limit is the limit of an RL.CHECK: Limit requests per Window with
// algorithm Algo (fixed, sliding, log, token, leaky, gcra); Burst is the
// capacity of token, leaky and gcra (0: Limit).
type Limit struct {
	Algo   string
	Limit  int64
	Window time.Duration // a positive whole number of milliseconds
	Burst  int64
}

// ErrWindow is returned for a Window that is not a positive whole number of
// milliseconds.
var ErrWindow = errors.New("client: window must be a positive whole number of milliseconds")

// Redis is the part of a go-redis client that Client uses.
// *redis.Client, *redis.ClusterClient and *redis.Ring satisfy it.
type Redis interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
	Pipeline() redis.Pipeliner
}

// Client runs checks against rlserver. It is safe for concurrent use.
//
// RL.CHECKRULES names the most restrictive rule but not its parameters, so
// CheckRules fetches a rule's limit and window with RL.RULE.GET the first
// time it sees the rule, and again when the rule's capacity in a reply
// differs from what it holds or policyTTL has passed.
type Client struct {
	rdb      Redis
	mu       sync.Mutex
	policies map[string]policy // by rule id
}

// policy is a rule's limit and window as a Client last fetched them.
type policy struct {
	quota, capacity int64
	window          time.Duration
	shadow          bool
	fetched         time.Time
}

// policyTTL bounds how long a Client trusts a rule's fetched window.
const policyTTL = 10 * time.Second

// New returns a Client on rdb.
// For Timeout-bounded checks, create rdb with ContextTimeoutEnabled, so that
// a context deadline also bounds reads from a server that accepted the
// connection but does not answer; Dial does.
func New(rdb Redis) *Client { return &Client{rdb: rdb, policies: map[string]policy{}} }

// Dial returns a Client of its own go-redis client for addr, with
// ContextTimeoutEnabled set; configure, if given, adjusts the options.
func Dial(addr string, configure ...func(*redis.Options)) *Client {
	opt := &redis.Options{Addr: addr, ContextTimeoutEnabled: true}
	for _, f := range configure {
		f(opt)
	}
	return New(redis.NewClient(opt))
}

// Close closes the underlying go-redis client if it has a Close method.
func (c *Client) Close() error {
	if cl, ok := c.rdb.(interface{ Close() error }); ok {
		return cl.Close()
	}
	return nil
}

// Check charges cost against key under l: RL.CHECK key algo limit window
// COST cost [BURST burst].
func (c *Client) Check(ctx context.Context, key string, l Limit, cost int64) (Result, error) {
	args, err := checkArgs(key, l, cost)
	if err != nil {
		return Result{}, err
	}
	r, err := parseReply(c.rdb.Do(ctx, args...).Result())
	if err == nil {
		l.policy(&r)
	}
	return r, err
}

// policy fills r's policy with l's parameters.
func (l Limit) policy(r *Result) {
	r.Policy = rlheader.PolicyName(l.Algo, l.Limit, l.Window, l.Burst)
	r.Quota, r.Window = l.Limit, l.Window
}

// CheckRules checks a request to target by a caller of tier with the
// identifiers ids ({"user": "u1", "ip": "1.2.3.4"}) against the server's
// rules: RL.CHECKRULES target tier type=value... COST cost. With no
// matching rule the result is allowed with Limit -1.
func (c *Client) CheckRules(ctx context.Context, target, tier string, ids map[string]string, cost int64) (Result, error) {
	if len(ids) == 0 {
		return Result{}, errors.New("client: CheckRules needs at least one identifier")
	}
	types := make([]string, 0, len(ids))
	for t := range ids {
		types = append(types, t)
	}
	sort.Strings(types)
	args := make([]any, 0, 5+len(ids))
	args = append(args, "RL.CHECKRULES", target, tier)
	for _, t := range types {
		args = append(args, t+"="+ids[t])
	}
	args = append(args, "COST", cost)
	r, err := parseReply(c.rdb.Do(ctx, args...).Result())
	if err == nil && r.RuleID != "" {
		r.Policy = r.RuleID
		if p, ok := c.rulePolicy(ctx, r.RuleID, r.Limit); ok {
			r.Quota, r.Window, r.Shadow = p.quota, p.window, p.shadow
		}
	}
	return r, err
}

// rulePolicy returns rule id's limit and window, from the cache or, if
// they are missing, stale or do not match capacity (the limit the reply
// gave), from RL.RULE.GET.
func (c *Client) rulePolicy(ctx context.Context, id string, capacity int64) (policy, bool) {
	c.mu.Lock()
	p, ok := c.policies[id]
	c.mu.Unlock()
	if ok && p.capacity == capacity && time.Since(p.fetched) < policyTTL {
		return p, true
	}
	js, err := c.rdb.Do(ctx, "RL.RULE.GET", id).Text()
	if err != nil {
		return p, false
	}
	var rule struct {
		Limit  int64  `json:"limit"`
		Window string `json:"window"`
		Burst  int64  `json:"burst"`
		Shadow bool   `json:"shadow"`
	}
	if err := json.Unmarshal([]byte(js), &rule); err != nil {
		return p, false
	}
	ns, ok := engine.ParseWindow([]byte(rule.Window))
	if !ok {
		return p, false
	}
	p = policy{quota: rule.Limit, capacity: rule.Limit, window: time.Duration(ns), shadow: rule.Shadow, fetched: time.Now()}
	if rule.Burst > 0 {
		p.capacity = rule.Burst
	}
	c.mu.Lock()
	c.policies[id] = p
	c.mu.Unlock()
	return p, true
}

// Rules returns the server's rules (RL.RULE.LIST), in id order. The
// middleware's grace mode (FailGrace) learns them with it.
func (c *Client) Rules(ctx context.Context) ([]rules.Rule, error) {
	list, err := c.rdb.Do(ctx, "RL.RULE.LIST").Slice()
	if err != nil {
		return nil, fmt.Errorf("rlserver: %w", err)
	}
	out := make([]rules.Rule, 0, len(list))
	for _, v := range list {
		js, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("rlserver: unexpected rule %v", v)
		}
		var r rules.Rule // leniently: a newer server's rules may have fields this client does not know
		if err := json.Unmarshal([]byte(js), &r); err != nil {
			return nil, fmt.Errorf("rlserver: rule %.100s: %w", js, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Request is one check of a batch.
type Request struct {
	Key   string
	Limit Limit
	Cost  int64
}

// CheckBatch runs the checks of reqs in one pipelined round trip and
// returns their results in order. If a check fails, the error names its
// index; the other results are still filled.
func (c *Client) CheckBatch(ctx context.Context, reqs []Request) ([]Result, error) {
	cmds := make([]*redis.Cmd, len(reqs))
	pipe := c.rdb.Pipeline()
	for i, r := range reqs {
		args, err := checkArgs(r.Key, r.Limit, r.Cost)
		if err != nil {
			return nil, fmt.Errorf("client: check %d: %w", i, err)
		}
		cmds[i] = pipe.Do(ctx, args...)
	}
	pipe.Exec(ctx) // each command holds its own error, read below
	out := make([]Result, len(reqs))
	var first error
	for i, cmd := range cmds {
		r, err := parseReply(cmd.Result())
		if err == nil {
			reqs[i].Limit.policy(&r)
		}
		out[i] = r
		if err != nil && first == nil {
			first = fmt.Errorf("client: check %d: %w", i, err)
		}
	}
	return out, first
}

func checkArgs(key string, l Limit, cost int64) ([]any, error) {
	if l.Window <= 0 || l.Window%time.Millisecond != 0 {
		return nil, ErrWindow
	}
	window := strconv.FormatInt(l.Window.Milliseconds(), 10) + "ms"
	if l.Window%time.Second == 0 {
		window = strconv.FormatInt(int64(l.Window/time.Second), 10)
	}
	args := []any{"RL.CHECK", key, l.Algo, l.Limit, window, "COST", cost}
	if l.Burst != 0 {
		args = append(args, "BURST", l.Burst)
	}
	return args, nil
}

// parseReply turns the 5 (RL.CHECK) or 6 (RL.CHECKRULES) element reply
// into a Result.
func parseReply(v any, err error) (Result, error) {
	if err != nil {
		return Result{}, fmt.Errorf("rlserver: %w", err)
	}
	arr, ok := v.([]any)
	if !ok || len(arr) < 5 || len(arr) > 6 {
		return Result{}, fmt.Errorf("rlserver: unexpected reply %v", v)
	}
	var n [5]int64
	for i := range n {
		if n[i], ok = arr[i].(int64); !ok {
			return Result{}, fmt.Errorf("rlserver: unexpected reply %v", v)
		}
	}
	r := Result{Allowed: n[0] == 1, Limit: n[1], Remaining: n[2],
		RetryAfter: millis(n[3]), ResetAfter: millis(n[4])}
	if len(arr) == 6 && arr[5] != nil {
		if r.RuleID, ok = arr[5].(string); !ok {
			return Result{}, fmt.Errorf("rlserver: unexpected rule id %v", arr[5])
		}
	}
	return r, nil
}

func millis(ms int64) time.Duration {
	if ms < 0 {
		return Never
	}
	return time.Duration(ms) * time.Millisecond
}
