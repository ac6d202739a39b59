package engine

import "testing"

// Token and leaky buckets admit the same requests and report the same
// numbers (tokens left = capacity - level), so each table runs on both.
func runBuckets(t *testing.T, p Params, steps []step) {
	t.Helper()
	for _, a := range []Algo{Token, Leaky} {
		newKey(t, a, base).run(p, steps)
	}
}

func TestBucketSteps(t *testing.T) {
	// 4 per 8 s: one token every 2 s, capacity 4, starting full.
	runBuckets(t, Params{Limit: 4, Window: 8 * sec}, []step{
		{0, 1, true, 3, 0, 2 * sec},
		{0, 2, true, 1, 0, 6 * sec},
		{0, 2, false, 1, 2 * sec, 6 * sec}, // one more token in 2 s
		{1 * sec, 1, true, 0, 0, 7 * sec},  // 1.5 tokens: refill is continuous
		{0, 1, false, 0, 1 * sec, 7 * sec}, // 0.5 tokens
		{1 * sec, 1, true, 0, 0, 8 * sec},
		{1 * sec, 1, false, 0, 1 * sec, 7 * sec},
		{500 * ms, 0, true, 0, 0, 6*sec + 500*ms},        // 0.75 tokens; COST 0 peeks
		{0, 5, false, 0, -1, 6*sec + 500*ms},             // cost > capacity
		{0, 4, false, 0, 6*sec + 500*ms, 6*sec + 500*ms}, // needs a full bucket
		{96*sec + 500*ms, 4, true, 0, 0, 8 * sec},        // t=100s, idle: full
		{1, 1, false, 0, 2*sec - 1, 8*sec - 1},
		{2*sec - 1, 1, true, 0, 0, 8 * sec},
	})
}

func TestBucketFractionalRate(t *testing.T) {
	// 3 per second: a token every 333333333⅓ ns, kept exactly.
	runBuckets(t, Params{Limit: 3, Window: sec}, []step{
		{0, 1, true, 2, 0, 333333334},
		{0, 1, true, 1, 0, 666666667},
		{0, 1, true, 0, 0, sec},
		{0, 1, false, 0, 333333334, sec},
		{333333333, 1, false, 0, 1, 666666667},
		{1, 1, true, 0, 0, sec},
		{sec, 3, true, 0, 0, sec}, // full again: 3 at one instant
		{0, 1, false, 0, 333333334, sec},
	})
}

func TestBucketBurst(t *testing.T) {
	// 1 per second with BURST 5: capacity 5 is reported as the limit.
	runBuckets(t, Params{Limit: 1, Window: sec, Burst: 5}, []step{
		{0, 1, true, 4, 0, 1 * sec},
		{0, 1, true, 3, 0, 2 * sec},
		{0, 1, true, 2, 0, 3 * sec},
		{0, 1, true, 1, 0, 4 * sec},
		{0, 1, true, 0, 0, 5 * sec},
		{0, 1, false, 0, 1 * sec, 5 * sec},
		{2500 * ms, 2, true, 0, 0, 4500 * ms}, // 2.5 tokens
		{0, 0, true, 0, 0, 4500 * ms},
		{0, 6, false, 0, -1, 4500 * ms},
		{0, 5, false, 0, 4500 * ms, 4500 * ms},
	})
}

