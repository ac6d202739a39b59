package engine

// Sliding window log.
//
// State: Log holds the admitted requests (time, cost), oldest first. A
// request at now passes iff the cost admitted in (now-W, now] plus its own
// cost is at most the limit. Denied requests are not logged. Entries that
// have left the window are trimmed on every check.

// DefaultMaxLogLimit is the largest limit the log algorithm accepts by
// default (the server's --max-log-limit): a key's log holds up to that many
// entries, so the bound is one on a key's memory. The server, the HTTP API
// and the Envoy config parser default to it.
const DefaultMaxLogLimit = 10000

// Entry is one admitted request in a sliding window log.
type Entry struct {
	At   int64 // admission time, ns since the epoch
	Cost int64 // admitted cost, > 0
}

// Ring is a growable ring buffer of log entries with a running sum of their
// costs. It allocates only when it grows past its capacity, so a key in
// steady state checks without allocating. Not safe for concurrent use.
type Ring struct {
	buf  []Entry // its length is 0 or a power of two, so that an index wraps with a mask
	head int
	n    int
	sum  int64
}

// Len returns the number of entries.
func (r *Ring) Len() int { return r.n }

// Sum returns the total cost of the entries.
func (r *Ring) Sum() int64 { return r.sum }

// Cap returns the capacity of the buffer, for memory accounting.
func (r *Ring) Cap() int { return len(r.buf) }

// At returns the i-th entry, oldest first.
func (r *Ring) At(i int) Entry { return r.buf[(r.head+i)&(len(r.buf)-1)] }

// Last returns the newest entry; the ring must not be empty.
func (r *Ring) Last() Entry { return r.At(r.n - 1) }

// Push appends an entry; entries must be pushed in time order. An entry at
// the same time as the newest is merged into it.
func (r *Ring) Push(e Entry) {
	r.sum += e.Cost
	if r.n > 0 {
		i := (r.head + r.n - 1) & (len(r.buf) - 1)
		if r.buf[i].At == e.At {
			r.buf[i].Cost += e.Cost
			return
		}
	}
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = e
	r.n++
}

func (r *Ring) grow() {
	nb := make([]Entry, max(4, 2*len(r.buf)))
	for i := 0; i < r.n; i++ {
		nb[i] = r.At(i)
	}
	r.buf, r.head = nb, 0
}

// Load replaces the ring's entries with es, oldest first, which must be as
// Push leaves them: times strictly increasing, costs positive. It copies
// es and allocates only if es does not fit in the buffer.
func (r *Ring) Load(es []Entry) {
	if len(es) > len(r.buf) {
		size := max(4, len(r.buf))
		for size < len(es) {
			size *= 2
		}
		r.buf = make([]Entry, size)
	}
	r.head, r.n, r.sum = 0, copy(r.buf, es), 0
	for _, e := range es {
		r.sum += e.Cost
	}
}

// Reset empties the ring, keeping its buffer, so that a ring reused for
// another log does not allocate until it outgrows the buffer.
func (r *Ring) Reset() { r.head, r.n, r.sum = 0, 0, 0 }

// TrimBefore drops the entries at or before t.
func (r *Ring) TrimBefore(t int64) {
	for r.n > 0 && r.buf[r.head].At <= t {
		r.sum -= r.buf[r.head].Cost
		r.head = (r.head + 1) & (len(r.buf) - 1)
		r.n--
	}
	if r.n == 0 {
		r.head = 0
	}
}

func checkLog(st *State, p Params, cost, now int64) Result {
	ring := st.Log
	if ring == nil {
		ring = &Ring{}
	}
	ring.TrimBefore(now - p.Window)
	sum := ring.Sum()
	if sum+cost <= p.Limit && cost > 0 {
		ring.Push(Entry{At: now, Cost: cost})
		st.Log = ring
		r := logResult(ring, 0, sum+cost, p, 0, now)
		r.Allowed = true
		return r
	}
	return logResult(ring, 0, sum, p, cost, now)
}

// peekLog is checkLog with cost 0 that leaves st as it is: the entries
// that have left the window are skipped, not trimmed.
func peekLog(st *State, p Params, now int64) Result {
	if st.Log == nil {
		return logResult(nil, 0, 0, p, 0, now)
	}
	ring, from, sum := st.Log, 0, st.Log.Sum()
	for from < ring.Len() && ring.At(from).At <= now-p.Window {
		sum -= ring.At(from).Cost
		from++
	}
	return logResult(ring, from, sum, p, 0, now)
}

// logResult is the decision for cost on a log whose entries in the window
// are ring's from index from on (ring may be nil when there are none),
// costing sum together. It changes nothing.
func logResult(ring *Ring, from int, sum int64, p Params, cost, now int64) Result {
	r := Result{Limit: p.Limit}
	switch {
	case sum+cost <= p.Limit:
		r.Allowed = true
	case cost > p.Limit:
		r.RetryAfter = -1
	default:
		r.RetryAfter = logRetry(ring, from, sum, p, cost, now)
	}
	r.Remaining = max(p.Limit-sum, 0)
	if ring != nil && ring.Len() > from {
		r.ResetAfter = ring.Last().At + p.Window - now
	}
	return r
}

// logRetry returns the time until enough of the oldest entries in the
// window (ring's from index from on, costing sum) have left it for cost
// to fit: entry e leaves it at e.At + W.
func logRetry(ring *Ring, from int, sum int64, p Params, cost, now int64) int64 {
	for i := from; ring != nil && i < ring.Len(); i++ {
		e := ring.At(i)
		sum -= e.Cost
		if sum+cost <= p.Limit {
			return e.At + p.Window - now
		}
	}
	return p.Window // unreachable when cost <= limit
}
