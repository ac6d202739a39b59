package server

import "testing"

func TestParseIntegers(t *testing.T) {
	cases := []struct {
		in         string
		redis      int64
		redisOK    bool
		cell       int64
		cellOK     bool
		annotation string
	}{
		{"42", 42, true, 42, true, "plain"},
		{"-7", -7, true, -7, true, "negative"},
		{"+7", 0, false, 7, true, "Rust accepts a plus sign, Redis does not"},
		{"007", 0, false, 7, true, "Rust accepts leading zeros, Redis does not"},
		{"0", 0, true, 0, true, "zero"},
		{"9223372036854775807", 1<<63 - 1, true, 1<<63 - 1, true, "max"},
		{"-9223372036854775808", -1 << 63, true, -1 << 63, true, "min"},
		{"9223372036854775808", 0, false, 0, false, "overflow"},
		{"99999999999999999999", 0, false, 0, false, "far overflow"},
		{"", 0, false, 0, false, "empty"},
		{"-", 0, false, 0, false, "sign only"},
		{"1.5", 0, false, 0, false, "fraction"},
		{" 1", 0, false, 0, false, "space"},
	}
	for _, c := range cases {
		if v, ok := parseInt([]byte(c.in)); v != c.redis || ok != c.redisOK {
			t.Errorf("parseInt(%q) = %d, %v; want %d, %v (%s)", c.in, v, ok, c.redis, c.redisOK, c.annotation)
		}
		if v, ok := parseCellInt([]byte(c.in)); v != c.cell || ok != c.cellOK {
			t.Errorf("parseCellInt(%q) = %d, %v; want %d, %v (%s)", c.in, v, ok, c.cell, c.cellOK, c.annotation)
		}
	}
}
