package values

import "strconv"

// strVal is a string's bytes, or an integer standing for its decimal form
// as Redis's int encoding does: INCRBY and HINCRBY then change it without
// allocating. Bytes once stored are never written again (a change stores
// new ones), so replies may share them.
type strVal struct {
	b     []byte
	n     int64
	isInt bool
}

// setBytes stores a copy of b.
func (s *strVal) setBytes(b []byte) {
	*s = strVal{b: append([]byte(nil), b...)}
}

// setOwned stores b, which the caller gives up.
func (s *strVal) setOwned(b []byte) { *s = strVal{b: b} }

// setInt stores n.
func (s *strVal) setInt(n int64) { *s = strVal{n: n, isInt: true} }

// bytes returns the string's bytes; the caller must not change them. An
// integer is formatted into new bytes.
func (s *strVal) bytes() []byte {
	if s.isInt {
		return strconv.AppendInt(nil, s.n, 10)
	}
	return s.b[:len(s.b):len(s.b)]
}

// appendTo appends the string to dst.
func (s *strVal) appendTo(dst []byte) []byte {
	if s.isInt {
		return strconv.AppendInt(dst, s.n, 10)
	}
	return append(dst, s.b...)
}

// length returns the length of the string's bytes.
func (s *strVal) length() int {
	if !s.isInt {
		return len(s.b)
	}
	var buf [20]byte
	return len(strconv.AppendInt(buf[:0], s.n, 10))
}

// asInt returns the string as an integer, as Redis reads a value for
// INCRBY (string2ll).
func (s *strVal) asInt() (int64, bool) {
	if s.isInt {
		return s.n, true
	}
	return parseInt(s.b)
}

// asLongDouble returns the string as a long double, as Redis reads a value
// for INCRBYFLOAT (string2ld).
func (s *strVal) asLongDouble() (*ldouble, bool) {
	if s.isInt {
		return ldFromInt(s.n), true
	}
	return parseLongDouble(s.b)
}

// size is the string's share of its value's Size: its bytes, or an
// integer's eight.
func (s *strVal) size() int64 {
	if s.isInt {
		return 8
	}
	return int64(len(s.b))
}
