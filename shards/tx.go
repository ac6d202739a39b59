package shards

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/cespare/xxhash/v2"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/rules"
)

// ErrNotLocked is returned by a Tx method whose key's shard the
// transaction did not lock: its TxPlan did not name the key.
var ErrNotLocked = errors.New("the key was not declared when the transaction began")

// TxPlan says what a transaction will touch, so that Transact can lock it
// all before the first command runs.
type TxPlan struct {
	// Keys of the commands that name a key (checks, throttles, resets).
	Keys [][]byte
	// Queries of the rule checks: their counters are found by matching
	// them against the rules when the transaction begins (Transact fills
	// their Evals).
	Queries []*rules.Query
	// All locks every shard: for commands that read or change every key
	// (Len, MemoryBytes, Flush), and for a rule check that follows a rule
	// change in the same transaction, whose counters cannot be known in
	// advance.
	All bool
	// Script marks a script's run, which may hold its shards for long:
	// the commands that would wait for them poll instead, and get ErrBusy
	// once the run is marked busy (Tx.SetBusy; see busy.go).
	Script bool
	// NoWait makes Transact return ErrWouldWait, without calling run,
	// rather than wait for a shard that a script holds: for a caller that
	// must not wait (an event loop), which runs it again where it may.
	NoWait bool
}

// Tx is a transaction's view of a Store: the Store's key and rule
// methods, run on shards that Transact has already locked, so that no
// other caller's command on those keys comes in between. A Tx is valid
// only inside the function given to Transact, and only on its goroutine.
// Its methods have the Store's contracts, except that a key whose shard is
// not locked gets ErrNotLocked, and Len, MemoryBytes and Flush need a plan
// with All (without it they report 0 and ErrNotLocked).
type Tx struct {
	s    *Store
	all  bool
	held []uint64   // bitmap of the locked shards
	set  *rules.Set // the rules the transaction's rule checks see
}

// Transact locks the shards of every key plan names (all of them with
// plan.All), in index order as CheckAll does, calls run with a Tx on them,
// and unlocks. Rule changes made by other callers while run runs are not
// seen by its rule checks: the transaction is ordered before them. run
// must not call the Store's own methods on keys the plan names (their
// shards are locked); it uses the Tx. It returns ErrBusy, without calling
// run, if a shard is held by a script past its time limit (see busy.go),
// and ErrWouldWait if one is held by a script at all and plan.NoWait.
func (s *Store) Transact(plan TxPlan, run func(tx *Tx)) error {
	tx, _ := s.txs.Get().(*Tx)
	if tx == nil {
		tx = &Tx{held: make([]uint64, (len(s.shards)+63)/64)}
	}
	defer s.txs.Put(tx) // a Tx is valid only during run: the next Transact reuses it
	clear(tx.held)
	tx.s, tx.all, tx.set = s, plan.All, s.rules.set.Load()
	if !plan.All {
		for _, k := range plan.Keys {
			tx.hold(xxhash.Sum64(k) & s.mask)
		}
		for _, q := range plan.Queries {
			tx.set.Match(q)
			for _, e := range q.Evals {
				tx.hold(xxhash.Sum64(e.Key) & s.mask)
			}
		}
	}
	if plan.All {
		// A transaction that may FLUSHALL orders itself with the
		// journal's collections as Flush does: the journal lock first.
		s.jmu.Lock()
		defer s.jmu.Unlock()
	}
	var own int32
	if plan.Script {
		own = 1
		tx.countScript(1)
		defer tx.countScript(-1)
	}
	if err := tx.lockShards(plan.NoWait, own); err != nil {
		return err
	}
	defer tx.unlockShards(len(s.shards))
	run(tx)
	return nil
}

// countScript adds d to the script count of every shard tx holds; the
// last script to leave a shard clears its busy mark.
func (tx *Tx) countScript(d int32) {
	for i := tx.nextHeld(0); i < len(tx.s.shards); i = tx.nextHeld(i + 1) {
		if sh := &tx.s.shards[i]; sh.scripts.Add(d) == 0 {
			sh.busy.Store(false)
		}
	}
}

// nextHeld returns the index of the first shard at or after i that tx
// holds, len(shards) when there is none: a loop over the held shards
// skips 64 unheld ones at a time.
func (tx *Tx) nextHeld(i int) int {
	n := len(tx.s.shards)
	if tx.all || i >= n {
		return min(i, n)
	}
	for w := i / 64; w < len(tx.held); w++ {
		word := tx.held[w]
		if w == i/64 {
			word &= ^uint64(0) << (i % 64)
		}
		if word != 0 {
			return min(w*64+bits.TrailingZeros64(word), n)
		}
	}
	return n
}

func (tx *Tx) hold(i uint64) { tx.held[i/64] |= 1 << (i % 64) }

