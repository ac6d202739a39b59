package engine

import "testing"

func TestFixedSteps(t *testing.T) {
	// 3 per 10 s, starting 4 s into the epoch-aligned window [base, base+10s).
	k := newKey(t, Fixed, base+4*sec)
	k.run(Params{Limit: 3, Window: 10 * sec}, []step{
		{0, 1, true, 2, 0, 6 * sec},
		{1 * sec, 1, true, 1, 0, 5 * sec},
		{0, 1, true, 0, 0, 5 * sec},
		{1 * sec, 1, false, 0, 4 * sec, 4 * sec}, // first denial: wait for the window end
		{0, 0, true, 0, 0, 4 * sec},              // COST 0 peeks
		{3999 * ms, 1, false, 0, 1 * ms, 1 * ms}, // 1 ms before the boundary
		{1 * ms, 1, true, 2, 0, 10 * sec},        // new window at base+10s
		{9 * sec, 2, true, 0, 0, 1 * sec},        // COST 2
		{0, 4, false, 0, -1, 1 * sec},            // cost > limit: never
		{999 * ms, 1, false, 0, 1 * ms, 1 * ms},  // still base+19.999s
		{1 * ms, 3, true, 0, 0, 10 * sec},        // the whole limit at once
		{25 * sec, 0, true, 3, 0, 0},             // idle: fresh again
		{0, 2, true, 1, 0, 5 * sec},              // base+45s
		{0, 2, false, 1, 5 * sec, 5 * sec},       // cost 2 > remaining 1
		{0, 1, true, 0, 0, 5 * sec},              // the denied cost 2 left room for 1
		{4999*ms + 999999, 1, false, 0, 1, 1},    // 1 ns before the boundary
		{1, 1, true, 2, 0, 10 * sec},             // exactly on it
	})
}

func TestFixedEpochAligned(t *testing.T) {
	// A 1-minute window starting 59 s in has 1 s left, however early the
	// key's first request came.
	k := newKey(t, Fixed, base+59*sec)
	k.run(Params{Limit: 2, Window: 60 * sec}, []step{
		{0, 2, true, 0, 0, 1 * sec},
		{0, 1, false, 0, 1 * sec, 1 * sec},
		{1 * sec, 1, true, 1, 0, 60 * sec},
	})
	// Before the epoch windows are aligned too: [-10s, 0).
	k = newKey(t, Fixed, -5*sec)
	k.run(Params{Limit: 1, Window: 10 * sec}, []step{
		{0, 1, true, 0, 0, 5 * sec},
		{0, 1, false, 0, 5 * sec, 5 * sec},
		{5 * sec, 1, true, 0, 0, 10 * sec},
	})
}

func TestFixedParamChange(t *testing.T) {
	k := newKey(t, Fixed, base)
	k.run(Params{Limit: 2, Window: 10 * sec}, []step{
		{0, 1, true, 1, 0, 10 * sec},
		{0, 1, true, 0, 0, 10 * sec},
		{0, 1, false, 0, 10 * sec, 10 * sec},
	})
	// Raising the limit admits more at once; the count is kept.
	k.run(Params{Limit: 4, Window: 10 * sec}, []step{
		{1 * sec, 1, true, 1, 0, 9 * sec},
	})
	// Lowering it below the count denies even a peek.
	k.run(Params{Limit: 2, Window: 10 * sec}, []step{
		{0, 0, false, 0, 9 * sec, 9 * sec},
		{0, 1, false, 0, 9 * sec, 9 * sec},
	})
	// A longer window contains the old one: the count of 3 is kept.
	k.run(Params{Limit: 4, Window: 20 * sec}, []step{
		{0, 1, true, 0, 0, 19 * sec},
		{14 * sec, 1, false, 0, 5 * sec, 5 * sec},
	})
	// A shorter window has moved on from base: the count is dropped.
	k.run(Params{Limit: 4, Window: 5 * sec}, []step{
		{1 * sec, 1, true, 3, 0, 4 * sec},
	})
}

func TestFixedExpiresAt(t *testing.T) {
	p := Params{Limit: 2, Window: 10 * sec}
	var st State
	if got := ExpiresAt(Fixed, &st, p); got != 0 {
		t.Fatalf("fresh: ExpiresAt = %d, want 0", got)
	}
	Check(Fixed, &st, p, 0, base+3*sec)
	if got := ExpiresAt(Fixed, &st, p); got != 0 {
		t.Fatalf("after a peek: ExpiresAt = %d, want 0", got)
	}
	Check(Fixed, &st, p, 1, base+3*sec)
	if got, want := ExpiresAt(Fixed, &st, p), base+10*sec; got != want {
		t.Fatalf("ExpiresAt = %d, want %d", got, want)
	}
}
