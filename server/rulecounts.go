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

// ruleCounters are the per-rule counts. Counting finds a rule's counter
// by its compiled rule's address in a copy-on-write map, without a lock,
// an allocation or hashing the id; only the first count of a compiled
// rule takes the lock, to find the id's counter (a replaced rule keeps
// its counts) and publish a new map.
type ruleCounters struct {
	mu   sync.Mutex              // held to change byID and publish fast
	byID map[string]*ruleCounter // under mu
	fast atomic.Pointer[map[*rules.Compiled]*ruleCounter]
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

// count counts one evaluation of rule c on stripe i.
func (r *ruleCounters) count(i uint32, c *rules.Compiled, res *engine.Result) {
	var rc *ruleCounter
	if m := r.fast.Load(); m != nil {
		rc = (*m)[c]
	}
	if rc == nil {
		rc = r.add(c)
	}
	st := &rc.stripes[i&stripeMask]
	st.checks.Add(1)
	switch {
	case res.Allowed:
	case c.Rule.Shadow:
		st.shadow.Add(1)
	default:
		st.denied.Add(1)
	}
}

// find returns the counter of rule id, or nil.
func (r *ruleCounters) find(id string) *ruleCounter {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byID[id]
}

// add returns c's counter, creating its id's if need be, and publishes
// a map that has c. The map is rebuilt with c alone once it holds many
// more compiled rules than there are ids (replaced rules): the others
// are added back at their next count.
func (r *ruleCounters) add(c *rules.Compiled) *ruleCounter {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := c.Rule.ID
	rc := r.byID[id]
	if rc == nil {
		if r.byID == nil {
			r.byID = map[string]*ruleCounter{}
		}
		rc = &ruleCounter{}
		r.byID[id] = rc
	}
	m := map[*rules.Compiled]*ruleCounter{c: rc}
	if old := r.fast.Load(); old != nil && len(*old) < 2*len(r.byID)+16 {
		for k, v := range *old {
			m[k] = v
		}
	}
	r.fast.Store(&m)
	return rc
}

// prune drops the counters of the ids not in keep.
func (r *ruleCounters) prune(keep map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	stale := false
	for id := range r.byID {
		if !keep[id] {
			delete(r.byID, id)
			stale = true
		}
	}
	if !stale {
		return
	}
	if old := r.fast.Load(); old != nil {
		m := make(map[*rules.Compiled]*ruleCounter, len(*old))
		for k, v := range *old {
			if keep[k.Rule.ID] {
				m[k] = v
			}
		}
		r.fast.Store(&m)
	}
}

// countRules counts each evaluated rule of q on stripe i.
func (r *ruleCounters) countRules(i uint32, q *rules.Query) {
	for j := range q.Evals {
		e := &q.Evals[j]
		r.count(i, e.Rule, &e.Result)
	}
}
