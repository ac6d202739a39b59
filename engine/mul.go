package engine

import "math/bits"

// mulDiv returns floor(a*b/c) for c > 0, computing a*b in 128 bits. If the
// quotient does not fit in 64 bits it returns the largest uint64.
func mulDiv(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return ^uint64(0)
	}
	q, _ := bits.Div64(hi, lo, c)
	return q
}

// mulDivCeil returns ceil(a*b/c) for c > 0, saturating like mulDiv.
func mulDivCeil(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return ^uint64(0)
	}
	q, r := bits.Div64(hi, lo, c)
	if r != 0 {
		q++
	}
	return q
}

// mulLE reports whether a*b <= c*d, in 128 bits.
func mulLE(a, b, c, d uint64) bool {
	h1, l1 := bits.Mul64(a, b)
	h2, l2 := bits.Mul64(c, d)
	return h1 < h2 || (h1 == h2 && l1 <= l2)
}

// Saturating int64 arithmetic, for CL.THROTTLE, whose arguments may be
// anything in the int64 range: a result beyond it is the nearest bound.

const (
	maxInt64 = 1<<63 - 1
	minInt64 = -1 << 63
)

// satAdd returns a+b, saturated.
func satAdd(a, b int64) int64 {
	c := a + b
	switch {
	case a > 0 && b > 0 && c < 0:
		return maxInt64
	case a < 0 && b < 0 && c >= 0:
		return minInt64
	}
	return c
}

// satSub returns a-b, saturated.
func satSub(a, b int64) int64 {
	if b == minInt64 {
		if a >= 0 {
			return maxInt64
		}
		return a - b
	}
	return satAdd(a, -b)
}

// satMul returns a*b, saturated.
func satMul(a, b int64) int64 {
	neg := (a < 0) != (b < 0)
	hi, lo := bits.Mul64(absU(a), absU(b))
	switch {
	case neg && (hi != 0 || lo > 1<<63):
		return minInt64
	case neg:
		return int64(-lo) // -2^63 included
	case hi != 0 || lo > maxInt64:
		return maxInt64
	}
	return int64(lo)
}

// absU returns |a| as a uint64 (2^63 for the smallest int64).
func absU(a int64) uint64 {
	if a < 0 {
		return uint64(-a)
	}
	return uint64(a)
}

// u128 is an unsigned 128-bit integer for the bucket arithmetic.
type u128 struct{ hi, lo uint64 }

func mul128(a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

func (x u128) add(y u128) u128 {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	return u128{x.hi + y.hi + c, lo}
}

// sub returns x-y; the caller ensures x >= y.
func (x u128) sub(y u128) u128 {
	lo, b := bits.Sub64(x.lo, y.lo, 0)
	return u128{x.hi - y.hi - b, lo}
}

func (x u128) less(y u128) bool { return x.hi < y.hi || (x.hi == y.hi && x.lo < y.lo) }

// divmod returns x/d and x%d, saturating the quotient at the largest uint64.
func (x u128) divmod(d uint64) (q, r uint64) {
	if x.hi >= d {
		return ^uint64(0), 0
	}
	return bits.Div64(x.hi, x.lo, d)
}

// ceilDiv returns ceil(x/d), saturating.
func (x u128) ceilDiv(d uint64) uint64 {
	q, r := x.divmod(d)
	if r != 0 && q != ^uint64(0) {
		q++
	}
	return q
}
