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

	// With the journal on, every change is appended to changes as a
	// record (see records.go), in the order made, under mu.
	journal  bool
	changes  []byte
	nchanges int
	note     *changeNote // the Store's, set with journal

	blocks blockTable // see blocks.go
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
	return s.putRule(r, false, true)
}

// CreateRule is SetRule that fails with rules.ErrExists if the id is taken.
func (s *Store) CreateRule(r rules.Rule) error {
	_, err := s.putRule(r, true, true)
	return err
}

// putRule stores r (if onlyNew, only if its id is free), listing the
// change in the journal if note is set and the journal is on.
func (s *Store) putRule(r rules.Rule, onlyNew, note bool) (bool, error) {
	c, err := rules.Compile(r, 0)
	if err != nil {
		return false, err
	}
	if note {
		if err := s.limits.refused(); err != nil {
			return false, err
		}
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
	if note && t.journal {
		t.changes = appendRuleSet(t.changes, c.Rule)
		t.nchanges++
		t.note.changed()
	}
	return added, nil
}

// DeleteRule removes the rule with the given id and reports whether it
// existed. Its counters are left to expire. The error is Options.Refuse's,
// if it refuses.
func (s *Store) DeleteRule(id string) (bool, error) {
	if err := s.limits.refused(); err != nil {
		return false, err
	}
	return s.rules.remove(id, true), nil
}

// ChangeRules makes ch as one change (rules.Change): readers see every
// rule of it or none, and with the journal on its records are listed
// together, so that they reach the log in one entry. It validates ch
// (without --max-log-limit: the caller applies it) and changes nothing if
// one rule is invalid. The error is Options.Refuse's, if it refuses.
func (s *Store) ChangeRules(ch rules.Change) (rules.ChangeResult, error) {
	set, err := ch.Compile()
	if err != nil {
		return rules.ChangeResult{}, err
	}
	if err := s.limits.refused(); err != nil {
		return rules.ChangeResult{}, err
	}
	return s.rules.apply(set, ch.Delete, true), nil
}

// apply publishes the rules with set stored and del removed (see
// rules.Set.Apply), listing the change in the journal if note is set and
// the journal is on: a record for each rule set and each id deleted.
func (t *ruleTable) apply(set []*rules.Compiled, del []string, note bool) rules.ChangeResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	next, res := t.set.Load().Apply(set, del)
	t.set.Store(next)
	if note && t.journal {
		for _, c := range set {
			t.changes = appendRuleSet(t.changes, c.Rule)
		}
		for _, id := range del {
			t.changes = appendRuleDel(t.changes, id)
		}
		t.nchanges += len(set) + len(del)
		t.note.changed()
	}
	return res
}

// remove deletes rule id and reports whether it existed, listing the
// change in the journal if note is set and the journal is on.
func (t *ruleTable) remove(id string, note bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	next, ok := t.set.Load().Without(id)
	if ok {
		t.set.Store(next)
		if note && t.journal {
			t.changes = appendRuleDel(t.changes, id)
			t.nchanges++
			t.note.changed()
		}
	}
	return ok
}

// takeChanges appends the listed rule changes to dst and empties the list.
func (t *ruleTable) takeChanges(dst []byte) ([]byte, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	dst, n := append(dst, t.changes...), t.nchanges
	t.changes, t.nchanges = t.changes[:0], 0
	return dst, n
}

// reset removes every rule and the listed changes.
func (t *ruleTable) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.set.Store(nil)
	t.blocks.publish(nil)
	t.changes, t.nchanges = t.changes[:0], 0
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
//
// If one of q's identifiers is blocked, q is denied by the block
// (q.Blocked) and nothing is charged. A denial by a rule with a block is
// counted, and the identifier blocked on the rule's block.after-th.
func (s *Store) CheckRules(q *rules.Query, now int64) error {
	if err := CheckRulesWith(s.rules.set.Load(), s.rules.blocks.table.Load(), q, now, s.CheckAll); err != nil {
		return err
	}
	if q.Blocked {
		s.rules.blocks.denied.Add(1)
		return nil
	}
	if !q.Allowed {
		DenialsToCount(q, func(e *rules.Eval) { s.countDenial(q, e, now) })
	}
	return nil
}

// ruleOps is scratch for CheckRulesWith: *[]Op.
var ruleOps sync.Pool

// CheckRulesWith evaluates q against set, charging its counters with
// checkAll, all or nothing: Store.CheckAll, a transaction's check on the
// shards it holds, or a cluster's across its groups. It fills q.Evals,
// q.Allowed and q.Best. If blocks (nil when there are none) holds a block
// live at now of one of q's identifiers, q is marked blocked by it
// (rules.Query.SetBlocked) and nothing is charged.
func CheckRulesWith(set *rules.Set, blocks *rules.BlockTable, q *rules.Query, now int64, checkAll func([]Op, int64, int64) (bool, error)) error {
	q.Blocked = false
	if blockedBy(blocks, q, now) {
		return nil
	}
	set.Match(q)
	q.Allowed, q.Best = true, -1
	if len(q.Evals) == 0 {
		return nil
	}
	p, _ := ruleOps.Get().(*[]Op)
	if p == nil {
		p = new([]Op)
	}
	ops := (*p)[:0]
	for i := range q.Evals {
		c := q.Evals[i].Rule
		ops = append(ops, Op{Key: q.Evals[i].Key, Algo: c.Algo, Params: c.Params, Shadow: c.Rule.Shadow, Replace: true})
	}
	allowed, err := checkAll(ops, q.Cost, now)
	for i := range ops {
		q.Evals[i].Result = ops[i].Result
	}
	clear(ops) // drop references to q's keys
	*p = ops[:0]
	ruleOps.Put(p)
	if err != nil {
		return err
	}
	q.Allowed, q.Best = allowed, rules.Best(q.Evals)
	return nil
}
