package engine

import (
	"errors"
	"fmt"
)

// Algo identifies a limiting algorithm. The zero value is not a valid
// algorithm.
type Algo uint8

// The algorithms, in the order docs/commands.md ("Which algorithm") gives them.
const (
	Fixed   Algo = 1 + iota // fixed window counter, windows aligned to the epoch
	Sliding                 // sliding window counter (weighted previous window)
	Log                     // sliding window log, exact
	Token                   // token bucket, starts full
	Leaky                   // leaky bucket as a meter, starts empty
	GCRA                    // generic cell rate algorithm, as redis-cell
)

// NumAlgos is one more than the largest Algo, for tables indexed by Algo.
const NumAlgos = int(GCRA) + 1

var algoNames = [NumAlgos]string{"", "fixed", "sliding", "log", "token", "leaky", "gcra"}

// String returns the algorithm's lower-case name as used on the wire.
func (a Algo) String() string {
	if a == 0 || int(a) >= NumAlgos {
		return fmt.Sprintf("algo(%d)", uint8(a))
	}
	return algoNames[a]
}

// Valid reports whether a names one of the six algorithms.
func (a Algo) Valid() bool { return a >= Fixed && a <= GCRA }

// Bucket reports whether a is a bucket algorithm (token, leaky, gcra), for
// which BURST sets the capacity.
func (a Algo) Bucket() bool { return a == Token || a == Leaky || a == GCRA }

// ParseAlgo returns the Algo named by b, compared case-insensitively. It does
// not allocate.
func ParseAlgo(b []byte) (Algo, bool) {
	if len(b) < 3 || len(b) > 7 {
		return 0, false
	}
	var buf [7]byte
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	name := buf[:len(b)]
	for a := Fixed; a <= GCRA; a++ {
		if string(name) == algoNames[a] {
			return a, true
		}
	}
	return 0, false
}

// Bounds on parameters. They keep every intermediate product inside 128
// bits and every stored time inside int64.
const (
	MaxLimit  = 1 << 48                    // largest limit, burst or cost
	MaxWindow = int64(366 * 24 * 3600e9)   // largest window: 366 days, in ns
	MinWindow = int64(1e6)                 // smallest window: 1 ms, in ns
	maxSpan   = int64(100 * 366 * 86400e9) // largest burst*window/limit, ns
)

// Errors returned by Params.Validate. The server turns them into RESP errors
// naming the argument.
var (
	ErrLimit  = errors.New("limit must be a positive integer no larger than 2^48")
	ErrWindow = errors.New("window must be between 1ms and 366d")
	ErrBurst  = errors.New("burst must be a non-negative integer no larger than 2^48")
	ErrCost   = errors.New("cost must be a non-negative integer no larger than 2^48")
	ErrSpan   = errors.New("burst × window / limit is longer than 100 years")
	ErrRate   = errors.New("limit / window is above one request per nanosecond")
)

// Params are the parameters of one check: Limit requests per Window
// nanoseconds; Burst is the bucket capacity for token, leaky and gcra (0
// means Limit) and is ignored by the window algorithms.
type Params struct {
	Limit  int64
	Window int64
	Burst  int64
}

// Capacity returns the number reported as the limit: Burst (or Limit when
// Burst is 0) for bucket algorithms, Limit for window algorithms.
func (p Params) Capacity(a Algo) int64 {
	if a.Bucket() && p.Burst > 0 {
		return p.Burst
	}
	return p.Limit
}

// Validate checks p against the bounds above for algorithm a.
func (p Params) Validate(a Algo) error {
	switch {
	case p.Limit <= 0 || p.Limit > MaxLimit:
		return ErrLimit
	case p.Window < MinWindow || p.Window > MaxWindow:
		return ErrWindow
	case p.Burst < 0 || p.Burst > MaxLimit:
		return ErrBurst
	}
	if a.Bucket() && mulDiv(uint64(p.Capacity(a)), uint64(p.Window), uint64(p.Limit)) > uint64(maxSpan) {
		return ErrSpan
	}
	if a == GCRA && Interval(p.Limit, p.Window) == 0 {
		return ErrRate
	}
	return nil
}

// ValidCost reports whether cost is within [0, MaxLimit].
func ValidCost(cost int64) bool { return cost >= 0 && cost <= MaxLimit }

// Result is the outcome of one check. Durations are nanoseconds.
type Result struct {
	Allowed    bool  // the request may pass; a denied request consumed nothing
	Limit      int64 // for X-RateLimit-Limit: the capacity for bucket algorithms
	Remaining  int64 // cost-1 requests still allowed now, after this one; >= 0
	RetryAfter int64 // 0 if allowed; else ns until this request would pass; -1 never
	ResetAfter int64 // ns until the key is back to its full allowance
}

// State is the per-key limiter state. Its fields mean different things per
// algorithm (see each algorithm's file); the zero State is a fresh key.
// A State is not safe for concurrent use: the caller serialises access.
type State struct {
	T   int64 // fixed, sliding: window start; token, leaky: last admission; gcra: theoretical arrival time
	N   int64 // fixed, sliding: count in window T; token, leaky: low word of tokens-in-use × window
	P   int64 // sliding: count in the window before T; token, leaky: high word of tokens-in-use × window
	Log *Ring // log: admitted entries, oldest first
}

// Check charges cost against st for algorithm a with parameters p at time
// now and returns the decision. st is updated only if the request is
// allowed (and the cost is non-zero); a denied request leaves it as it was,
// up to rewrites that change no decision under the same parameters (a
// bucket whose capacity fell stores the capped amount: see bucket.go). The caller must
// have validated p and cost.
func Check(a Algo, st *State, p Params, cost, now int64) Result {
	switch a {
	case Fixed:
		return checkFixed(st, p, cost, now)
	case Sliding:
		return checkSliding(st, p, cost, now)
	case Log:
		return checkLog(st, p, cost, now)
	case Token, Leaky:
		return checkBucket(st, p, cost, now)
	case GCRA:
		return checkGCRA(st, p, cost, now)
	}
	panic("engine: invalid algorithm " + a.String())
}

// Peek returns what Check with cost 0 returns, without changing st in any
// way, whatever p is: a peek with other parameters than the key's state
// was written with must leave that state for the next check. Check with
// cost 0 may rewrite st (the log trims entries that have left the
// window, and the window is p's).
func Peek(a Algo, st *State, p Params, now int64) Result {
	if a == Log {
		return peekLog(st, p, now)
	}
	cp := *st
	return Check(a, &cp, p, 0, now)
}

// ExpiresAt returns the time from which st, written under parameters p, is
// indistinguishable from a fresh key, so the caller may drop it. A result
// <= now means st may be dropped now.
func ExpiresAt(a Algo, st *State, p Params) int64 {
	switch a {
	case Fixed:
		if st.N == 0 {
			return 0
		}
		return st.T + p.Window
	case Sliding:
		switch {
		case st.N > 0:
			return st.T + 2*p.Window
		case st.P > 0:
			return st.T + p.Window
		}
		return 0
	case Log:
		if st.Log == nil || st.Log.Len() == 0 {
			return 0
		}
		return st.Log.Last().At + p.Window
	case Token, Leaky:
		return bucketExpiresAt(st, p)
	default:
		return st.T
	}
}

// floorDiv returns floor(a/b) for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// ceilDiv returns ceil(a/b) for a >= 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
