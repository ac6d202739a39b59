package server

import (
	"bytes"
	"strconv"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/rules"
)

// RuleStore is the rule table and the rule-driven check that RL.CHECKRULES
// and RL.RULE.* use. Implementations are safe for concurrent use; a
// shards.Store satisfies it. Mutations return errors wrapping the rules
// sentinels (rules.ErrInvalid, rules.ErrExists).
type RuleStore interface {
	// CheckRules evaluates q at time now (see shards.Store.CheckRules).
	CheckRules(q *rules.Query, now int64) error
	SetRule(r rules.Rule) (added bool, err error)
	DeleteRule(id string) (existed bool, err error)
	Rule(id string) (rules.Rule, bool)
	Rules() []rules.Rule
	RuleCount() int
}

// RL.CHECKRULES target tier type=value [type=value ...] [COST n]
//
// Reply: allowed, limit, remaining, retry_after_ms, reset_after_ms of the
// most restrictive matching rule (rules.Best), then its id; with no
// matching rule 1, -1, -1, 0, 0 and nil; for an identifier that is
// blocked 0, 0, 0, ttl_ms, ttl_ms and "block:type=value".
func cmdCheckRules(s *Server, c *conn, args [][]byte, now int64) {
	start := s.metrics.start(c)
	if s.cfg.Rules == nil {
		c.writeError(errNoRules)
		return
	}
	q := s.query()
	defer s.releaseQuery(q)
	if msg := s.parseCheckRules(args, q); msg != "" {
		c.writeError(msg)
		return
	}
	if err := c.ruleStore().CheckRules(q, now); err != nil {
		c.writeErr(err)
		return
	}
	r, rule := q.Reply()
	c.writeArray(6)
	c.writeResultFields(r)
	if q.Blocked {
		c.writeBlockName(q)
	} else if rule == nil {
		c.writeNull()
	} else {
		c.writeBulkString(rule.Rule.ID)
	}
	s.metrics.ruleCheck(c, q)
	s.metrics.observe(timedCheckRules, start)
}

const errNoRules = "ERR rules are not available on this server"

// parseCheckRules fills q from target tier type=value... [COST n]. It
// returns an error reply naming the bad argument, or "".
func (s *Server) parseCheckRules(args [][]byte, q *rules.Query) string {
	q.Target, q.Tier, q.Cost = args[1], args[2], 1
	if len(q.Target) > s.cfg.MaxKeyBytes || len(q.Tier) > s.cfg.MaxKeyBytes {
		return "ERR target or tier is longer than the limit of " + strconv.Itoa(s.cfg.MaxKeyBytes) + " bytes (--max-key-bytes)"
	}
	for i := 3; i < len(args); i++ {
		a := args[i]
		eq := bytes.IndexByte(a, '=')
		if eq < 0 && equalFold(a, "COST") && i == len(args)-2 {
			n, ok := parseInt(args[i+1])
			if !ok || !engine.ValidCost(n) {
				return "ERR invalid 'COST' " + quote(args[i+1]) + ": want a non-negative integer no larger than 2^48"
			}
			q.Cost = n
			break
		}
		if eq <= 0 || eq == len(a)-1 {
			return "ERR syntax error: " + quote(a) + " is not type=value (such as user=u1 or ip=1.2.3.4); COST n comes last"
		}
		if len(a)-eq-1+rules.MaxNameLen+1 > s.cfg.MaxKeyBytes {
			return "ERR identifier " + quote(a[:eq]) + " has a value of " + strconv.Itoa(len(a)-eq-1) +
				" bytes: with the rule id the counter key would exceed " + strconv.Itoa(s.cfg.MaxKeyBytes) + " bytes (--max-key-bytes)"
		}
		if !q.AddID(a[:eq], a[eq+1:]) {
			return "ERR syntax error: identifier type " + quote(a[:eq]) + " is given twice"
		}
	}
	if len(q.IDs) == 0 {
		return "ERR syntax error: want at least one type=value identifier (such as user=u1)"
	}
	return ""
}

// query returns a reset Query from the pool.
func (s *Server) query() *rules.Query {
	q, _ := s.queries.Get().(*rules.Query)
	if q == nil {
		q = new(rules.Query)
	}
	q.Reset()
	return q
}

// releaseQuery returns q to the pool without references to the request.
func (s *Server) releaseQuery(q *rules.Query) {
	q.Reset()
	s.queries.Put(q)
}
