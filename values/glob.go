package values

// globMatch reports whether s matches the glob pattern p as Redis's
// stringmatchlen matches KEYS and SCAN MATCH patterns: '*' any run, '?'
// any byte, "[abc]", "[^abc]" and "[a-z]" classes (a reversed range is
// swapped), '\' quoting the next byte. An unclosed class ends at the end
// of the pattern. The empty string matches no pattern but the empty one
// (KEYS and SCAN treat the pattern "*" apart).
func globMatch(p, s []byte) bool {
	exhausted := false
	return glob(p, s, &exhausted)
}

// glob is globMatch's recursion. exhausted is set when a '*' tried every
// suffix of the string: an outer '*' then cannot match either, as Redis
// stops there (its defence against exponential patterns).
func glob(p, s []byte, exhausted *bool) bool {
	for len(p) > 0 && len(s) > 0 {
		consume := true // whether the pattern byte at p[0] is consumed below
		switch p[0] {
		case '*':
			for len(p) > 1 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for len(s) > 0 {
				if glob(p[1:], s, exhausted) {
					return true
				}
				if *exhausted {
					return false
				}
				s = s[1:]
			}
			*exhausted = true
			return false
		case '?':
			s = s[1:]
		case '[':
			var ok bool
			p, ok, consume = globClass(p[1:], s[0])
			if !ok {
				return false
			}
			s = s[1:]
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			fallthrough
		default:
			if p[0] != s[0] {
				return false
			}
			s = s[1:]
		}
		if consume {
			p = p[1:]
		}
		if len(s) == 0 {
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
			break
		}
	}
	return len(p) == 0 && len(s) == 0
}

// globClass matches c against the class whose body starts at p (after
// the '['). It returns the pattern at the class's closing ']' (consume
// true) or, for an unclosed class, at its end (consume false), and
// whether c matched.
func globClass(p []byte, c byte) (rest []byte, ok, consume bool) {
	not := len(p) > 0 && p[0] == '^'
	if not {
		p = p[1:]
	}
	match := false
	for {
		switch {
		case len(p) >= 2 && p[0] == '\\':
			p = p[1:]
			if p[0] == c {
				match = true
			}
		case len(p) > 0 && p[0] == ']':
			return p, match != not, true
		case len(p) == 0:
			return p, match != not, false
		case len(p) >= 3 && p[1] == '-':
			lo, hi := p[0], p[2]
			if lo > hi {
				lo, hi = hi, lo
			}
			if c >= lo && c <= hi {
				match = true
			}
			p = p[2:]
		default:
			if p[0] == c {
				match = true
			}
		}
		p = p[1:]
	}
}
