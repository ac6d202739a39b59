package script

import (
	"bytes"
	"math"
	"strconv"
	"strings"
)

// Numbers as Lua 5.1 and Redis print and read them, with glibc's printf
// and strtod: tostring and concatenation use "%.14g", redis.call arguments
// and RESP3 doubles "%.17g"; tonumber and string coercion accept what
// strtod accepts (hex, exponents, inf, nan, surrounding space).

// fmtNumber formats f as Lua 5.1's tostring does ("%.14g").
func fmtNumber(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e14 {
		if f == 0 && math.Signbit(f) {
			return "-0"
		}
		return strconv.FormatInt(int64(f), 10)
	}
	return string(appendG(nil, f, 14, false, false))
}

// fmtNumber17 formats f as "%.17g", as Redis passes a Lua number to a
// command and writes a double.
func fmtNumber17(f float64) string { return string(appendG(nil, f, 17, false, false)) }

// AppendNumber appends f as Lua 5.1's tostring formats it ("%.14g" with
// glibc's rounding; "inf", "-nan"), without allocating but to grow dst.
func AppendNumber(dst []byte, f float64) []byte {
	if f == math.Trunc(f) && math.Abs(f) < 1e14 {
		if f == 0 && math.Signbit(f) {
			return append(dst, "-0"...)
		}
		return strconv.AppendInt(dst, int64(f), 10)
	}
	return appendG(dst, f, 14, false, false)
}

// AppendArg appends f as Redis passes a Lua number to a command
// (redis.call's arguments): "%.17g".
func AppendArg(dst []byte, f float64) []byte { return appendG(dst, f, 17, false, false) }

// ToInteger converts a Lua number to the integer Redis replies with for
// it: truncated toward zero as a C cast on x86-64 does, and the "integer
// indefinite" value (math.MinInt64) for NaN and out of range.
func ToInteger(f float64) int64 { return toInteger(f) }

// pow10 are the powers of ten up to 10^17.
var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17}

// appendG appends f formatted as C's "%.<prec>g" (upper: "%G"; alt: the #
// flag, which keeps trailing zeros). It allocates only to grow b.
func appendG(b []byte, f float64, prec int, upper, alt bool) []byte {
	if s, ok := nonFinite(f, upper); ok {
		return append(b, s...)
	}
	if prec == 0 {
		prec = 1
	}
	if !alt && prec < len(pow10) && f == math.Trunc(f) && math.Abs(f) < pow10[prec] {
		if f == 0 && math.Signbit(f) {
			return append(b, "-0"...)
		}
		return strconv.AppendInt(b, int64(f), 10)
	}
	start := len(b)
	// The exponent C's %e would print decides between %e and %f.
	var buf [64]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', prec-1, 64)
	i := bytes.LastIndexByte(e, 'e')
	x := 0
	for _, c := range e[i+2:] {
		x = x*10 + int(c-'0')
	}
	if e[i+1] == '-' {
		x = -x
	}
	if x < -4 || x >= prec {
		m := e[:i]
		if !alt {
			m = trimZeros(m)
		}
		b = append(b, m...)
		b = append(b, 'e', e[i+1])
		if x < 0 {
			x = -x
		}
		if x < 10 {
			b = append(b, '0')
		}
		b = strconv.AppendInt(b, int64(x), 10)
	} else {
		// %f with prec-1-x decimals has the same prec significant digits
		// as the %e above: place its point instead of formatting again.
		m := e[:i]
		if m[0] == '-' {
			b = append(b, '-')
			m = m[1:]
		}
		digits := make([]byte, 0, 32)
		digits = append(digits, m[0])
		if len(m) > 2 {
			digits = append(digits, m[2:]...) // after "d."
		}
		fs := buf[len(e):len(e)] // the rest of buf
		if x >= 0 {
			fs = append(fs, digits[:x+1]...)
			if len(digits) > x+1 || alt {
				fs = append(fs, '.')
				fs = append(fs, digits[x+1:]...)
			}
		} else {
			fs = append(fs, '0', '.')
			for k := 0; k < -x-1; k++ {
				fs = append(fs, '0')
			}
			fs = append(fs, digits...)
		}
		if !alt {
			fs = trimZeros(fs)
		}
		b = append(b, fs...)
	}
	if upper {
		for k := start; k < len(b); k++ {
			if b[k] >= 'a' && b[k] <= 'z' {
				b[k] -= 'a' - 'A'
			}
		}
	}
	return b
}

// trimZeros removes trailing zeros after a decimal point, and the point.
func trimZeros(f []byte) []byte {
	if bytes.IndexByte(f, '.') < 0 {
		return f
	}
	f = bytes.TrimRight(f, "0")
	return bytes.TrimSuffix(f, []byte("."))
}

// nonFinite returns glibc's spelling of an infinity or a NaN: "inf",
// "-inf", "nan" and, for a NaN with its sign bit set (what 0/0 gives on
// x86), "-nan".
func nonFinite(f float64, upper bool) (string, bool) {
	var s string
	switch {
	case math.IsInf(f, 1):
		s = "inf"
	case math.IsInf(f, -1):
		s = "-inf"
	case math.IsNaN(f):
		s = "nan"
		if math.Signbit(f) {
			s = "-nan"
		}
	default:
		return "", false
	}
	if upper {
		s = strings.ToUpper(s)
	}
	return s, true
}

// cExponent rewrites Go's exponent (e+5, e-07) as C's: a sign and at
// least two digits.
func cExponent(e []byte) []byte {
	i := strings.LastIndexByte(string(e), 'e')
	digits := strings.TrimLeft(string(e[i+2:]), "0")
	for len(digits) < 2 {
		digits = "0" + digits
	}
	return append(e[:i+2:i+2], digits...)
}