func TestBucketParamChange(t *testing.T) {
	for _, a := range []Algo{Token, Leaky} {
		k := newKey(t, a, base)
		k.run(Params{Limit: 2, Window: 2 * sec}, []step{{0, 2, true, 0, 0, 2 * sec}})
		// A bigger BURST admits more at once: 2 in use of 4.
		k.run(Params{Limit: 2, Window: 2 * sec, Burst: 4}, []step{{0, 1, true, 1, 0, 3 * sec}})
		// Back to 2: the 3 in use count as a full bucket of 2, which then
		// drains at 1/s.
		k.run(Params{Limit: 2, Window: 2 * sec}, []step{
			{0, 0, true, 0, 0, 2 * sec},
			{1 * sec, 0, true, 1, 0, 1 * sec},
			{0, 1, true, 0, 0, 2 * sec},
		})
		// A faster rate applies since the last admission and keeps the
		// tokens in use: 2 of the new capacity 4, draining at 2/s.
		k.run(Params{Limit: 4, Window: 2 * sec}, []step{
			{0, 0, true, 2, 0, 1 * sec},
			{0, 1, true, 1, 0, 1500 * ms},
			{500 * ms, 1, true, 1, 0, 1500 * ms},
		})
		// Raising the limit under a fixed BURST never takes tokens away:
		// still 3 in use, now draining at 4/s.
		k.run(Params{Limit: 8, Window: 2 * sec, Burst: 4}, []step{
			{0, 0, true, 1, 0, 750 * ms},
			{250 * ms, 2, true, 0, 0, 1 * sec},
			{0, 1, false, 0, 250 * ms, 1 * sec},
		})
		// A much shorter window never makes a key owe more than a bucket.
		k.run(Params{Limit: 8, Window: 20 * ms, Burst: 4}, []step{
			{0, 0, true, 0, 0, 10 * ms},
			{10 * ms, 4, true, 0, 0, 10 * ms},
		})
	}
}

// TestBucketDeniedCheckStoresTheCap: a check under a lower capacity
// that is denied still stores the amount capped at that capacity, so
// raising the capacity again starts from what that check answered with,
// not from the old, larger bucket. (luaref's TestDifferential found it,
// LUAREF_SEED=1795675258865815710: 60 per 2 s filled, then 2 per 10 s
// denied with the bucket empty in 8.36 s, then BURST 3 at 1 per 10 s
// denied as if 2.84 were in use.)
func TestBucketDeniedCheckStoresTheCap(t *testing.T) {
	for _, a := range []Algo{Token, Leaky} {
		k := newKey(t, a, base)
		// 4 in use of 4, draining at 2/s.
		k.run(Params{Limit: 4, Window: 2 * sec}, []step{{0, 4, true, 0, 0, 2 * sec}})
		// Capacity 2 at 1 per 2 s: the 4 count as 2, and 0.5 s later
		// 1.75 are in use, so one more is denied.
		k.run(Params{Limit: 1, Window: 2 * sec, Burst: 2}, []step{{500 * ms, 1, false, 0, 1500 * ms, 3500 * ms}})
		// Capacity 4 at the same instant: 1.75 in use, not the old 3.75,
		// so one is admitted and one more fits.
		k.run(Params{Limit: 1, Window: 2 * sec, Burst: 4}, []step{
			{0, 1, true, 1, 0, 5500 * ms},
			{0, 1, true, 0, 0, 7500 * ms},
			{0, 1, false, 0, 1500 * ms, 7500 * ms},
		})
	}
}

func TestBucketState(t *testing.T) {
	// 2 tokens of 3 per second are in use: U*W = 2e9, stored exactly; the
	// bucket drains to empty in 666666666⅔ ns, so it expires at the next
	// whole nanosecond.
	var st State
	p := Params{Limit: 3, Window: sec}
	Check(Token, &st, p, 2, base)
	if want := (State{T: base, N: 2 * sec}); !stateEqual(&st, &want) {
		t.Fatalf("state = %+v, want %+v", st, want)
	}
	if got, want := ExpiresAt(Token, &st, p), base+666666667; got != want {
		t.Fatalf("ExpiresAt = %d, want %d", got, want)
	}
	Check(Token, &st, p, 1, base+sec/3)
	// 1 token drained in 1/3 s, one taken: 2 in use at base+333333333.
	if want := (State{T: base + sec/3, N: 2*sec + 1}); !stateEqual(&st, &want) {
		t.Fatalf("state = %+v, want %+v", st, want)
	}
	// Amounts beyond 64 bits use the high word.
	big := Params{Limit: 1 << 40, Window: 366 * 86400 * sec}
	var st2 State
	Check(Leaky, &st2, big, 1<<40, base)
	if st2.P == 0 || ExpiresAt(Leaky, &st2, big) != base+big.Window {
		t.Fatalf("big bucket: state %+v, ExpiresAt %d", st2, ExpiresAt(Leaky, &st2, big))
	}
}
