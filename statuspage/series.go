package statuspage

import (
	"context"
	"math/bits"
	"sync"
	"time"
)

// Totals are counts of checks since the node started: all of them and
// those denied.
type Totals struct {
	Checks uint64 `json:"checks"`
	Denied uint64 `json:"denied"`
}

// DefaultSeconds is the history a Series made with a size of 0 keeps.
const DefaultSeconds = 300

// Series is a ring of per-second samples of two counters (checks and
// denials): how much each grew in each of the last seconds. It is safe
// for concurrent use.
type Series struct {
	mu      sync.Mutex
	checks  []uint64 // ring, oldest at head
	denied  []uint64
	head, n int
	last    Totals
	lastSec int64 // the Unix second of the last sample; the ring ends there
	primed  bool  // last and lastSec hold a sample
}

// NewSeries returns a Series that keeps the last seconds seconds
// (DefaultSeconds if seconds <= 0).
func NewSeries(seconds int) *Series {
	if seconds <= 0 {
		seconds = DefaultSeconds
	}
	return &Series{checks: make([]uint64, seconds), denied: make([]uint64, seconds)}
}

// Record samples the counters t at time at. The first sample only sets
// the base; each later one in a new second appends how much the counters
// grew since the previous sample, spread evenly over the seconds between
// them if samples were missed. A sample in the same second as the last is
// ignored, and a counter that went back counts as no growth.
func (s *Series) Record(at time.Time, t Totals) {
	sec := at.Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.primed {
		s.last, s.lastSec, s.primed = t, sec, true
		return
	}
	gap := sec - s.lastSec
	if gap <= 0 {
		return
	}
	dc, dd := grow(s.last.Checks, t.Checks), grow(s.last.Denied, t.Denied)
	s.last, s.lastSec = t, sec
	size := int64(len(s.checks))
	for k := max(0, gap-size); k < gap; k++ { // the seconds that stay in the ring
		s.push(share(dc, k, gap), share(dd, k, gap))
	}
}

// share is second k's part (of n) of d spread evenly over n seconds:
// floor((k+1)d/n) - floor(kd/n), so that the parts add up to d.
func share(d uint64, k, n int64) uint64 {
	return part(d, uint64(k+1), uint64(n)) - part(d, uint64(k), uint64(n))
}

// part returns floor(d*k/n) for k <= n, without overflowing.
func part(d, k, n uint64) uint64 {
	hi, lo := bits.Mul64(d, k)
	q, _ := bits.Div64(hi, lo, n)
	return q
}

func grow(from, to uint64) uint64 {
	if to < from {
		return 0
	}
	return to - from
}

// push appends one second, dropping the oldest once the ring is full.
func (s *Series) push(c, d uint64) {
	size := len(s.checks)
	i := (s.head + s.n) % size
	if s.n == size {
		s.head = (s.head + 1) % size
	} else {
		s.n++
	}
	s.checks[i], s.denied[i] = c, d
}

// SeriesData is the JSON form of a Series: Checks[i] and Denied[i] are the
// checks and denials in the second that starts at StartUnixMs +
// i*IntervalMs, oldest first; the last ends at the newest sample.
type SeriesData struct {
	StartUnixMs int64    `json:"start_unix_ms"`
	IntervalMs  int64    `json:"interval_ms"`
	Checks      []uint64 `json:"checks"`
	Denied      []uint64 `json:"denied"`
}

// Data returns a copy of the samples.
func (s *Series) Data() SeriesData {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := SeriesData{IntervalMs: 1000, Checks: make([]uint64, s.n), Denied: make([]uint64, s.n)}
	for i := 0; i < s.n; i++ {
		j := (s.head + i) % len(s.checks)
		out.Checks[i], out.Denied[i] = s.checks[j], s.denied[j]
	}
	if s.primed {
		out.StartUnixMs = (s.lastSec - int64(s.n)) * 1000
	}
	return out
}

// Sample records read() at every tick's time until ctx ends (rlserver
// passes a one-second time.Ticker's channel; tests their own).
func (s *Series) Sample(ctx context.Context, tick <-chan time.Time, read func() Totals) {
	for {
		select {
		case <-ctx.Done():
			return
		case at := <-tick:
			s.Record(at, read())
		}
	}
}
