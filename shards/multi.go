package shards

import (
	"errors"
	"fmt"

	"github.com/cespare/xxhash/v2"
	"github.com/rlserver/rlserver/engine"
)

// ErrDuplicateKey is returned by CheckAll when two ops name the same key.
var ErrDuplicateKey = errors.New("the same key appears twice in one multi-key check")

// Op is one counter of a multi-key check. The caller fills Key, Algo,
// Params, Shadow and Replace; CheckAll fills Result. A slice of Ops may be
// reused across calls.
type Op struct {
	Key    []byte
	Algo   engine.Algo
	Params engine.Params // validated by the caller
	// Shadow ops are decided and charged like the others, but their denial
	// does not deny the whole check.
	Shadow bool
	// Replace drops state of another algorithm held under Key instead of
	// failing with WRONGTYPE (a rule whose algorithm changed owns its
	// counters). The state is dropped only if the check is allowed.
	Replace bool
	// OwnCost makes the op charge Cost instead of the cost the whole
	// check is given (the Envoy rate limit service's per-descriptor
	// hits_addend); Cost 0 then only looks, as a check of cost 0 does.
	OwnCost bool
	Cost    int64 // validated by the caller (engine.ValidCost)
	// Result is this op's decision. If the whole check was allowed, it is
	// the op's charge (denied for a shadow op that would have denied, which
	// is then not charged). If the check was denied, nothing was charged:
	// ops that denied report their denial, the others report their current
	// allowance as RL.PEEK would.
	Result engine.Result

	shard int    // index of Key's shard
	hash  uint64 // Key's hash
	pass  bool   // the op alone would allow the request
}

// cost returns what op charges in a check given cost.
func (op *Op) cost(cost int64) int64 {
	if op.OwnCost {
		return op.Cost
	}
	return cost
}

// charges reports whether a check given cost charges any of ops.
func charges(ops []Op, cost int64) bool {
	for i := range ops {
		if ops[i].cost(cost) > 0 {
			return true
		}
	}
	return false
}

// CheckAll charges cost against every op's key, all or nothing: the check
// is allowed iff no non-shadow op denies, and only then is anything
// charged. An op with OwnCost charges its own Cost instead of cost. It
// holds the locks of every involved shard, taken in index
// order, for the whole decision, so that concurrent calls and Check never
// see half of it. Each op is decided first on a copy of its state (the log
// algorithm, whose entries are in a ring shared with the table, is decided
// with a peek), then committed only if the whole check passes; a check of
// cost 0 commits nothing. now is as for Check; all
// shards involved move to the latest clock among them.
//
// It returns a *WrongTypeError (nothing charged) if a key holds another
// algorithm's state and its op does not Replace, and ErrDuplicateKey if
// two ops share a key. It allocates only as Check does.
func (s *Store) CheckAll(ops []Op, cost, now int64) (bool, error) {
	if err := s.prepare(ops); err != nil {
		return false, err
	}
	if err := s.lockOps(ops); err != nil {
		return false, err
	}
	defer s.lockAll(ops, false)
	return s.checkLocked(ops, cost, now)
}

// checkLocked is CheckAll on prepared ops whose shards the caller has
// locked.
func (s *Store) checkLocked(ops []Op, cost, now int64) (bool, error) {
	if charges(ops, cost) {
		if err := s.limits.refused(); err != nil {
			return false, err
		}
	}
	for i := range ops {
		now = max(now, s.shards[ops[i].shard].clock)
	}
	allowed := true
	for i := range ops {
		s.shards[ops[i].shard].tick(now)
		if err := s.decide(&ops[i], ops[i].cost(cost), now); err != nil {
			return false, err
		}
		allowed = allowed && (ops[i].pass || ops[i].Shadow)
	}
	for i := range ops {
		switch op := &ops[i]; {
		case op.cost(cost) == 0: // a peek: decide's result is the answer
			continue
		case op.pass && allowed:
			s.commit(op, op.cost(cost), now)
		case op.pass:
			s.peek(op, now)
		}
		s.shards[ops[i].shard].hot.record(ops[i].Key, ops[i].hash, !ops[i].pass, now)
	}
	return allowed, nil
}

// prepare finds each op's shard and rejects duplicate keys.
func (s *Store) prepare(ops []Op) error {
	for i := range ops {
		ops[i].hash = xxhash.Sum64(ops[i].Key)
		ops[i].shard = int(ops[i].hash & s.mask)
		for j := 0; j < i; j++ {
			if ops[j].shard == ops[i].shard && string(ops[j].Key) == string(ops[i].Key) {
				return fmt.Errorf("%w: %q", ErrDuplicateKey, ops[i].Key)
			}
		}
	}
	return nil
}

