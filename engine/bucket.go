package engine

// Token bucket and leaky bucket.
//
// Both keep the amount U of the bucket in use: the tokens taken (token) or
// the level (leaky). With capacity B and rate L per W, U drains at L/W per
// nanosecond, and a request of cost c passes iff U(now) + c <= B. The token
// count is B - U, so the two admit exactly the same requests; they differ
// only in name, and both are offered so that migrating users keep their
// vocabulary.
//
// State: T is the time of the last admission, and U*W (tokens times
// nanoseconds, an integer because U drains in steps of L/W) is kept in 128
// bits: P holds the high word and N the low word. The arithmetic is exact: a
// full bucket of B is always admitted at one instant, and the long-run rate
// is exactly L/W. The parameters of each check apply to the time since the
// last admission, so a change of limit or burst keeps the tokens in use
// (raising a limit never takes tokens away), and retry_after and
// reset_after are exact for as long as the parameters stay. A change of
// window keeps U*W, which scales the tokens in use by old/new window. After
// a change, the amount stored is capped at the new capacity before it
// drains, so a key never owes more than one full bucket; a check that
// charges (cost > 0) stores the capped amount even when it is denied, so
// that a later change starts from the amount this check saw and answered
// with, not from the old bucket's (lowering the capacity and raising it
// again must not bring back tokens in use that the lower one had dropped).

// bucketUsed returns U*W stored in st.
func bucketUsed(st *State) u128 { return u128{uint64(st.P), uint64(st.N)} }

// usedAt returns U*W at now: the stored amount, capped at full (capacity
// times window), drained by (now-T)*limit, never below zero.
func usedAt(st *State, full u128, limit, now int64) u128 {
	used := bucketUsed(st)
	if full.less(used) {
		used = full
	}
	if now <= st.T || used == (u128{}) {
		return used
	}
	drained := mul128(uint64(now-st.T), uint64(limit))
	if !drained.less(used) {
		return u128{}
	}
	return used.sub(drained)
}

func checkBucket(st *State, p Params, cost, now int64) Result {
	limit, w := p.Limit, p.Window
	capa := p.Capacity(Token)
	full := mul128(uint64(capa), uint64(w))
	capped := full.less(bucketUsed(st)) // the capacity fell since the last admission
	used := usedAt(st, full, limit, now)
	r := Result{Limit: capa}
	switch after := used.add(mul128(uint64(cost), uint64(w))); {
	case cost > capa:
		r.RetryAfter = -1
	case !full.less(after):
		r.Allowed = true
		if cost > 0 {
			used = after
			st.T, st.P, st.N = now, int64(used.hi), int64(used.lo)
		}
	default:
		// Wait until the bucket has drained to (capa-cost)*W.
		r.RetryAfter = int64(after.sub(full).ceilDiv(uint64(limit)))
	}
	if capped && cost > 0 && !r.Allowed {
		// The same as the stored amount for these parameters, so no
		// decision under them changes (see the comment at the top).
		st.T, st.P, st.N = now, int64(used.hi), int64(used.lo)
	}
	if used.less(full) {
		left, _ := full.sub(used).divmod(uint64(w))
		r.Remaining = int64(left)
	}
	r.ResetAfter = int64(used.ceilDiv(uint64(limit)))
	return r
}

// bucketExpiresAt returns when the bucket of st is empty again under p.
func bucketExpiresAt(st *State, p Params) int64 {
	used := usedAt(st, mul128(uint64(p.Capacity(Token)), uint64(p.Window)), p.Limit, st.T)
	if used == (u128{}) {
		return 0
	}
	return st.T + int64(used.ceilDiv(uint64(p.Limit)))
}
