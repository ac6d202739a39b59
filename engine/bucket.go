package engine

// Token bucket and leaky bucket.
//
// Both are kept as an exact theoretical arrival time (TAT): the instant at
// which the bucket would be full again (token) or empty again (leaky). With
// capacity B and rate L per W, the token count at time t is
// B - max(0, TAT-t)*L/W and the leaky level is max(0, TAT-t)*L/W, so the two
// admit exactly the same requests: a request of cost c passes iff
// max(0, TAT-now)*L + c*W <= B*W. They differ only in name and in how a user
// reads them; both are offered so that migrating users keep their vocabulary.
//
// State: TAT = T + N/P nanoseconds, where T is whole nanoseconds, P is the
// limit the fraction is counted in (the limit of the last admitted check)
// and 0 <= N < P. Keeping the fraction makes the arithmetic exact: a full
// bucket of B is always admitted at one instant, and the long-run rate is
// exactly L/W. When the limit changes, the fraction is rescaled, rounding
// the TAT up by less than a nanosecond.

// bucketTAT returns the TAT fraction of st expressed in units of 1/limit ns.
func bucketTAT(st *State, limit int64) (t, frac int64) {
	if st.N == 0 || st.P == limit || st.P == 0 {
		return st.T, st.N
	}
	frac = int64(mulDivCeil(uint64(st.N), uint64(limit), uint64(st.P)))
	if frac >= limit {
		return st.T + 1, 0
	}
	return st.T, frac
}

// debtAt returns max(0, TAT-now)*limit: how far the bucket is from full,
// in units of 1/limit ns.
func debtAt(t, frac, limit, now int64) u128 {
	switch {
	case t > now:
		return mul128(uint64(t-now), uint64(limit)).add(u128{0, uint64(frac)})
	case t == now:
		return u128{0, uint64(frac)}
	}
	return u128{}
}

func checkBucket(st *State, p Params, cost, now int64) Result {
	limit, w := p.Limit, p.Window
	capa := p.Capacity(Token)
	t, frac := bucketTAT(st, limit)
	if t < now {
		t, frac = now, 0
	}
	debt := debtAt(t, frac, limit, now)
	full := mul128(uint64(capa), uint64(w))
	r := Result{Limit: capa}
	switch {
	case cost > capa:
		r.RetryAfter = -1
	case !full.less(debt.add(mul128(uint64(cost), uint64(w)))):
		r.Allowed = true
		if cost > 0 {
			q, rem := mul128(uint64(cost), uint64(w)).divmod(uint64(limit))
			frac += int64(rem)
			if frac >= limit {
				frac -= limit
				q++
			}
			t += int64(q)
			st.T, st.N, st.P = t, frac, limit
			debt = debtAt(t, frac, limit, now)
		}
	default:
		r.RetryAfter = bucketRetry(t, frac, capa-cost, limit, w) - now
	}
	if debt.less(full) {
		left, _ := full.sub(debt).divmod(uint64(w))
		r.Remaining = int64(left)
	}
	r.ResetAfter = int64(debt.ceilDiv(uint64(limit)))
	return r
}

// bucketRetry returns the first whole nanosecond at which the debt is at
// most room*W: t >= TAT - room*W/L.
func bucketRetry(t, frac, room, limit, w int64) int64 {
	x := mul128(uint64(room), uint64(w))
	if x.less(u128{0, uint64(frac)}) {
		return t + 1
	}
	q, _ := x.sub(u128{0, uint64(frac)}).divmod(uint64(limit))
	return t - int64(q)
}
