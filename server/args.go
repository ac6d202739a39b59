package server

// parseInt parses a decimal int64 the way Redis does: an optional '-',
// digits without leading zeros, no '+', no spaces, no overflow. It does not
// allocate.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	digits := b
	if neg {
		digits = b[1:]
	}
	if len(digits) > 1 && digits[0] == '0' {
		return 0, false
	}
	return signedDigits(neg, digits)
}

// parseCellInt parses an integer as redis-cell (Rust's i64 parser) does: an
// optional '+' or '-', then one or more digits, leading zeros allowed.
func parseCellInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if len(b) > 0 && (b[0] == '+' || neg) {
		b = b[1:]
	}
	return signedDigits(neg, b)
}

// signedDigits converts one or more decimal digits, negated when neg, to an
// int64, refusing anything else and values outside the int64 range.
func signedDigits(neg bool, digits []byte) (int64, bool) {
	if len(digits) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range digits {
		if c < '0' || c > '9' || n > (1<<63)/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
		if n > 1<<63 {
			return 0, false
		}
	}
	switch {
	case neg:
		return -int64(n), true
	case n > 1<<63-1:
		return 0, false
	}
	return int64(n), true
}

// equalFold reports whether b equals the upper-case ASCII word s, ignoring
// case. It does not allocate.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// quote returns b as a quoted argument for an error message, cut to 64
// bytes.
func quote(b []byte) string {
	if len(b) > 64 {
		return "'" + string(b[:64]) + "...'"
	}
	return "'" + string(b) + "'"
}