// toInteger converts f to an integer as a C cast on x86-64 does: toward
// zero, and the "integer indefinite" value for NaN and out of range.
func toInteger(f float64) int64 {
	if f != f || f >= 9.223372036854775807e18 || f < -9.223372036854775808e18 {
		return math.MinInt64
	}
	return int64(f)
}

// str2number is Lua 5.1's luaO_str2d: the string converted as strtod does
// (or strtoul in base 16 after "0x"), with nothing but space after it. The
// string ends at its first NUL byte, as C sees it.
func str2number(s string) (float64, bool) {
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	f, n := strtod(s)
	if n == 0 {
		return 0, false
	}
	if n < len(s) && (s[n] == 'x' || s[n] == 'X') {
		var u uint64
		u, n = strtoul(s, 16)
		f = float64(u)
	}
	for n < len(s) && isSpace(s[n]) {
		n++
	}
	return f, n == len(s)
}

// isSpace is C's isspace in the C locale.
func isSpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }

// strtod parses a number at the start of s as glibc's strtod does and
// returns it with the count of bytes it used (0: none).
func strtod(s string) (float64, int) {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	start := i
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	neg := start < len(s) && s[start] == '-'
	rest := strings.ToLower(s[i:])
	switch {
	case strings.HasPrefix(rest, "infinity"):
		return signed(math.Inf(1), neg), i + 8
	case strings.HasPrefix(rest, "inf"):
		return signed(math.Inf(1), neg), i + 3
	case strings.HasPrefix(rest, "nan"):
		n := i + 3
		if j := nanTail(s[n:]); j > 0 {
			n += j
		}
		return signed(math.NaN(), neg), n
	case strings.HasPrefix(rest, "0x"):
		if f, n := hexFloat(s[i+2:]); n > 0 {
			return signed(f, neg), i + 2 + n
		}
		return signed(0, neg), i + 1 // "0" then an x that is not part of it
	}
	n := decimalLen(s[i:])
	if n == 0 {
		return 0, 0
	}
	f, err := strconv.ParseFloat(s[start:i+n], 64)
	if err != nil && !math.IsInf(f, 0) && f != 0 {
		return 0, 0
	}
	return f, i + n
}

func signed(f float64, neg bool) float64 {
	if neg {
		return -f
	}
	return f
}

// nanTail is the length of a "(chars)" after nan, 0 if there is none.
func nanTail(s string) int {
	if len(s) == 0 || s[0] != '(' {
		return 0
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if c == ')' {
			return i + 1
		}
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return 0
		}
	}
	return 0
}

// decimalLen is the length of the decimal number at the start of s:
// digits, an optional point and digits (one digit at least), and an
// exponent if digits follow it.
func decimalLen(s string) int {
	i, digits := 0, 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return 0
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && s[j] >= '0' && s[j] <= '9' {
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			i = j
		}
	}
	return i
}

// hexFloat parses the digits of a hex float after "0x" (digits, point,
// digits, optional binary exponent p±n) and returns it with its length.
func hexFloat(s string) (float64, int) {
	i, digits := 0, 0
	mant, exp := 0.0, 0
	for ; i < len(s) && hexDigit(s[i]) >= 0; i++ {
		mant = mant*16 + float64(hexDigit(s[i]))
		digits++
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && hexDigit(s[i]) >= 0; i++ {
			mant = mant*16 + float64(hexDigit(s[i]))
			exp -= 4
			digits++
		}
	}
	if digits == 0 {
		return 0, 0
	}
	if i < len(s) && (s[i] == 'p' || s[i] == 'P') {
		j, neg, e := i+1, false, 0
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			neg = s[j] == '-'
			j++
		}
		if j < len(s) && s[j] >= '0' && s[j] <= '9' {
			for ; j < len(s) && s[j] >= '0' && s[j] <= '9'; j++ {
				if e < 100000 {
					e = e*10 + int(s[j]-'0')
				}
			}
			if neg {
				e = -e
			}
			exp += e
			i = j
		}
	}
	return math.Ldexp(mant, exp), i
}

func hexDigit(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// strtoul parses an unsigned number in base at the start of s as C's
// strtoul does (space, sign, "0x" in base 16, saturating at the maximum,
// a minus sign negating modulo 2^64) and returns it with the bytes used.
func strtoul(s string, base int) (uint64, int) {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if base == 16 && i+2 < len(s)+1 && i+1 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') &&
		i+2 < len(s) && digitIn(s[i+2], base) {
		i += 2
	}
	start := i
	var n uint64
	over := false
	for ; i < len(s) && digitIn(s[i], base); i++ {
		d := uint64(digitValue(s[i]))
		if n > (math.MaxUint64-d)/uint64(base) {
			over = true
		}
		n = n*uint64(base) + d
	}
	if i == start {
		return 0, 0
	}
	if over {
		return math.MaxUint64, i
	}
	if neg {
		n = -n
	}
	return n, i
}

func digitValue(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		return int(c-'A') + 10
	}
	return 99
}

func digitIn(c byte, base int) bool { return digitValue(c) < base }

// strtoulAll is tonumber(s, base): the whole string (but trailing space)
// must be the number.
func strtoulAll(s string, base int) (float64, bool) {
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	n, used := strtoul(s, base)
	if used == 0 {
		return 0, false
	}
	for used < len(s) && isSpace(s[used]) {
		used++
	}
	return float64(n), used == len(s)
}
