package script

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/rlserver/rlserver/internal/testseed"
)

// appendGTwoPass is appendG as it was, formatting %f after %e (with the
// point C's # flag keeps after an integer, which it dropped): the
// reference for the one-pass placement of the point.
func appendGTwoPass(b []byte, f float64, prec int, alt bool) []byte {
	var buf [64]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', prec-1, 64)
	i := bytes.LastIndexByte(e, 'e')
	x, _ := strconv.Atoi(string(e[i+1:]))
	if x < -4 || x >= prec {
		return appendG(b, f, prec, false, alt)
	}
	fs := strconv.AppendFloat(nil, f, 'f', prec-1-x, 64)
	if !alt {
		fs = trimZeros(fs)
	} else if bytes.IndexByte(fs, '.') < 0 {
		fs = append(fs, '.') // C's # keeps the point (the two-pass code did not)
	}
	return append(b, fs...)
}

// TestAppendGOnePass compares appendG with the two-pass formatting on
// random numbers of every magnitude, precisions 1 to 17, with and without
// the # flag.
func TestAppendGOnePass(t *testing.T) {
	rnd := testseed.Rand(t)
	fixed := []float64{0.5, 1.5, 9.9999999999999999, 99.5, 0.0001, 0.00012345, 123456, 310000000.123456789, -0.5, -2.5e-3, 1e16, 99999999999999990}
	for i := range 200000 {
		var f float64
		switch {
		case i < len(fixed):
			f = fixed[i]
		case i%3 == 0:
			f = float64(rnd.Int64N(1e12)) / math.Pow(10, float64(rnd.IntN(12)))
		default:
			f = math.Float64frombits(rnd.Uint64())
			if math.IsNaN(f) || math.IsInf(f, 0) {
				continue
			}
			f = math.Mod(f, 1e20)
		}
		if rnd.IntN(2) == 0 {
			f = -f
		}
		prec, alt := 1+rand.IntN(17), rnd.IntN(4) == 0
		got := string(appendG(nil, f, prec, false, alt))
		want := string(appendGTwoPass(nil, f, prec, alt))
		if got != want {
			t.Fatalf("appendG(%v, %d, alt %v) = %q, want %q", f, prec, alt, got, want)
		}
	}
}