func (tx *Tx) holds(i uint64) bool { return tx.all || tx.held[i/64]&(1<<(i%64)) != 0 }

// shard returns the locked shard of key and its hash, or ErrNotLocked.
func (tx *Tx) shard(key []byte) (*shard, uint64, error) {
	h := xxhash.Sum64(key)
	if !tx.holds(h & tx.s.mask) {
		return nil, h, fmt.Errorf("%w: %q", ErrNotLocked, key)
	}
	return &tx.s.shards[h&tx.s.mask], h, nil
}

// Check is Store.Check inside the transaction.
func (tx *Tx) Check(key []byte, a engine.Algo, p engine.Params, cost, now int64) (engine.Result, error) {
	sh, h, err := tx.shard(key)
	if err != nil {
		return engine.Result{}, err
	}
	return sh.check(key, h, a, p, cost, now)
}

// Throttle is Store.Throttle inside the transaction.
func (tx *Tx) Throttle(key []byte, maxBurst, count, period, quantity, now int64) (engine.CellResult, error) {
	sh, h, err := tx.shard(key)
	if err != nil {
		return engine.CellResult{}, err
	}
	return sh.throttle(key, h, maxBurst, count, period, quantity, now)
}

// Reset is Store.Reset inside the transaction.
func (tx *Tx) Reset(key []byte, now int64) (bool, error) {
	sh, _, err := tx.shard(key)
	if err != nil {
		return false, err
	}
	if err := tx.s.limits.refused(); err != nil {
		return false, err
	}
	return sh.reset(key, now), nil
}

// CheckRules is Store.CheckRules inside the transaction, against the rules
// as the transaction sees them and the blocks held now. Its denials are not
// counted toward a rule's block (the counter's shard may not be held).
func (tx *Tx) CheckRules(q *rules.Query, now int64) error {
	err := CheckRulesWith(tx.set, tx.s.rules.blocks.table.Load(), q, now, tx.checkAll)
	if err == nil && q.Blocked {
		tx.s.rules.blocks.denied.Add(1)
	}
	return err
}

// checkAll is CheckAll on shards the transaction holds.
func (tx *Tx) checkAll(ops []Op, cost, now int64) (bool, error) {
	if err := tx.s.prepare(ops); err != nil {
		return false, err
	}
	for i := range ops {
		if !tx.holds(uint64(ops[i].shard)) {
			return false, fmt.Errorf("%w: %q", ErrNotLocked, ops[i].Key)
		}
	}
	return tx.s.checkLocked(ops, cost, now)
}

// SetRule is Store.SetRule; the transaction's later rule checks see the
// change.
func (tx *Tx) SetRule(r rules.Rule) (bool, error) {
	added, err := tx.s.SetRule(r)
	tx.set = tx.s.rules.set.Load()
	return added, err
}

// DeleteRule is Store.DeleteRule; the transaction's later rule checks see
// the change.
func (tx *Tx) DeleteRule(id string) (bool, error) {
	existed, err := tx.s.DeleteRule(id)
	tx.set = tx.s.rules.set.Load()
	return existed, err
}

// Rule returns the rule with the given id, as the transaction sees it.
func (tx *Tx) Rule(id string) (rules.Rule, bool) {
	if c := tx.set.Get(id); c != nil {
		return c.Rule, true
	}
	return rules.Rule{}, false
}

// Rules returns a copy of every rule the transaction sees, in id order.
func (tx *Tx) Rules() []rules.Rule {
	all := tx.set.All()
	out := make([]rules.Rule, len(all))
	for i, c := range all {
		out[i] = c.Rule
	}
	return out
}

// RuleCount returns the number of rules the transaction sees.
func (tx *Tx) RuleCount() int { return tx.set.Len() }

// errNotAll is returned by the methods that need every shard.
var errNotAll = fmt.Errorf("%w: this command needs every key", ErrNotLocked)

// Len is Store.Len inside a transaction that holds every shard.
func (tx *Tx) Len() int {
	if !tx.all {
		return 0
	}
	n := 0
	for i := range tx.s.shards {
		n += tx.s.shards[i].keys()
	}
	return n
}

// MemoryBytes is Store.MemoryBytes inside a transaction that holds every
// shard.
func (tx *Tx) MemoryBytes() int64 {
	if !tx.all {
		return 0
	}
	var n int64
	for i := range tx.s.shards {
		n += tx.s.shards[i].memory()
	}
	return n
}

// Flush is Store.Flush inside a transaction that holds every shard.
func (tx *Tx) Flush() error {
	if !tx.all {
		return errNotAll
	}
	if err := tx.s.limits.refused(); err != nil {
		return err
	}
	for i := range tx.s.shards {
		tx.s.shards[i].clear()
	}
	tx.s.noteFlushed()
	return nil
}
