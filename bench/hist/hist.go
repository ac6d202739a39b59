// Package hist is a log-linear latency histogram in the style of
// HdrHistogram: every power-of-two range of values is split into 2^subBits
// equal buckets, so a recorded value is known to within 1/2^subBits of
// itself (under 0.8 %) at any magnitude, in a fixed array of counters.
// Recording is a few arithmetic instructions and never allocates.
//
// A Histogram is not safe for concurrent use: give each goroutine its own
// and Merge them at the end.
package hist

import (
	"math"
	"math/bits"
)

const (
	subBits  = 7
	subCount = 1 << subBits
	// maxShift bounds the values kept exactly: up to 2^(subBits+maxShift+1)
	// ns, about 73 minutes. Larger values land in the last bucket.
	maxShift = 34
	nBuckets = (maxShift + 2) * subCount
)

// Histogram counts non-negative int64 values (nanoseconds, by convention).
type Histogram struct {
	counts [nBuckets]uint64
	n      uint64
	sum    float64
	min    int64
	max    int64
}

// New returns an empty Histogram.
func New() *Histogram { return &Histogram{min: math.MaxInt64} }

func index(v int64) int {
	if v < subCount {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - 1 - subBits
	if shift > maxShift {
		return nBuckets - 1
	}
	return (shift+1)<<subBits + int(uint64(v)>>uint(shift)) - subCount
}

// upper returns the largest value that lands in bucket i.
func upper(i int) int64 {
	if i < subCount {
		return int64(i)
	}
	shift := i>>subBits - 1
	mant := int64(i&(subCount-1) + subCount)
	return (mant+1)<<uint(shift) - 1
}

// Record adds one value; negative values count as 0.
func (h *Histogram) Record(v int64) { h.RecordN(v, 1) }

// RecordN adds n occurrences of v.
func (h *Histogram) RecordN(v int64, n uint64) {
	if v < 0 {
		v = 0
	}
	h.counts[index(v)] += n
	h.n += n
	h.sum += float64(v) * float64(n)
	if v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
}

// Merge adds every value recorded in o to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	if o.n > 0 {
		h.min = min(h.min, o.min)
		h.max = max(h.max, o.max)
	}
}

// Count returns the number of values recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Min returns the smallest value recorded, or 0 if none.
func (h *Histogram) Min() int64 {
	if h.n == 0 {
		return 0
	}
	return h.min
}

// Max returns the largest value recorded.
func (h *Histogram) Max() int64 { return h.max }

// Mean returns the average of the values recorded.
func (h *Histogram) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// Quantile returns the value at quantile q (0 < q <= 1): the upper bound of
// the bucket holding the ceil(q*n)-th smallest value, capped by the largest
// value recorded, so it never under-reports by more than the bucket width.
func (h *Histogram) Quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(upper(i), h.max)
		}
	}
	return h.max
}
