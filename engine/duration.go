package engine

// ParseWindow parses a window: a bare integer is seconds; the suffixes ms,
// s, m, h and d name milliseconds, seconds, minutes, hours and days
// ("500ms", "60", "1m", "24h", "1d"). Suffixes are case-insensitive. It
// returns nanoseconds and false for anything else, including zero, negative
// and fractional values and values above MaxWindow. It does not allocate.
func ParseWindow(b []byte) (int64, bool) {
	i := 0
	var n int64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		n = n*10 + int64(b[i]-'0')
		if n > MaxWindow {
			return 0, false
		}
		i++
	}
	if i == 0 || n == 0 {
		return 0, false
	}
	var unit int64
	switch suffix := b[i:]; {
	case len(suffix) == 0:
		unit = 1e9
	case len(suffix) == 2 && lower(suffix[0]) == 'm' && lower(suffix[1]) == 's':
		unit = 1e6
	case len(suffix) == 1:
		switch lower(suffix[0]) {
		case 's':
			unit = 1e9
		case 'm':
			unit = 60e9
		case 'h':
			unit = 3600e9
		case 'd':
			unit = 86400e9
		default:
			return 0, false
		}
	default:
		return 0, false
	}
	if n > MaxWindow/unit {
		return 0, false
	}
	return n * unit, true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
