package shards

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rlserver/rlserver/rules"
)

// ruleTable is the Store's rule set. Readers load the current immutable
// rules.Set without locks; writers, serialised by mu, publish a new one.
// The zero value is an empty table.
type ruleTable struct {
	mu  sync.Mutex
	set atomic.Pointer[rules.Set]
	ops sync.Pool // *[]Op, scratch for CheckRules
}

// The rule mutations below (SetRule, CreateRule, DeleteRule) are, like
// Check and Reset, deterministic functions of the Store's state and their
// arguments, so a replicated log can carry them as entries and replay them,
// and a snapshot can carry Rules() beside the counters. A rule change
// applies to the next CheckRules; the counters of a changed rule keep their
// state (and are restarted if its algorithm changed).

// SetRule validates r and stores it, replacing any rule with the same id,
// and reports whether it was added rather than replaced. Validation errors
// are *rules.ValidationError. It does not apply --max-log-limit: the
// caller, which knows it, calls r.Validate first.
func (s *Store) SetRule(r rules.Rule) (bool, error) {
	return s.putRule(r, false)
}

// CreateRule is SetRule that fails with rules.ErrExists if the id is taken.
func (s *Store) CreateRule(r rules.Rule) error {
	_, err := s.putRule(r, true)
	return err
}

func (s *Store) putRule(r rules.Rule, onlyNew bool) (bool, error) {
	c, err := rules.Compile(r, 0)
	if err != nil {
		return false, err
	}
	t := &s.rules
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.set.Load()
	if onlyNew && cur.Get(c.Rule.ID) != nil {
		return false, fmt.Errorf("%w: %q", rules.ErrExists, c.Rule.ID)
	}
	next, added := cur.With(c)
	t.set.Store(next)
	return added, nil
}

// DeleteRule removes the rule with the given id and reports whether it
// existed. Its counters are left to expire. The error is always nil (see
// Reset).
func (s *Store) DeleteRule(id string) (bool, error) {
	t := &s.rules
	t.mu.Lock()
	defer t.mu.Unlock()
	next, ok := t.set.Load().Without(id)
	if ok {
		t.set.Store(next)
	}
	return ok, nil
}

// Rule returns the rule with the given id.
func (s *Store) Rule(id string) (rules.Rule, bool) {
	if c := s.rules.set.Load().Get(id); c != nil {
		return c.Rule, true
	}
	return rules.Rule{}, false
}

// Rules returns a copy of every rule, in id order.
func (s *Store) Rules() []rules.Rule {
	all := s.rules.set.Load().All()
	out := make([]rules.Rule, len(all))
	for i, c := range all {
		out[i] = c.Rule
	}
	return out
}

// RuleCount returns the number of rules.
func (s *Store) RuleCount() int { return s.rules.set.Load().Len() }

// CheckRules evaluates q against the current rules (see rules.Set.Match):
// every matching rule's counter "id:value" is checked with q.Cost in one
// CheckAll, so the request is charged to all of them or, if an enforcing
// rule denies, to none. It fills q.Evals, q.Allowed and q.Best. q.Cost must
// be valid (engine.ValidCost) and the keys within the caller's length
// limit. It does not allocate once q and the Store's scratch have grown,
// unless a counter is new.
func (s *Store) CheckRules(q *rules.Query, now int64) error {
	s.rules.set.Load().Match(q)
	q.Allowed, q.Best = true, -1
	if len(q.Evals) == 0 {
		return nil
	}
	p, _ := s.rules.ops.Get().(*[]Op)
	if p == nil {
		p = new([]Op)
	}
	ops := (*p)[:0]
	for i := range q.Evals {
		c := q.Evals[i].Rule
		ops = append(ops, Op{Key: q.Evals[i].Key, Algo: c.Algo, Params: c.Params, Shadow: c.Rule.Shadow, Replace: true})
	}
	allowed, err := s.CheckAll(ops, q.Cost, now)
	for i := range ops {
		q.Evals[i].Result = ops[i].Result
	}
	clear(ops) // drop references to q's keys
	*p = ops[:0]
	s.rules.ops.Put(p)
	if err != nil {
		return err
	}
	q.Allowed, q.Best = allowed, rules.Best(q.Evals)
	return nil
}