// lockOps locks each distinct shard of ops once, in ascending index
// order, as a client's command does (lockCmd); if a shard is a busy
// script's, it unlocks what it took and returns ErrBusy.
func (s *Store) lockOps(ops []Op) error {
	for prev := -1; ; {
		next := -1
		for i := range ops {
			if sh := ops[i].shard; sh > prev && (next < 0 || sh < next) {
				next = sh
			}
		}
		if next < 0 {
			return nil
		}
		if err := s.shards[next].lockCmd(); err != nil {
			s.unlockBelow(ops, next)
			return err
		}
		prev = next
	}
}

// unlockBelow unlocks each distinct shard of ops below end.
func (s *Store) unlockBelow(ops []Op, end int) {
	done := -1
	for {
		next := -1
		for i := range ops {
			if sh := ops[i].shard; sh > done && sh < end && (next < 0 || sh < next) {
				next = sh
			}
		}
		if next < 0 {
			return
		}
		s.shards[next].mu.Unlock()
		done = next
	}
}

// lockAll locks (or unlocks) each distinct shard of ops once, in
// ascending index order, so that two multi-key checks cannot deadlock.
func (s *Store) lockAll(ops []Op, lock bool) {
	for prev := -1; ; {
		next := -1
		for i := range ops {
			if sh := ops[i].shard; sh > prev && (next < 0 || sh < next) {
				next = sh
			}
		}
		if next < 0 {
			return
		}
		if lock {
			s.shards[next].mu.Lock()
		} else {
			s.shards[next].mu.Unlock()
		}
		prev = next
	}
}

// decide sets op.Result and op.pass without changing any state. Call with the op's shard locked. The log's ring is the key's own
// or its shard's scratch ring, which the next op of the shard overwrites:
// decide keeps nothing of it, and commit decodes the key again.
func (s *Store) decide(op *Op, cost, now int64) error {
	sh := &s.shards[op.shard]
	e := sh.get(op.Key, now)
	if e != nil && e.algo != op.Algo && !op.Replace {
		return &WrongTypeError{Held: e.algo, Want: op.Algo}
	}
	if e == nil {
		// A Redis value is the user's data: never Replaced.
		if err := sh.valueError(op.Key, op.Algo, now); err != nil {
			return err
		}
	}
	if (e == nil || e.algo != op.Algo) && cost > 0 && s.limits.policy == NoEviction {
		if err := sh.room(); err != nil {
			return err // a new key, and no room: nothing is charged
		}
	}
	var st engine.State
	if e != nil && e.algo == op.Algo {
		st = e.st // a copy, except for the log's ring
	} else {
		st = sh.tab.fresh(op.Algo)
	}
	if op.Algo != engine.Log {
		op.Result = engine.Check(op.Algo, &st, op.Params, cost, now)
		op.pass = op.Result.Allowed
		return nil
	}
	// A peek changes nothing, not even the ring shared with the table.
	// The request fits iff the peek allows and shows at least cost
	// remaining.
	r := engine.Peek(engine.Log, &st, op.Params, now)
	op.pass = r.Allowed && r.Remaining >= cost
	if !op.pass && cost > 0 {
		r = engine.Check(engine.Log, &st, op.Params, cost, now) // denies: adds nothing
	}
	op.Result = r
	return nil
}

// commit charges op for real; its decision is the one decide made.
func (s *Store) commit(op *Op, cost, now int64) {
	sh := &s.shards[op.shard]
	e := sh.get(op.Key, now)
	if e != nil && e.algo != op.Algo {
		sh.remove(op.Key, e)
		e = nil
	}
	if e == nil {
		sh.room() // VolatileTTL: NoEviction refused in decide
		st := sh.tab.fresh(op.Algo)
		op.Result = engine.Check(op.Algo, &st, op.Params, cost, now)
		if exp := engine.ExpiresAt(op.Algo, &st, op.Params); exp > now {
			sh.insert(op.Key, &entry{algo: op.Algo, expires: exp, st: st})
		}
		return
	}
	op.Result = engine.Check(op.Algo, &e.st, op.Params, cost, now)
	sh.update(op.Key, e, engine.ExpiresAt(op.Algo, &e.st, op.Params), now)
}

// peek replaces a passing op's result with its uncharged allowance. The
// log's result already is one (decide ran it with cost 0).
func (s *Store) peek(op *Op, now int64) {
	if op.Algo == engine.Log {
		return
	}
	var st engine.State
	if e := s.shards[op.shard].get(op.Key, now); e != nil && e.algo == op.Algo {
		st = e.st
	}
	op.Result = engine.Check(op.Algo, &st, op.Params, 0, now)
}
