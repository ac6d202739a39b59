package engine

import "testing"

// With W = 10 s the weighted count in the window starting at s, elapsed e,
// is floor(cur + prev*(W-e)/W); the values below are worked out by hand.
func TestSlidingSteps(t *testing.T) {
	k := newKey(t, Sliding, base)
	k.run(Params{Limit: 10, Window: 10 * sec}, []step{
		// cur 4: back to 0 when floor(4*(W-e)/W) = 0 in the next window,
		// i.e. e > 7.5 s: base+17.5s+1ns.
		{2 * sec, 4, true, 6, 0, 15*sec + 500*ms + 1},
		{6 * sec, 4, true, 2, 0, 10*sec + 750*ms + 1},
		// 8+3 > 10 until the next window, where 8*(W-1ns)/W floors to 7.
		{1 * sec, 3, false, 2, 1*sec + 1, 9*sec + 750*ms + 1},
		// Across the boundary: prev 8 weighs fully at e = 0.
		{1 * sec, 0, true, 2, 0, 8*sec + 750*ms + 1},
		{0, 3, false, 2, 1, 8*sec + 750*ms + 1},
		{1, 3, true, 0, 0, 16*sec + 666666666},
		// e = 5 s: 3 + floor(8*5/10) = 7.
		{5*sec - 1, 0, true, 3, 0, 11*sec + 666666667},
		// e = 7.6 s: 3 + floor(8*2.4/10) = 3 + floor(1.92) = 4.
		{2*sec + 600*ms, 0, true, 6, 0, 9*sec + 66666667},
		// 4+7 > 10 until floor(8*(W-e)/W) = 0: e = 8.75 s + 1 ns.
		{0, 7, false, 6, 1*sec + 150*ms + 1, 9*sec + 66666667},
		{0, 11, false, 6, -1, 9*sec + 66666667},
		{0, 6, true, 0, 0, 11*sec + 288888889},
		// Two windows later both counts are gone.
		{30 * sec, 0, true, 10, 0, 0},
		{0, 10, true, 0, 0, 11*sec + 400*ms + 1},
	})
}

func TestSlidingParamChange(t *testing.T) {
	k := newKey(t, Sliding, base)
	k.run(Params{Limit: 4, Window: 10 * sec}, []step{
		{0, 4, true, 0, 0, 17*sec + 500*ms + 1},
		{1 * sec, 1, false, 0, 9*sec + 1, 16*sec + 500*ms + 1},
	})
	// Raising the limit admits more at once; the count of 4 is kept.
	k.run(Params{Limit: 6, Window: 10 * sec}, []step{
		{0, 2, true, 0, 0, 17*sec + 333333334},
	})
	// Lowering it below the count denies even a peek, until
	// floor(6*(W-e)/W) <= 3 in the next window (e = 3.333333334 s).
	k.run(Params{Limit: 3, Window: 10 * sec}, []step{
		{0, 0, false, 0, 12*sec + 333333334, 17*sec + 333333334},
		{12*sec + 333333333, 0, false, 0, 1, 5*sec + 1},
		{1, 0, true, 0, 0, 5 * sec},
		{0, 1, false, 0, 1*sec + 666666667, 5 * sec},
	})
}

func TestSlidingExpiresAt(t *testing.T) {
	p := Params{Limit: 2, Window: 10 * sec}
	var st State
	if got := ExpiresAt(Sliding, &st, p); got != 0 {
		t.Fatalf("fresh: ExpiresAt = %d, want 0", got)
	}
	Check(Sliding, &st, p, 1, base+3*sec)
	if got, want := ExpiresAt(Sliding, &st, p), base+20*sec; got != want {
		t.Fatalf("ExpiresAt = %d, want %d", got, want)
	}
	st = State{T: base, P: 1}
	if got, want := ExpiresAt(Sliding, &st, p), base+10*sec; got != want {
		t.Fatalf("only a previous count: ExpiresAt = %d, want %d", got, want)
	}
}
