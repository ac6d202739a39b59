package shards

import "github.com/rlserver/rlserver/engine"

// RefundAll gives back the charges that an allowed CheckAll made, so that
// the request ends up charged nowhere: a cluster calls it on the Raft
// groups that charged a request when a later group denies it. ops, cost
// and chargedAt are the ops as that CheckAll left them (their Results
// filled), its cost and the now it was given; now is the current time, as
// for Check.
//
// An op was charged iff its Result is allowed (a shadow op that would
// have denied was not), and only if the check as a whole was allowed: if
// a non-shadow op's Result is a denial, nothing was charged and RefundAll
// gives nothing back. Ops of a CheckAll that failed with an error carry
// stale Results; do not pass them. For each charged op whose key still
// holds state of its algorithm, RefundAll applies engine.Refund with the
// op's Params (see it for what comes back per algorithm: never more than
// was charged, sometimes less); a key that is gone (expired, reset) or now
// holds another algorithm's state is skipped. If the shards' clocks were
// past chargedAt when CheckAll ran, it charged at their time, and the
// refund may give back less, never more.
//
// It holds the locks of every involved shard, taken in index order, for
// the whole refund, as CheckAll does, and moves them to the latest clock
// among them and now. With the journal on, each changed key is recorded
// as a check's change is: its new state, or its deletion if the refund
// left it as good as fresh. It returns ErrDuplicateKey (nothing given
// back) if two ops share a key. It allocates only as Check does, and less:
// it never adds a key.
func (s *Store) RefundAll(ops []Op, cost, chargedAt, now int64) error {
	if err := s.prepare(ops); err != nil {
		return err
	}
	if !charges(ops, cost) || !wasCharged(ops) {
		return nil
	}
	s.lockAll(ops, true)
	defer s.lockAll(ops, false)
	for i := range ops {
		now = max(now, s.shards[ops[i].shard].clock)
	}
	for i := range ops {
		sh := &s.shards[ops[i].shard]
		sh.tick(now)
		if c := ops[i].cost(cost); c > 0 && ops[i].Result.Allowed {
			sh.refund(&ops[i], c, chargedAt, now)
		}
	}
	return nil
}

// wasCharged reports whether ops are those of an allowed CheckAll: no
// non-shadow op denied.
func wasCharged(ops []Op) bool {
	for i := range ops {
		if !ops[i].Shadow && !ops[i].Result.Allowed {
			return false
		}
	}
	return true
}

// refund gives back op's charge on its key, if the key holds state of op's
// algorithm, and records the change. Call with the op's shard locked.
func (sh *shard) refund(op *Op, cost, chargedAt, now int64) {
	e := sh.get(op.Key, now)
	if e == nil || e.algo != op.Algo {
		return
	}
	t, n, p, sum := e.st.T, e.st.N, e.st.P, logSum(&e.st)
	engine.Refund(op.Algo, &e.st, op.Params, cost, chargedAt, now)
	if e.st.T == t && e.st.N == n && e.st.P == p && logSum(&e.st) == sum {
		return // nothing came back: nothing to write or record
	}
	sh.update(op.Key, e, engine.ExpiresAt(op.Algo, &e.st, op.Params), now)
}

// logSum returns the total cost of st's log entries, 0 for none. A refund
// that changes a log lowers it.
func logSum(st *engine.State) int64 {
	if st.Log == nil {
		return 0
	}
	return st.Log.Sum()
}
