package server

import (
	"sync"
	"sync/atomic"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/rules"
)

// Totals are the checks this server has decided since it started: every
// RL.CHECK, CL.THROTTLE and RL.CHECKRULES, over RESP and over HTTP, and
// how many of them were denied.
type Totals struct {
	Checks, Denied uint64
}

// Totals returns the checks decided so far (the sums of
// rlserver_checks_total and rlserver_rule_checks_total). It is safe for
// concurrent use and costs a pass over the counter stripes.
func (s *Server) Totals() Totals {
	m := s.metrics
	var t Totals
	for i := range m.stripes {
		st := &m.stripes[i]
		for a := range st.checks {
			d := uint64(st.checks[a][0].Load())
			t.Checks += d + uint64(st.checks[a][1].Load())
			t.Denied += d
		}
		d := uint64(st.rules[0].Load())
		t.Checks += d + uint64(st.rules[1].Load())
		t.Denied += d
	}
	return t
}

// RuleCount is one rule's share of the rule checks decided so far.
type RuleCount struct {
	ID     string
	Shadow bool // the rule is in shadow mode
	// Checks: evaluations of the rule (rule checks it matched). Denied:
	// those in which it denied, for an enforcing rule; ShadowDenied: those
	// in which a shadow rule would have denied had it been enforced.
	Checks, Denied, ShadowDenied uint64
}

// RuleCounts returns the counts of every rule in the rule table, in id
// order (a rule not evaluated yet with zeros); counts of rules no longer
// in the table are dropped. It is safe for concurrent use.
func (s *Server) RuleCounts() []RuleCount {
	if s.cfg.Rules == nil {
		return []RuleCount{}
	}
	list := s.cfg.Rules.Rules()
	out := make([]RuleCount, 0, len(list))
	keep := make(map[string]bool, len(list))
	for _, r := range list {
		keep[r.ID] = true
		rc := RuleCount{ID: r.ID, Shadow: r.Shadow}
		if c := s.metrics.perRule.find(r.ID); c != nil {
			rc.Checks, rc.Denied, rc.ShadowDenied = c.sums()
		}
		out = append(out, rc)
	}
	s.metrics.perRule.prune(keep)
	return out
}

// ruleCounters are the per-rule counts: a copy-on-write map from rule id
// to striped counters, so that counting looks an id up without a lock or
// an allocation, and only a rule's first count takes the lock.
type ruleCounters struct {
	mu   sync.Mutex // held to replace byID
	byID atomic.Pointer[map[string]*ruleCounter]
}

// ruleCounter is one rule's counts, striped like the hot counters.
type ruleCounter struct {
	stripes [numStripes]struct {
		checks, denied, shadow atomic.Uint64
		_                      [40]byte // one stripe per cache line
	}
}

func (c *ruleCounter) sums() (checks, denied, shadow uint64) {
	for i := range c.stripes {
		st := &c.stripes[i]
		checks += st.checks.Load()
		denied += st.denied.Load()
		shadow += st.shadow.Load()
	}
	return checks, denied, shadow
}

// count counts one evaluation of rule id on stripe i.
func (r *ruleCounters) count(i uint32, id string, res *engine.Result, shadow bool) {
	c := r.find(id)
	if c == nil {
		c = r.add(id)
	}
	st := &c.stripes[i&stripeMask]
	st.checks.Add(1)
	switch {
	case res.Allowed:
	case shadow:
		st.shadow.Add(1)
	default:
		st.denied.Add(1)
	}
}

func (r *ruleCounters) find(id string) *ruleCounter {
	if m := r.byID.Load(); m != nil {
		return (*m)[id]
	}
	return nil
}

// add returns id's counter, creating it.
func (r *ruleCounters) add(id string) *ruleCounter {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.byID.Load()
	if old != nil {
		if c := (*old)[id]; c != nil {
			return c
		}
	}
	m := make(map[string]*ruleCounter, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	c := &ruleCounter{}
	m[id] = c
	r.byID.Store(&m)
	return c
}

// prune drops the counters of the ids not in keep.
func (r *ruleCounters) prune(keep map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.byID.Load()
	if old == nil {
		return
	}
	stale := false
	for k := range *old {
		stale = stale || !keep[k]
	}
	if !stale {
		return
	}
	m := make(map[string]*ruleCounter, len(*old))
	for k, v := range *old {
		if keep[k] {
			m[k] = v
		}
	}
	r.byID.Store(&m)
}

func lenOf(m *map[string]*ruleCounter) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// countRules counts each evaluated rule of q on stripe i.
func (r *ruleCounters) countRules(i uint32, q *rules.Query) {
	for j := range q.Evals {
		e := &q.Evals[j]
		r.count(i, e.Rule.Rule.ID, &e.Result, e.Rule.Rule.Shadow)
	}
}
