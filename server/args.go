package server

// parseInt parses a decimal int64 the way Redis does: an optional '-',
// digits, no '+', no spaces, no overflow. It does not allocate.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	if len(b) > 1 && b[0] == '0' {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (1<<63)/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
		if n > 1<<63 {
			return 0, false
		}
	}
	if neg {
		return -int64(n), true
	}
	if n > 1<<63-1 {
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
