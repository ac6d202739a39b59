package engine

// Refund: giving back an admitted charge.
//
// A cluster charges one request to counters held by several Raft groups,
// one group after the other. When a later group denies, the charges made
// in the earlier groups are given back, so that the request is charged
// nowhere. A State keeps only a summary of the charges it has seen, so a
// refund cannot always tell how much of one charge the state still holds;
// where it cannot, it gives back what it is sure of, never more: a state
// refunded too little denies a little early, one refunded too much would
// let the cluster admit more than a rule's limit.
//
// "The twin" below is the state the key would have had if the refunded
// charge had never been made, every other admission unchanged.

// Refund gives back a charge of cost made on st at time chargedAt by an
// allowed Check(a, st, p, cost, chargedAt), possibly followed by checks of
// other requests with the same parameters p, at now: the current time, no
// earlier than chargedAt or any check of st. It
// changes st so that every later decision is the twin's as far as the
// state can express it, and it never gives back more than the state still
// holds of the charge: from then on st never allows a request that the
// twin would deny. Per algorithm:
//
//   - fixed: if the state still counts the window holding chargedAt (T is
//     its start), cost comes off the count, not below 0; else nothing (the
//     charge's window is over and counts no more). Exact.
//   - sliding: cost comes off the count of chargedAt's window: the current
//     count if T is its start, the previous count if T is the next window's
//     start; else nothing (the window no longer weighs). Not below 0. Exact.
//   - log: cost comes off the entry at chargedAt (an entry holds every
//     admission of its instant), which is removed if nothing is left; if
//     there is no such entry (trimmed once out of the window), nothing.
//     Exact.
//   - token, leaky: T is the last admission, so every admission since the
//     charge lies in [chargedAt, T]; while the twin's bucket stood empty in
//     that span the two drained apart, by at most (T-chargedAt)*limit
//     token-nanoseconds. So cost*window minus that drain comes off the
//     amount in use as of T (capped at the full bucket, as a check caps it,
//     not below 0); T is kept. Exact when no admission came at a later
//     instant than the charge (T == chargedAt); otherwise it may give back
//     up to (T-chargedAt)*limit/window tokens too few. Nothing if T <
//     chargedAt (the charge is not in this state).
//   - gcra: the TAT holds no time of the last admission, so the admissions
//     since the charge may lie anywhere up to now: the TAT moves back by
//     interval*cost - (now - chargedAt) (nothing if that is not positive),
//     to no earlier than now, with gcra.go's saturating arithmetic. A TAT
//     at or before now reads as a fresh key and is left alone. Exact when
//     now == chargedAt; otherwise the TAT may stay up to now-chargedAt
//     later than the twin's. Moving it back by the whole interval*cost
//     (down to chargedAt) would over-return whenever another request was
//     admitted after chargedAt on a bucket that had room.
//   - cost <= 0: nothing.
//
// A chargedAt earlier than the time the charge was made at makes every
// algorithm give back less or nothing, never more; a later one is not
// allowed. A refund is not an admission: no algorithm records one.
//
// Refund reads no clock, does not allocate, and leaves st valid for Check,
// Peek, ExpiresAt and AppendState; ExpiresAt(a, st, p) afterwards may be
// earlier, and may be <= now when st is as good as fresh. The caller
// validates p and serialises access to st, as for Check; a must be valid
// (Refund panics otherwise, as Check does). With other parameters than p
// since the charge (a changed rule), or a reset of the key in between, the
// guarantee above does not hold.
func Refund(a Algo, st *State, p Params, cost, chargedAt, now int64) {
	if cost <= 0 {
		return
	}
	switch a {
	case Fixed:
		refundFixed(st, p, cost, chargedAt)
	case Sliding:
		refundSliding(st, p, cost, chargedAt)
	case Log:
		if st.Log != nil {
			st.Log.refund(chargedAt, cost)
		}
	case Token, Leaky:
		refundBucket(st, p, cost, chargedAt)
	case GCRA:
		refundGCRA(st, p, cost, chargedAt, now)
	default:
		panic("engine: invalid algorithm " + a.String())
	}
}

// refundFixed takes cost off the count if it is chargedAt's window's.
func refundFixed(st *State, p Params, cost, chargedAt int64) {
	if st.T == floorDiv(chargedAt, p.Window)*p.Window {
		st.N -= min(cost, st.N)
	}
}

// refundSliding takes cost off the count of chargedAt's window, current
// or previous.
func refundSliding(st *State, p Params, cost, chargedAt int64) {
	start := floorDiv(chargedAt, p.Window) * p.Window
	switch st.T {
	case start:
		st.N -= min(cost, st.N)
	case start + p.Window:
		st.P -= min(cost, st.P)
	}
}

// refund takes up to cost off the entry at time at, if there is one,
// removing it when nothing is left. It does not allocate.
func (r *Ring) refund(at, cost int64) {
	mask := len(r.buf) - 1
	for i := r.n - 1; i >= 0; i-- { // newest first: refunds are of recent charges
		e := &r.buf[(r.head+i)&mask]
		if e.At < at {
			return
		}
		if e.At > at {
			continue
		}
		take := min(cost, e.Cost)
		e.Cost -= take
		r.sum -= take
		if e.Cost == 0 {
			r.removeAt(i)
		}
		return
	}
}

// removeAt removes the i-th entry, oldest first, shifting the newer ones
// down.
func (r *Ring) removeAt(i int) {
	mask := len(r.buf) - 1
	for k := i; k < r.n-1; k++ {
		r.buf[(r.head+k)&mask] = r.buf[(r.head+k+1)&mask]
	}
	r.n--
	if r.n == 0 {
		r.head = 0
	}
}

// refundBucket takes cost*W, less the drain from chargedAt to the last
// admission, off the amount in use as of that admission.
func refundBucket(st *State, p Params, cost, chargedAt int64) {
	used := bucketUsed(st)
	if st.T < chargedAt || used == (u128{}) {
		return
	}
	back := mul128(uint64(cost), uint64(p.Window))
	// T >= chargedAt, so the wrapped difference is the exact one.
	drained := mul128(uint64(st.T-chargedAt), uint64(p.Limit))
	if !drained.less(back) {
		return
	}
	back = back.sub(drained)
	if full := mul128(uint64(p.Capacity(Token)), uint64(p.Window)); full.less(used) {
		used = full
	}
	if back.less(used) {
		used = used.sub(back)
	} else {
		used = u128{}
	}
	st.P, st.N = int64(used.hi), int64(used.lo)
}

// refundGCRA moves the TAT back by interval*cost less the time since the
// charge, to no earlier than now.
func refundGCRA(st *State, p Params, cost, chargedAt, now int64) {
	if st.T <= now || st.T == maxInt64 { // fresh, or saturated: nothing known
		return
	}
	back := satSub(satMul(Interval(p.Limit, p.Window), cost), max(satSub(now, chargedAt), 0))
	if back <= 0 {
		return
	}
	st.T = max(satSub(st.T, back), now)
}
