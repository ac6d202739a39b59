package engine

import (
	"math/big"
	"testing"
)

func TestParseWindow(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64 // 0: rejected
	}{
		{"1", 1 * sec},
		{"60", 60 * sec},
		{"007", 7 * sec},
		{"500ms", 500 * ms},
		{"1ms", MinWindow},
		{"5MS", 5 * ms},
		{"5mS", 5 * ms},
		{"30s", 30 * sec},
		{"30S", 30 * sec},
		{"1m", 60 * sec},
		{"24h", day},
		{"24H", day},
		{"1d", day},
		{"366d", MaxWindow},
		{"8784h", MaxWindow},
		{"31622400", MaxWindow},
		{"31622400000ms", MaxWindow},
		{"00000000000000000000000000001ms", ms},
		{"", 0},
		{"0", 0},
		{"00", 0},
		{"0ms", 0},
		{"0d", 0},
		{"-1", 0},
		{"+1", 0},
		{"1.5", 0},
		{"1.5s", 0},
		{"1 s", 0},
		{" 1", 0},
		{"1s ", 0},
		{"ms", 0},
		{"s", 0},
		{"1us", 0},
		{"1ns", 0},
		{"1µs", 0},
		{"1msx", 0},
		{"1sm", 0},
		{"1mh", 0},
		{"1mm", 0},
		{"1mss", 0},
		{"1w", 0},
		{"1e3", 0},
		{"0x10", 0},
		{"367d", 0},
		{"8785h", 0},
		{"31622401", 0},
		{"31622400001ms", 0},
		{"99999999999999999999999999", 0},
	} {
		got, ok := ParseWindow([]byte(c.in))
		if ok != (c.want != 0) || got != c.want {
			t.Errorf("ParseWindow(%q) = %d, %v; want %d", c.in, got, ok, c.want)
		}
	}
}

// refParseWindow is a plain reference: digits, then an optional suffix,
// multiplied in big integers.
func refParseWindow(b []byte) (int64, bool) {
	i := 0
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	suffix := make([]byte, 0, len(b)-i)
	for _, c := range b[i:] {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		suffix = append(suffix, c)
	}
	unit, ok := map[string]int64{"": sec, "ms": ms, "s": sec, "m": 60 * sec, "h": 3600 * sec, "d": day}[string(suffix)]
	if i == 0 || !ok {
		return 0, false
	}
	n, _ := new(big.Int).SetString(string(b[:i]), 10)
	n.Mul(n, big.NewInt(unit))
	if n.Sign() == 0 || n.Cmp(big.NewInt(MaxWindow)) > 0 {
		return 0, false
	}
	return n.Int64(), true
}

func FuzzParseWindow(f *testing.F) {
	for _, s := range []string{"1", "500ms", "24H", "366d", "367d", "0", "1.5s", "31622400"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := ParseWindow(b)
		want, wantOK := refParseWindow(b)
		if got != want || ok != wantOK {
			t.Fatalf("ParseWindow(%q) = %d, %v; reference %d, %v", b, got, ok, want, wantOK)
		}
		if ok && (got < MinWindow || got > MaxWindow) {
			t.Fatalf("ParseWindow(%q) = %d, outside [MinWindow, MaxWindow]", b, got)
		}
	})
}

func TestParseWindowAllocs(t *testing.T) {
	in := [][]byte{[]byte("500ms"), []byte("24H"), []byte("367d"), []byte("")}
	allocs := testing.AllocsPerRun(100, func() {
		for _, b := range in {
			ParseWindow(b)
		}
	})
	if allocs != 0 {
		t.Fatalf("ParseWindow allocates %v times per run", allocs)
	}
}
