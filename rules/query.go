package rules

import (
	"time"

	"github.com/rlserver/rlserver/engine"
)

// ID is one identifier of a request: its type ("user", "ip", "apikey")
// and value ("u1", "1.2.3.4").
type ID struct {
	Type, Value []byte
}

// Query is one RL.CHECKRULES request and, once evaluated, its outcome. A
// Query is reusable: Reset it and fill it again, so that a connection
// checks without allocating. It is not safe for concurrent use. The byte
// slices it holds are the caller's and must stay valid until evaluation is
// done.
type Query struct {
	Target []byte
	Tier   []byte
	IDs    []ID  // at most one per type
	Cost   int64 // validated by the caller, like RL.CHECK's COST

	// Filled by the evaluator (shards.Store.CheckRules).
	Evals   []Eval // the matching rules, in id order
	Allowed bool   // false iff some enforcing (non-shadow) rule denied
	Best    int    // index in Evals of the most restrictive rule; -1 if none matched

	// Blocked is set by the evaluator when one of IDs is blocked: then
	// Evals is empty, Allowed false and Best -1, and nothing was charged.
	Blocked bool
	Block   Block // the block, when Blocked; its TTL is the time left

	keys     []byte // backing store of the Evals' keys
	blockKey []byte // scratch for BlockTable.Find
	// index finds an identifier's position in IDs by type once there are
	// more than smallQuery of them, so that adding and matching n
	// identifiers is not quadratic in n; nil below that.
	index map[string]int
}

// smallQuery is the number of identifiers up to which a Query finds a
// type by scanning IDs, which allocates nothing.
const smallQuery = 8

// keptIDs is the IDs capacity a Query keeps across Reset; a larger one,
// grown for one large request, is let go.
const keptIDs = 64

// Eval is one matching rule and its result.
type Eval struct {
	Rule   *Compiled
	Key    []byte // the counter key "id:value"; valid until the Query is reused
	Result engine.Result
}

// Reset empties q for reuse, keeping its buffers.
func (q *Query) Reset() {
	clear(q.IDs) // drop references to the request and to old rules
	clear(q.Evals)
	q.Target, q.Tier, q.Cost = nil, nil, 0
	q.IDs = q.IDs[:0]
	if cap(q.IDs) > keptIDs {
		q.IDs = nil
	}
	q.index = nil
	q.Evals = q.Evals[:0]
	q.Allowed, q.Best = false, -1
	q.Blocked, q.Block = false, Block{}
	q.keys = q.keys[:0]
}

// SetBlocked records that q is denied by b, with ttl (ns) left: no rule
// is evaluated and nothing is charged.
func (q *Query) SetBlocked(b Block, ttl int64) {
	q.Evals = q.Evals[:0]
	q.Allowed, q.Best = false, -1
	q.Blocked, q.Block = true, b
	q.Block.TTL = time.Duration(ttl)
}

// BlockName is what a reply names instead of a rule when q is blocked:
// "block:" and the identifier ("block:ip=1.2.3.4"). Rule ids never hold
// ':', so it is never a rule's id.
func (q *Query) BlockName() string { return "block:" + q.Block.Identifier }

// AddID adds an identifier and reports false, adding nothing, if q already
// has one of that type. It takes constant time on average, however many
// identifiers q has.
func (q *Query) AddID(typ, value []byte) bool {
	if _, dup := q.value(string(typ)); dup {
		return false
	}
	q.IDs = append(q.IDs, ID{Type: typ, Value: value})
	if len(q.IDs) > smallQuery {
		if q.index == nil {
			q.index = make(map[string]int, 2*len(q.IDs))
			for i, id := range q.IDs {
				q.index[string(id.Type)] = i
			}
		}
		q.index[string(typ)] = len(q.IDs) - 1
	}
	return true
}

func (q *Query) value(typ string) ([]byte, bool) {
	if q.index != nil {
		i, ok := q.index[typ]
		if !ok {
			return nil, false
		}
		return q.IDs[i].Value, true
	}
	for i := range q.IDs {
		if string(q.IDs[i].Type) == typ {
			return q.IDs[i].Value, true
		}
	}
	return nil, false
}

// Reply returns what RL.CHECKRULES and POST /v1/checkrules report: the
// result of the most restrictive rule and the rule, or, when no rule
// matched, {Allowed: true, Limit: -1, Remaining: -1} and nil. A shadow
// rule is reported only when no enforcing rule matched, and then as
// allowed (RetryAfter 0), since shadow rules never deny. Reply().Allowed
// always equals q.Allowed.
//
// A blocked q (q.Blocked) replies {Allowed: false, Limit: 0, Remaining: 0,
// RetryAfter and ResetAfter: the block's time left} and nil.
func (q *Query) Reply() (engine.Result, *Compiled) {
	if q.Blocked {
		ttl := int64(q.Block.TTL)
		return engine.Result{RetryAfter: ttl, ResetAfter: ttl}, nil
	}
	if q.Best < 0 || q.Best >= len(q.Evals) {
		return engine.Result{Allowed: true, Limit: -1, Remaining: -1}, nil
	}
	e := q.Evals[q.Best]
	r := e.Result
	if e.Rule.Rule.Shadow {
		r.Allowed, r.RetryAfter = true, 0
	}
	return r, e.Rule
}

// DenialKey returns the counter key "!id:value" in which e's rule, which
// has a block, counts its denials of e's identifier. Rule ids never start
// with '!', so it is no rule's counter. The slice is valid until q is
// used again.
func (q *Query) DenialKey(e *Eval) []byte {
	q.blockKey = append(append(q.blockKey[:0], '!'), e.Key...)
	return q.blockKey
}
