package script

import (
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// string.format as Lua 5.1 implements it over C's sprintf: flags "-+ #0",
// a width and a precision of two digits at most, the conversions c d i o
// u x X e E f g G q s; integers are C longs (a double cast toward zero),
// floats print as glibc prints them.

// spec is one conversion specification.
type spec struct {
	minus, plus, space, alt, zero bool
	width, prec                   int // -1: none
	conv                          byte
}

func (st *state) strFormat(L *lua.LState) int {
	f := checkString(L, 1, "format")
	arg := 1
	top := L.GetTop()
	var b []byte
	for i := 0; i < len(f); {
		c := f[i]
		i++
		if c != '%' {
			b = append(b, c)
			continue
		}
		if i < len(f) && f[i] == '%' {
			b = append(b, '%')
			i++
			continue
		}
		sp, n := scanFormat(L, f[i:])
		i += n
		arg++
		if arg > top {
			argError(L, arg, "format", "no value")
		}
		b = st.formatOne(L, b, sp, arg)
		st.raiseMemory(L, len(b))
	}
	L.Push(lua.LString(b))
	return 1
}

// scanFormat reads a specification after '%' and returns it with its
// length.
func scanFormat(L *lua.LState, f string) (spec, int) {
	sp := spec{width: -1, prec: -1}
	i := 0
	for i < len(f) && strings.IndexByte("-+ #0", f[i]) >= 0 {
		switch f[i] {
		case '-':
			sp.minus = true
		case '+':
			sp.plus = true
		case ' ':
			sp.space = true
		case '#':
			sp.alt = true
		case '0':
			sp.zero = true
		}
		i++
	}
	if i >= 6 {
		L.RaiseError("invalid format (repeated flags)")
	}
	sp.width, i = digits2(f, i)
	if i < len(f) && f[i] == '.' {
		sp.prec, i = digits2(f, i+1)
		if sp.prec < 0 {
			sp.prec = 0
		}
	}
	if i < len(f) && isDigit(f[i]) {
		L.RaiseError("invalid format (width or precision too long)")
	}
	if i < len(f) {
		sp.conv = f[i]
		i++
	}
	return sp, i
}

// digits2 reads up to two digits at i: the number (-1 if none) and where
// it stopped.
func digits2(f string, i int) (int, int) {
	n := -1
	for k := 0; k < 2 && i < len(f) && isDigit(f[i]); k++ {
		if n < 0 {
			n = 0
		}
		n = n*10 + int(f[i]-'0')
		i++
	}
	return n, i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// formatOne appends argument arg converted by sp.
func (st *state) formatOne(L *lua.LState, b []byte, sp spec, arg int) []byte {
	switch sp.conv {
	case 'c':
		c := byte(toInteger(checkNumber(L, arg, "format")))
		return pad(b, []byte{c}, sp, false)
	case 'd', 'i':
		return fmtInt(b, toInteger(checkNumber(L, arg, "format")), sp)
	case 'o', 'u', 'x', 'X':
		return fmtUint(b, uint64(toInteger(checkNumber(L, arg, "format"))), sp)
	case 'e', 'E', 'f', 'g', 'G':
		return fmtFloat(b, checkNumber(L, arg, "format"), sp)
	case 'q':
		return addQuoted(b, checkString(L, arg, "format"))
	case 's':
		s := checkString(L, arg, "format")
		if sp.prec < 0 && len(s) >= 100 {
			return append(b, s...)
		}
		if i := strings.IndexByte(s, 0); i >= 0 {
			s = s[:i] // sprintf stops at a NUL
		}
		if sp.prec >= 0 && len(s) > sp.prec {
			s = s[:sp.prec]
		}
		sp.zero = false
		return pad(b, []byte(s), sp, false)
	}
	L.RaiseError("invalid option '%%%c' to 'format'", sp.conv)
	return b
}

// pad appends body padded to the width: spaces on the left (or right with
// '-'), or zeros after the sign when zeros is set.
func pad(b, body []byte, sp spec, zeros bool) []byte {
	n := sp.width - len(body)
	if n <= 0 {
		return append(b, body...)
	}
	if sp.minus {
		b = append(b, body...)
		return append(b, strings.Repeat(" ", n)...)
	}
	if zeros {
		sign := 0
		if len(body) > 0 && (body[0] == '-' || body[0] == '+' || body[0] == ' ') {
			sign = 1
		}
		if len(body) > sign+1 && body[sign] == '0' && (body[sign+1] == 'x' || body[sign+1] == 'X') {
			sign += 2
		}
		b = append(b, body[:sign]...)
		b = append(b, strings.Repeat("0", n)...)
		return append(b, body[sign:]...)
	}
	b = append(b, strings.Repeat(" ", n)...)
	return append(b, body...)
}

// fmtInt is %d and %i.
func fmtInt(b []byte, n int64, sp spec) []byte {
	var u uint64
	sign := ""
	switch {
	case n < 0:
		u, sign = uint64(-n), "-"
	case sp.plus:
		u, sign = uint64(n), "+"
	case sp.space:
		u, sign = uint64(n), " "
	default:
		u = uint64(n)
	}
	digits := precise(strconv.FormatUint(u, 10), sp.prec)
	return pad(b, []byte(sign+digits), sp, sp.zero && sp.prec < 0)
}

// fmtUint is %o, %u, %x and %X.
func fmtUint(b []byte, u uint64, sp spec) []byte {
	base, prefix := 10, ""
	switch sp.conv {
	case 'o':
		base = 8
	case 'x', 'X':
		base = 16
		if sp.alt && u != 0 {
			prefix = "0x"
		}
	}
	digits := precise(strconv.FormatUint(u, base), sp.prec)
	if sp.conv == 'o' && sp.alt && !strings.HasPrefix(digits, "0") {
		digits = "0" + digits
	}
	body := prefix + digits
	if sp.conv == 'X' {
		body = strings.ToUpper(body)
	}
	return pad(b, []byte(body), sp, sp.zero && sp.prec < 0)
}

// precise applies an integer precision: at least prec digits, and none
// for a zero with precision 0.
func precise(digits string, prec int) string {
	if prec < 0 {
		return digits
	}
	if prec == 0 && digits == "0" {
		return ""
	}
	for len(digits) < prec {
		digits = "0" + digits
	}
	return digits
}

// fmtFloat is %e, %E, %f, %g and %G.
func fmtFloat(b []byte, f float64, sp spec) []byte {
	upper := sp.conv == 'E' || sp.conv == 'G'
	sign := ""
	switch {
	case math.Signbit(f) && !math.IsNaN(f):
		sign, f = "-", -f
	case math.IsNaN(f) && math.Signbit(f):
		sign, f = "-", math.NaN()
	case sp.plus:
		sign = "+"
	case sp.space:
		sign = " "
	}
	if s, ok := nonFinite(math.Abs(f), upper); ok {
		if math.IsNaN(f) {
			s = "nan"
			if upper {
				s = "NAN"
			}
		}
		sp.zero = false
		return pad(b, []byte(sign+s), sp, false)
	}
	prec := sp.prec
	if prec < 0 {
		prec = 6
	}
	var body []byte
	switch sp.conv {
	case 'e', 'E':
		body = cExponent(strconv.AppendFloat(nil, f, 'e', prec, 64))
		if sp.alt && prec == 0 {
			i := strings.IndexByte(string(body), 'e')
			body = []byte(string(body[:i]) + "." + string(body[i:]))
		}
	case 'f':
		body = strconv.AppendFloat(nil, f, 'f', prec, 64)
		if sp.alt && prec == 0 {
			body = append(body, '.')
		}
	default:
		body = appendG(nil, f, prec, false, sp.alt)
	}
	if upper {
		body = []byte(strings.ToUpper(string(body)))
	}
	return pad(b, append([]byte(sign), body...), sp, sp.zero)
}

// addQuoted is %q: the string in double quotes, with ", \, newline, \r
// and NUL escaped as Lua 5.1 escapes them.
func addQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\', '\n':
			b = append(b, '\\', c)
		case '\r':
			b = append(b, '\\', 'r')
		case 0:
			b = append(b, '\\', '0', '0', '0')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
