package values

import (
	"math"
	"strconv"
)

// Number parsing as Redis 7.0 does it. Redis reads integers with its own
// strict string2ll, and floats with the C library's strtod (or strtold),
// each caller then deciding how much of what strtod accepts it takes: the
// helpers below reproduce those combinations.

// maxIntLen is the length from which string2ll refuses a string
// (LONG_STR_SIZE, 21 bytes).
const maxIntLen = 21

// parseInt reads s as Redis's string2ll does: an optional '-' and decimal
// digits, no '+', no leading zeros, no spaces, within int64.
func parseInt(s []byte) (int64, bool) {
	if len(s) == 0 || len(s) >= maxIntLen {
		return 0, false
	}
	if len(s) == 1 && s[0] == '0' {
		return 0, true
	}
	neg := s[0] == '-'
	if neg {
		s = s[1:]
		if len(s) == 0 {
			return 0, false
		}
	}
	if s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	var v uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		if v > (math.MaxUint64-9)/10 {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return int64(-v), true // -(1<<63) wraps to MinInt64, as wanted
	}
	if v > math.MaxInt64 {
		return 0, false
	}
	return int64(v), true
}

// isCSpace reports whether c is white space for C's isspace in the C locale.
func isCSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}

// cString returns s up to its first NUL byte: what C string functions
// (strtod, strcasecmp) see of an argument.
func cString(s []byte) []byte {
	for i, c := range s {
		if c == 0 {
			return s[:i]
		}
	}
	return s
}

// numSyntax is what scanNumber found: the span of a number in strtod's
// syntax and how to read it.
type numSyntax struct {
	n       int  // bytes consumed from the start of the input; 0 if no number
	start   int  // where the number proper starts (after spaces and sign)
	neg     bool // a '-' sign
	inf     bool // "inf" or "infinity"
	nan     bool // "nan" or "nan(...)"
	hex     bool // "0x" mantissa (start points past the "0x")
	nonzero bool // the mantissa has a non-zero digit
}

// scanNumber finds the longest prefix of s that strtod reads as a number:
// white space, a sign, then "inf", "infinity", "nan", "nan(chars)", a hex
// float ("0x1.8p3") or a decimal one ("1.5e-3").
func scanNumber(s []byte) numSyntax {
	var ns numSyntax
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		ns.neg = s[i] == '-'
		i++
	}
	ns.start = i
	switch {
	case hasFoldPrefix(s[i:], "inf"):
		ns.inf = true
		ns.n = i + 3
		if hasFoldPrefix(s[i:], "infinity") {
			ns.n = i + 8
		}
		return ns
	case hasFoldPrefix(s[i:], "nan"):
		ns.nan = true
		ns.n = i + 3
		if j := nanChars(s[ns.n:]); j > 0 {
			ns.n += j
		}
		return ns
	case i+2 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && hexMantissa(s[i+2:]):
		ns.hex = true
		ns.start = i + 2
		ns.n, ns.nonzero = scanDigits(s, i+2, 16, 'p')
		return ns
	}
	ns.n, ns.nonzero = scanDigits(s, i, 10, 'e')
	return ns
}

// hexMantissa reports whether s starts with hex digits, or a point and a
// hex digit: a "0x" prefix counts only then.
func hexMantissa(s []byte) bool {
	if len(s) > 0 && s[0] == '.' {
		s = s[1:]
	}
	return len(s) > 0 && digitVal(s[0]) < 16
}

// nanChars returns the length of a "(n-char-sequence)" at the start of s,
// 0 if there is none (the parenthesis is then not part of the number).
func nanChars(s []byte) int {
	if len(s) == 0 || s[0] != '(' {
		return 0
	}
	for j := 1; j < len(s); j++ {
		c := s[j]
		switch {
		case c == ')':
			return j + 1
		case c == '_' || digitVal(c) < 36:
		default:
			return 0
		}
	}
	return 0
}

