package values

import (
	"math"
	"testing"
)

func TestParseInt(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"7", 7, true},
		{"-7", -7, true},
		{"9223372036854775807", math.MaxInt64, true},
		{"-9223372036854775808", math.MinInt64, true},
		{"9223372036854775808", 0, false},
		{"-9223372036854775809", 0, false},
		{"18446744073709551616", 0, false},
		{"-0", 0, false},
		{"+1", 0, false},
		{"01", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"", 0, false},
		{"-", 0, false},
		{"1.0", 0, false},
		{"1e3", 0, false},
		{"000000000000000000001", 0, false}, // 21 bytes: refused on length alone
	} {
		got, ok := parseInt([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseInt(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseFloat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"1.5", 1.5, true},
		{"-0", math.Copysign(0, -1), true},
		{".5", 0.5, true},
		{"5.", 5, true},
		{"1e3", 1000, true},
		{"1E-3", 0.001, true},
		{"0x10", 16, true},
		{"0X1p-2", 0.25, true},
		{"0x.8", 0.5, true},
		{"inf", math.Inf(1), true},
		{"-Infinity", math.Inf(-1), true},
		{"+INF", math.Inf(1), true},
		{"1e-310", 1e-310, true},
		{"4.9e-324", 5e-324, true},
		{"1e400", 0, false},  // overflow
		{"1e-400", 0, false}, // underflow to zero
		{"0e-400", 0, true},  // zero is no underflow
		{"nan", 0, false},
		{"nan(123)", 0, false},
		{"infinit", 0, false},
		{"0x", 0, false},
		{"1e", 0, false},
		{"1_000", 0, false},
		{"", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"1\x002", 0, false},
		{".", 0, false},
		{"--1", 0, false},
	} {
		got, ok := parseFloat([]byte(tc.in))
		if ok != tc.ok || (ok && math.Float64bits(got) != math.Float64bits(tc.want)) {
			t.Errorf("parseFloat(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseRangeFloat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"", 0, true},                // strtod reads nothing: zero
		{" 1", 1, true},              // leading space skipped
		{"1e400", math.Inf(1), true}, // out of range is an infinity
		{"1\x00junk", 1, true},       // the C string ends at the NUL
		{"1 ", 0, false},
		{"nan", 0, false},
		{"abc", 0, false},
	} {
		got, ok := parseRangeFloat([]byte(tc.in))
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("parseRangeFloat(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestFormatDouble checks C's "%.17g" as glibc prints it (the texts are
// redis-server 7.0.15's ZSCORE replies).
func TestFormatDouble(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{1, "1"},
		{1.1, "1.1000000000000001"},
		{0.0001, "0.0001"},
		{0.00001, "1.0000000000000001e-05"},
		{1e16, "10000000000000000"},
		{1e17, "1e+17"},
		{123456789012345678, "1.2345678901234568e+17"},
		{1e20, "1e+20"},
		{1e-310, "9.9999999999999694e-311"},
		{math.Copysign(0, -1), "-0"},
		{math.Inf(1), "inf"},
		{math.Inf(-1), "-inf"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{5e-324, "4.9406564584124654e-324"},
	} {
		if got := string(formatDouble(nil, tc.in)); got != tc.want {
			t.Errorf("formatDouble(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestOptIs(t *testing.T) {
	for _, tc := range []struct {
		arg, opt string
		want     bool
	}{
		{"NX", "nx", true},
		{"nX", "nx", true},
		{"nx\x00junk", "nx", true}, // strcasecmp stops at the NUL
		{"nxx", "nx", false},
		{"n", "nx", false},
	} {
		if got := optIs([]byte(tc.arg), tc.opt); got != tc.want {
			t.Errorf("optIs(%q, %q) = %v", tc.arg, tc.opt, got)
		}
	}
}

// TestIncrByFloatLongDouble checks INCRBYFLOAT's arithmetic at the x87's 64-bit
// precision (the texts are redis-server 7.0.15's replies).
func TestIncrByFloatLongDouble(t *testing.T) {
	for _, tc := range []struct {
		a, b, want string
	}{
		{"0.1", "0.2", "0.3"},
		{"1", "0.1", "1.1"},
		{"0.3", "3.0e3", "3000.30000000000000004"},
		{"0", "0.000003814697265625", "0.00000381469726562"}, // a tie, to even
		{"0", "-0.0", "0"},
		{"0", "1e-4940", "0"},    // subnormal
		{"10.5", "0x1p-1", "11"}, // hex
		// A hex string of more than 64 significant bits is rounded to 64
		// (it was kept at 81, and the sum computed at that precision).
		{"0x100.000003814697265625", "1.4196453006699347e+11", "141964530322.9934702068567276"},
		{"9223372036854775807", "1", "9223372036854775808"},
	} {
		x, ok1 := parseLongDouble([]byte(tc.a))
		y, ok2 := parseLongDouble([]byte(tc.b))
		if !ok1 || !ok2 || !x.add(y) {
			t.Errorf("%q + %q: not a valid sum", tc.a, tc.b)
			continue
		}
		if got := string(x.appendHuman(nil)); got != tc.want {
			t.Errorf("%q + %q = %s, want %s", tc.a, tc.b, got, tc.want)
		}
	}
	for _, bad := range []string{"", "\x00", "1\x002", " 1", "1 ", "nan", "1e-5000", "1.2e4932", "-1.2e4932", "abc", string(make([]byte, 5120))} {
		if _, ok := parseLongDouble([]byte(bad)); ok {
			t.Errorf("parseLongDouble(%q) is valid", bad)
		}
	}
	for _, huge := range []string{"1e99999999999", "1e-99999999999", "0x1p99999999", "0x1p-99999999"} {
		if _, ok := parseLongDouble([]byte(huge)); ok {
			t.Errorf("parseLongDouble(%q) is valid", huge)
		}
	}
	if x, ok := parseLongDouble([]byte("0e99999999999")); !ok || x.float64() != 0 {
		t.Errorf("0e99999999999 is not zero")
	}
}
