package rules

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rlserver/rlserver/engine"
)

// Rule is one rate-limiting rule as users write it, in JSON or YAML:
//
//	{"id": "free-users", "target": "/users/*", "tier": "free", "key_type": "user",
//	 "algo": "sliding", "limit": 100, "window": "1m", "burst": 0, "shadow": false}
//
// A request matches the rule when its target matches Target (an exact
// path, a prefix glob ending in '*', or '*'), its tier matches Tier (a name
// or '*'), and it carries an identifier of type KeyType. The rule then
// charges the counter "id:value" with Algo, Limit per Window and Burst, as
// RL.CHECK would. A Shadow rule counts and reports but never denies.
type Rule struct {
	ID      string `json:"id" yaml:"id"`
	Target  string `json:"target" yaml:"target"`
	Tier    string `json:"tier" yaml:"tier"`
	KeyType string `json:"key_type" yaml:"key_type"`
	Algo    string `json:"algo" yaml:"algo"`
	Limit   int64  `json:"limit" yaml:"limit"`
	Window  string `json:"window" yaml:"window"`
	Burst   int64  `json:"burst" yaml:"burst"`
	Shadow  bool   `json:"shadow" yaml:"shadow"`
	// Block, if set, blocks an identifier that the rule denies too often
	// (see BlockSpec). Rules without it encode as before.
	Block *BlockSpec `json:"block,omitempty" yaml:"block,omitempty"`
}

// Bounds on rule fields.
const (
	MaxNameLen   = 64   // longest id, tier or key type
	MaxTargetLen = 1024 // longest target
)

// ValidName reports whether s is a valid id, tier name or key type: 1 to
// MaxNameLen ASCII letters, digits, '-', '_' or '.'. Rule ids exclude ':',
// so the counter key "id:value" of one rule never equals another's.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// validTarget reports whether s is "*", or a non-empty printable string
// without spaces in which '*' appears at most once, as the last byte.
func validTarget(s string) bool {
	if len(s) == 0 || len(s) > MaxTargetLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c == 0x7f || (c == '*' && i != len(s)-1) {
			return false
		}
	}
	return true
}

// Validate checks every field of r and returns a *ValidationError for the
// first bad one, in the order id, target, tier, key_type, algo, limit,
// window, burst, block. maxLogLimit, if positive, caps Limit for the log
// algorithm (the server's --max-log-limit).
func (r *Rule) Validate(maxLogLimit int64) error {
	_, err := compile(*r, maxLogLimit)
	return err
}

// Compiled is a validated rule with its parsed parameters. It is immutable
// and shared by every Set that holds it.
type Compiled struct {
	Rule   Rule           // as given, with Algo in lower case
	Algo   engine.Algo    // parsed Rule.Algo
	Params engine.Params  // Limit, Window (ns) and Burst
	prefix bool           // Target ends in '*' and is not "*"
	block  *compiledBlock // Rule.Block, parsed; nil if none
	any    bool           // Target is "*"
}

// Compile validates r (see Validate) and returns its compiled form.
func Compile(r Rule, maxLogLimit int64) (*Compiled, error) { return compile(r, maxLogLimit) }

func compile(r Rule, maxLogLimit int64) (*Compiled, error) {
	id := r.ID
	switch {
	case !ValidName(r.ID):
		return nil, invalid("", "id", ErrID, got(r.ID))
	case !validTarget(r.Target):
		return nil, invalid(id, "target", ErrTarget, got(r.Target))
	case r.Tier != "*" && !ValidName(r.Tier):
		return nil, invalid(id, "tier", ErrTier, got(r.Tier))
	case !ValidName(r.KeyType):
		return nil, invalid(id, "key_type", ErrKeyType, got(r.KeyType))
	}
	algo, ok := engine.ParseAlgo([]byte(r.Algo))
	if !ok {
		return nil, invalid(id, "algo", ErrAlgo, got(r.Algo))
	}
	r.Algo = algo.String()
	c := &Compiled{Rule: r, Algo: algo, Params: engine.Params{Limit: r.Limit, Burst: r.Burst}}
	if err := c.checkParams(maxLogLimit); err != nil {
		return nil, err
	}
	if r.Block != nil {
		b := *r.Block // the Compiled's own copy
		c.Rule.Block = &b
	}
	if err := c.checkBlock(); err != nil {
		return nil, err
	}
	c.any = r.Target == "*"
	c.prefix = !c.any && strings.HasSuffix(r.Target, "*")
	return c, nil
}

// checkParams validates limit, window and burst, filling c.Params.Window.
func (c *Compiled) checkParams(maxLogLimit int64) error {
	r := &c.Rule
	if r.Limit <= 0 || r.Limit > engine.MaxLimit {
		return invalid(r.ID, "limit", ErrLimit, fmt.Sprintf("got %d", r.Limit))
	}
	if c.Algo == engine.Log && maxLogLimit > 0 && r.Limit > maxLogLimit {
		return invalid(r.ID, "limit", ErrLimit, fmt.Sprintf(
			"got %d, above the maximum for 'log' of %d set by --max-log-limit: log keeps one entry per request",
			r.Limit, maxLogLimit))
	}
	w, ok := engine.ParseWindow([]byte(r.Window))
	if !ok {
		return invalid(r.ID, "window", ErrWindow, got(r.Window))
	}
	c.Params.Window = w
	if r.Burst < 0 || r.Burst > engine.MaxLimit || (r.Burst != 0 && !c.Algo.Bucket()) {
		return invalid(r.ID, "burst", ErrBurst, fmt.Sprintf("got %d with algo %s", r.Burst, c.Algo))
	}
	switch err := c.Params.Validate(c.Algo); {
	case err == nil:
		return nil
	case errors.Is(err, engine.ErrSpan):
		return invalid(r.ID, "burst", ErrBurst, err.Error())
	case errors.Is(err, engine.ErrRate):
		return invalid(r.ID, "limit", ErrLimit, err.Error())
	default:
		return invalid(r.ID, "window", ErrWindow, err.Error())
	}
}

func got(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return fmt.Sprintf("got %q", s)
}

// MatchTarget reports whether target matches the rule's target: equal to
// it but for one trailing '/' ("/login" matches "/login" and "/login/",
// which many backends serve alike, and "/login/" matches "/login"),
// starting with its prefix when it ends in '*' ("/users/*" matches
// "/users/42" and "/users/", not "/users"), or any target for "*".
func (c *Compiled) MatchTarget(target []byte) bool {
	t := c.Rule.Target
	switch {
	case c.any:
		return true
	case c.prefix:
		p := t[:len(t)-1]
		return len(target) >= len(p) && string(target[:len(p)]) == p
	}
	n, m := len(target), len(t)
	switch {
	case n == m:
		return string(target) == t
	case n == m+1: // "/login/" for the rule "/login"
		return m > 0 && target[m] == '/' && string(target[:m]) == t
	case m == n+1: // "/login" for the rule "/login/"
		return n > 0 && t[n] == '/' && string(target) == t[:n]
	}
	return false
}

// MatchTier reports whether tier matches the rule's tier: equal to it, or
// any tier for "*".
func (c *Compiled) MatchTier(tier []byte) bool {
	return c.Rule.Tier == "*" || string(tier) == c.Rule.Tier
}
