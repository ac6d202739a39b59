package values

import (
	"math"
	"math/big"
)

// INCRBYFLOAT and HINCRBYFLOAT compute in C's long double, which on x86-64
// (where Redis runs) is the x87 80-bit format: a 64-bit mantissa and an
// exponent up to 16383. Redis parses both operands with strtold, adds them
// and prints the sum with "%.17Lf", trailing zeros removed. The sum
// differs from a float64 one (0.1 + 0.2 prints 0.3, not
// 0.30000000000000004), so this file does the same arithmetic with
// math/big at 64 bits of precision.

const (
	ldPrec = 64 // mantissa bits of the x87 long double
	// ldMaxExp is the largest binary exponent of a finite long double in
	// math/big's convention (mantissa in [0.5, 1)).
	ldMaxExp = 16384
	// ldZeroExp is the exponent (math/big's) of half the smallest
	// subnormal, 2^-16446: that value and smaller ones round to zero.
	ldZeroExp = -16445
	// ldMaxLen is the length from which string2ld refuses a string
	// (MAX_LONG_DOUBLE_CHARS).
	ldMaxLen = 5 * 1024
	// Decimal magnitudes past the range (the largest long double is
	// 1.19e4932, the smallest subnormal 3.6e-4951): a value of 10^top or
	// more overflows, one under 10^top underflows, whatever its digits.
	ldDecimalMax = 4933
	ldDecimalMin = -4951
)

// ldouble is a long double: a finite value at 64-bit precision, or an
// infinity.
type ldouble struct {
	f   big.Float
	inf int // +1 or -1 for an infinity, else 0
}

// parseLongDouble reads s as Redis's string2ld does: strtold, which must
// read all of s (of less than 5 KiB), with no leading space, not out of
// range and not NaN. Infinities are accepted.
func parseLongDouble(s []byte) (*ldouble, bool) {
	if len(s) == 0 || len(s) >= ldMaxLen || isCSpace(s[0]) {
		return nil, false
	}
	ns := scanNumber(s)
	if ns.n != len(s) || ns.nan {
		return nil, false
	}
	x := new(ldouble)
	x.f.SetPrec(ldPrec)
	switch {
	case ns.inf:
		x.inf = 1
		if ns.neg {
			x.inf = -1
		}
		return x, true
	}
	if !x.setLiteral(s[ns.start:ns.n], ns.hex) {
		return nil, false
	}
	if ns.neg {
		x.f.Neg(&x.f)
	}
	return x, true
}

// setLiteral sets x to the unsigned literal m (decimal or, with hex, hex
// digits with an optional point and exponent), correctly rounded, and
// reports false where strtold reports a range error.
func (x *ldouble) setLiteral(m []byte, hex bool) bool {
	base, marker, expBase := 10, byte('e'), 10
	if hex {
		base, marker, expBase = 16, 'p', 2
	}
	mant, exp, nonzero := literalParts(m, base, marker)
	if !nonzero {
		x.f.SetInt64(0)
		return true
	}
	// Too far out of range to compute: overflow or underflow either way.
	// A decimal mantissa of d digits is in [10^(d-1), 10^d); a binary one
	// of b bits in [2^(b-1), 2^b).
	if expBase == 10 {
		if top := int64(len(mant.Text(10))) + exp; top > ldDecimalMax || top < ldDecimalMin {
			return false
		}
	} else if top := int64(mant.BitLen()) + exp; top > ldMaxExp+1 || top < ldZeroExp-1 {
		return false
	}
	exact := new(big.Float).SetInt(mant)
	switch {
	case expBase == 2:
		// SetMantExp takes exact's precision (Copy): round to the long
		// double's after it, once. (Kept at the literal's, a hex string
		// of more than 64 significant bits, such as 0x100.000003814697265625,
		// made INCRBYFLOAT add at that precision.)
		x.f.SetMantExp(exact, int(exp)).SetPrec(ldPrec)
	case exp >= 0:
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(exp), nil)
		x.f.SetInt(p.Mul(p, mant))
	default:
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(-exp), nil)
		x.f.Quo(exact, new(big.Float).SetInt(p))
	}
	return x.inRange()
}

// literalParts splits a literal into an integer mantissa and an exponent
// (of ten, or of two for hex, fraction digits accounted for).
func literalParts(m []byte, base int, marker byte) (mant *big.Int, exp int64, nonzero bool) {
	digits := make([]byte, 0, len(m))
	frac := int64(0)
	i, point := 0, false
	for ; i < len(m) && m[i]|0x20 != marker; i++ {
		if m[i] == '.' {
			point = true
			continue
		}
		if point {
			frac++
		}
		nonzero = nonzero || m[i] != '0'
		digits = append(digits, m[i])
	}
	mant, _ = new(big.Int).SetString(string(digits), base)
	if i < len(m) {
		exp = parseExponent(m[i+1:])
	}
	if base == 16 {
		return mant, exp - 4*frac, nonzero
	}
	return mant, exp - frac, nonzero
}

// parseExponent reads a signed decimal exponent, saturating far beyond
// any range that matters.
func parseExponent(s []byte) int64 {
	neg := false
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	var e int64
	for _, c := range s {
		if e < 1<<40 {
			e = e*10 + int64(c-'0')
		}
	}
	if neg {
		return -e
	}
	return e
}

// inRange reports whether x, a finite value, is within the long double's
// range: not overflowing to infinity nor underflowing to zero (a value of
// half the smallest subnormal or less).
func (x *ldouble) inRange() bool {
	if x.f.Sign() == 0 {
		return true
	}
	var m big.Float
	e := x.f.MantExp(&m)
	switch {
	case e > ldMaxExp || e < ldZeroExp:
		return false
	case e == ldZeroExp: // [2^-16446, 2^-16445): zero only at the bottom
		return m.Abs(&m).Cmp(big.NewFloat(0.5)) != 0
	}
	return true
}

// add sets x to x+y as the x87 unit adds (rounded to 64 bits), and reports
// whether the sum is finite.
func (x *ldouble) add(y *ldouble) bool {
	if x.inf != 0 || y.inf != 0 {
		return false // inf+finite is inf; inf-inf is NaN: both refused
	}
	x.f.Add(&x.f, &y.f)
	if x.f.Sign() != 0 && x.f.MantExp(nil) > ldMaxExp {
		return false
	}
	return true
}

// ldFromInt returns n as a long double (exact: 64 bits of mantissa).
func ldFromInt(n int64) *ldouble {
	x := new(ldouble)
	x.f.SetPrec(ldPrec).SetInt64(n)
	return x
}

// appendHuman appends x as Redis's ld2string in LD_STR_HUMAN mode: "%.17Lf"
// with the trailing zeros (and a trailing point) removed, and "-0" as "0".
func (x *ldouble) appendHuman(dst []byte) []byte {
	start := len(dst)
	dst = x.f.Append(dst, 'f', 17)
	for dst[len(dst)-1] == '0' {
		dst = dst[:len(dst)-1]
	}
	if dst[len(dst)-1] == '.' {
		dst = dst[:len(dst)-1]
	}
	if string(dst[start:]) == "-0" {
		dst = append(dst[:start], '0')
	}
	return dst
}

// float64 returns x as a float64 (for tests).
func (x *ldouble) float64() float64 {
	if x.inf != 0 {
		return math.Inf(x.inf)
	}
	f, _ := x.f.Float64()
	return f
}
