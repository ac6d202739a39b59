package engine

// GCRA, with the arithmetic of redis-cell's CL.THROTTLE.
//
// State: T is the theoretical arrival time (TAT) in nanoseconds. With
// emission interval E = trunc(W/L) (computed as redis-cell does, through a
// float64 division) and delay variation tolerance DVT = E*B, a request of
// cost c passes iff max(TAT, now) + E*c - DVT <= now. Because E is truncated
// to whole nanoseconds, the long-run rate may exceed L/W by less than one
// request per E nanoseconds of error; this is redis-cell's behaviour, kept
// so that decisions match CL.THROTTLE exactly.

// Interval returns GCRA's emission interval for limit requests per window
// nanoseconds, as redis-cell computes it; 0 means the rate is too high to be
// represented.
func Interval(limit, window int64) int64 {
	if limit == 0 || window == 0 {
		return 0
	}
	return int64(float64(window) / float64(limit))
}

// gcraStep is one GCRA decision in redis-cell's terms, durations in ns.
type gcraStep struct {
	limited bool
	never   bool  // the cost exceeds the tolerance: retrying cannot help
	retry   int64 // when limited and not never: ns until allowed
	ttl     int64 // ns until the TAT, after the decision
	newTAT  int64 // the TAT to store when allowed
	next    int64 // the tolerance left after the decision (DVT - ttl), ns
}

// gcra runs redis-cell's rate_limit arithmetic for a request of quantity
// against a tolerance of limit emission intervals. It saturates at the
// int64 bounds where redis-cell's would overflow (its 64-bit products
// wrap around, and its time library panics, which takes Redis down), and
// groups the terms so that saturating one never flips a decision: a
// quantity above the limit is never allowed, and a tolerance beyond 292
// years is as good as unlimited. Within the range the results are
// redis-cell's, bit for bit.
func gcra(tat, interval, limit, quantity, now int64) gcraStep {
	tat = max(tat, now)
	// The request fits from TAT + interval*quantity - DVT on.
	allowAt := satAdd(tat, satMul(interval, satSub(quantity, limit)))
	if diff := satSub(now, allowAt); diff < 0 {
		ttl := tat - now
		return gcraStep{limited: true, never: mulGreater(interval, quantity, limit), retry: satSub(0, diff),
			ttl: ttl, next: satSub(satMul(interval, limit), ttl)}
	}
	newTAT := satAdd(tat, satMul(interval, quantity))
	return gcraStep{ttl: satSub(newTAT, now), newTAT: newTAT,
		next: satSub(satMul(interval, satSub(limit, quantity)), tat-now)}
}

// mulGreater reports whether interval*a > interval*b, exactly.
func mulGreater(interval, a, b int64) bool {
	switch {
	case interval > 0:
		return a > b
	case interval < 0:
		return a < b
	}
	return false
}

func checkGCRA(st *State, p Params, cost, now int64) Result {
	capa := p.Capacity(GCRA)
	interval := Interval(p.Limit, p.Window)
	r := Result{Limit: capa}
	var s gcraStep
	if cost > capa {
		ttl := max(st.T, now) - now
		s = gcraStep{limited: true, never: true, ttl: ttl, next: interval*capa - ttl}
	} else {
		s = gcra(st.T, interval, capa, cost, now)
	}
	switch {
	case s.never:
		r.RetryAfter = -1
	case s.limited:
		r.RetryAfter = s.retry
	default:
		r.Allowed = true
		if cost > 0 {
			st.T = s.newTAT
		}
	}
	if s.next > 0 {
		r.Remaining = s.next / interval
	}
	r.ResetAfter = s.ttl
	return r
}

// CellResult is the reply of CL.THROTTLE, durations in nanoseconds as
// redis-cell computes them before rounding to seconds.
type CellResult struct {
	Limited    bool
	Limit      int64 // max_burst + 1
	Remaining  int64
	RetryAfter int64 // -1 s (as ns) when not limited or never allowed
	ResetAfter int64
}

// ErrZeroRate is redis-cell's error for a rate whose emission interval is 0.
var ErrZeroRate = errorString("Zero rates are not supported")

type errorString string

func (e errorString) Error() string { return string(e) }

// CellThrottle runs CL.THROTTLE key max_burst count period quantity on st at
// time now, with redis-cell's arithmetic exactly, including its handling of
// quantity 0 (a peek) and of quantities above the burst (limited, retry -1),
// except that it saturates where redis-cell's would overflow (see gcra;
// the limit max_burst+1 too). period is in seconds.
func CellThrottle(st *State, maxBurst, count, period, quantity, now int64) (CellResult, error) {
	interval := Interval(count, period*1e9)
	if interval == 0 {
		return CellResult{}, ErrZeroRate
	}
	limit := satAdd(maxBurst, 1)
	s := gcra(st.T, interval, limit, quantity, now)
	res := CellResult{Limited: s.limited, Limit: limit, RetryAfter: -1e9, ResetAfter: s.ttl}
	if s.limited && !s.never {
		res.RetryAfter = s.retry
	}
	if !s.limited && quantity != 0 {
		st.T = s.newTAT
	}
	if s.next > -interval {
		res.Remaining = cellDiv(s.next/1000, interval/1000)
	}
	return res, nil
}

// cellDiv divides microseconds as redis-cell does: in float64, truncated,
// saturating at the int64 range (Rust's `as i64`), NaN giving 0.
func cellDiv(num, den int64) int64 {
	switch {
	case den != 0:
		return int64(float64(num) / float64(den))
	case num > 0:
		return 1<<63 - 1
	case num < 0:
		return -1 << 63
	}
	return 0
}

// CellSeconds rounds a redis-cell duration to whole seconds as CL.THROTTLE
// replies: truncated, plus one when at least a millisecond is left over (a
// whole 2 s stays 2).
func CellSeconds(ns int64) int64 {
	s := ns / 1e9
	if (ns%1e9)/1e6 > 0 {
		s++
	}
	return s
}
