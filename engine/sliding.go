package engine

import "math/bits"

// Sliding window counter.
//
// State: N counts window T (aligned like fixed), P counts the window before
// T. At time now in the window starting at s, elapsed e = now - s, the
// weighted count is floor(cur + prev*(W-e)/W), where cur and prev are the
// counts of windows s and s-W. A request passes iff weighted + cost <= limit.

// slidingCounts returns the counts of the current and previous windows as of
// the window starting at start.
func slidingCounts(st *State, start, w int64) (cur, prev int64) {
	switch {
	case st.T >= start:
		return st.N, st.P
	case st.T >= start-w:
		return 0, st.N
	}
	return 0, 0
}

// weighted returns floor(prev*(w-e)/w).
func weighted(prev, w, e int64) int64 {
	return int64(mulDiv(uint64(prev), uint64(w-e), uint64(w)))
}

// firstElapsed returns the smallest elapsed time e >= from within a window
// of length w at which floor(prev*(w-e)/w) <= k, for k >= 0.
func firstElapsed(prev, w, k, from int64) int64 {
	if prev == 0 {
		return from
	}
	// floor(prev*(w-e)/w) <= k  <=>  prev*(w-e) <= (k+1)*w - 1
	//                            <=>  e >= w - floor(((k+1)*w - 1)/prev)
	hi, lo := bits.Mul64(uint64(k+1), uint64(w))
	lo, borrow := bits.Sub64(lo, 1, 0)
	hi -= borrow
	span := uint64(w)
	if hi < uint64(prev) {
		q, _ := bits.Div64(hi, lo, uint64(prev))
		span = min(q, span)
	}
	return max(w-int64(span), from)
}

func checkSliding(st *State, p Params, cost, now int64) Result {
	w, limit := p.Window, p.Limit
	start := floorDiv(now, w) * w
	e := now - start
	cur, prev := slidingCounts(st, start, w)
	count := cur + weighted(prev, w, e)
	r := Result{Limit: limit}
	if count+cost <= limit {
		r.Allowed = true
		if cost > 0 {
			cur += cost
			count += cost
			st.T, st.N, st.P = start, cur, prev
		}
	} else if cost > limit {
		r.RetryAfter = -1
	} else {
		r.RetryAfter = slidingRetry(cur, prev, w, limit-cost, e) - e
	}
	r.Remaining = max(limit-count, 0)
	r.ResetAfter = slidingRetry(cur, prev, w, 0, e) - e
	return r
}

// slidingRetry returns the elapsed time, counted from the start of the
// current window (it may lie in the next window), at which the weighted
// count first drops to at most k, for 0 <= k < limit.
func slidingRetry(cur, prev, w, k, e int64) int64 {
	if cur <= k {
		// The current window's own count fits: wait for the previous
		// window's share to shrink.
		if e2 := firstElapsed(prev, w, k-cur, e); e2 < w {
			return e2
		}
		return w
	}
	// Only in the next window, where cur becomes the previous count.
	return w + firstElapsed(cur, w, k, 0)
}