// scanDigits scans a mantissa in base (10 or 16) from s[i] with an
// optional point and exponent (marker 'e' or 'p', decimal digits), and
// returns the end of the number (0 if there are no mantissa digits) and
// whether a mantissa digit is non-zero.
func scanDigits(s []byte, i, base int, marker byte) (end int, nonzero bool) {
	digits := 0
	for ; i < len(s) && digitVal(s[i]) < base; i++ {
		digits++
		nonzero = nonzero || s[i] != '0'
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && digitVal(s[i]) < base; i++ {
			digits++
			nonzero = nonzero || s[i] != '0'
		}
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(s) && (s[i]|0x20) == marker {
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
	return i, nonzero
}

// digitVal is c's value as a digit of base up to 36, 36 for none.
func digitVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		return int(c-'A') + 10
	}
	return 36
}

// hasFoldPrefix reports whether s starts with lower, ASCII case folded.
func hasFoldPrefix(s []byte, lower string) bool {
	if len(s) < len(lower) {
		return false
	}
	for i := 0; i < len(lower); i++ {
		if s[i]|0x20 != lower[i] {
			return false
		}
	}
	return true
}

// strtod reads the number scanNumber found in s as a float64, as glibc's
// strtod does: correctly rounded, with erange set when a finite number
// overflows to ±Inf or a non-zero one underflows to zero.
func strtod(s []byte, ns numSyntax) (f float64, erange bool) {
	switch {
	case ns.n == 0:
		return 0, false
	case ns.nan:
		return math.NaN(), false
	case ns.inf:
		if ns.neg {
			return math.Inf(-1), false
		}
		return math.Inf(1), false
	}
	var err error
	if ns.hex {
		f, err = strconv.ParseFloat(hexLiteral(s[ns.start:ns.n]), 64)
	} else {
		f, err = strconv.ParseFloat(string(s[ns.start:ns.n]), 64)
	}
	if ns.neg {
		f = -f
	}
	if err != nil { // only a range error is possible on what was scanned
		return f, true
	}
	return f, f == 0 && ns.nonzero
}

// hexLiteral turns the hex mantissa (and exponent) m into a literal that
// strconv reads: Go wants the "0x" and a 'p' exponent.
func hexLiteral(m []byte) string {
	b := make([]byte, 0, len(m)+4)
	b = append(b, "0x"...)
	b = append(b, m...)
	for _, c := range m {
		if c|0x20 == 'p' {
			return string(b)
		}
	}
	return string(append(b, "p0"...))
}

// parseFloat reads s as Redis's string2d (getDoubleFromObject) does: the
// whole of s must be a number strtod reads, with no leading space, not out
// of range and not NaN. ZADD's scores, for instance.
func parseFloat(s []byte) (float64, bool) {
	if len(s) == 0 || isCSpace(s[0]) {
		return 0, false
	}
	ns := scanNumber(s)
	if ns.n != len(s) {
		return 0, false
	}
	f, erange := strtod(s, ns)
	if erange || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

// parseRangeFloat reads a score bound as zslParseRange does: strtod on the
// C string, which must be read to its end, and not NaN. Unlike
// parseFloat it takes leading spaces, the empty string (zero) and numbers
// out of range.
func parseRangeFloat(s []byte) (float64, bool) {
	s = cString(s)
	ns := scanNumber(s)
	if ns.n != len(s) {
		return 0, false
	}
	f, _ := strtod(s, ns)
	if math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

// optIs reports whether arg is the option lower, as strcasecmp compares
// them (ASCII case folded, the argument read up to a NUL byte).
func optIs(arg []byte, lower string) bool {
	arg = cString(arg)
	if len(arg) != len(lower) {
		return false
	}
	for i := 0; i < len(arg); i++ {
		c := arg[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// formatDouble appends f as Redis 7.0 prints a double reply: "%.17g",
// with inf and -inf spelled out.
func formatDouble(dst []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(dst, "inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-inf"...)
	}
	return strconv.AppendFloat(dst, f, 'g', 17, 64)
}
