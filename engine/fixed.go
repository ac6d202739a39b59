package engine

// Fixed window counter.
//
// State: T is the start of the window that N counts. Windows are aligned to
// the Unix epoch: the window holding now starts at floor(now/W)*W. A stored
// count belongs to the current window when T >= that start, which also keeps
// the count when the window is made longer (the old window lies inside the
// new one) and drops it when the window is made shorter and has moved on.
func checkFixed(st *State, p Params, cost, now int64) Result {
	start := floorDiv(now, p.Window) * p.Window
	end := start + p.Window
	n := st.N
	if st.T < start {
		n = 0
	}
	r := Result{Limit: p.Limit}
	if n+cost <= p.Limit {
		r.Allowed = true
		if cost > 0 {
			n += cost
			st.T, st.N = start, n
		}
	} else if cost > p.Limit {
		r.RetryAfter = -1
	} else {
		r.RetryAfter = end - now
	}
	r.Remaining = max(p.Limit-n, 0)
	if n > 0 {
		r.ResetAfter = end - now
	}
	return r
}
