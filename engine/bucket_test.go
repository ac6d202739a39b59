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
		// A bigger BURST admits more at once: 4 - 2 = 2 tokens.
		k.run(Params{Limit: 2, Window: 2 * sec, Burst: 4}, []step{{0, 1, true, 1, 0, 3 * sec}})
		// Back to 2: 3 s of debt is -1 token; even a peek waits 1 s.
		k.run(Params{Limit: 2, Window: 2 * sec}, []step{
			{0, 0, false, 0, 1 * sec, 3 * sec},
			{1 * sec, 0, true, 0, 0, 2 * sec},
			{0, 1, false, 0, 1 * sec, 2 * sec},
		})
		// A faster rate keeps the time until full (2 s, now 4 tokens
		// of capacity 4) and refills twice as fast.
		k.run(Params{Limit: 4, Window: 2 * sec}, []step{
			{0, 0, true, 0, 0, 2 * sec},
			{0, 1, false, 0, 500 * ms, 2 * sec},
			{500 * ms, 1, true, 0, 0, 2 * sec},
		})
	}
}

func TestBucketRescale(t *testing.T) {
	for _, c := range []struct {
		st        State
		limit     int64
		wantT     int64
		wantFrac  int64
		rationale string
	}{
		{State{T: 10, N: 1, P: 3}, 3, 10, 1, "same limit"},
		{State{T: 10, N: 0, P: 3}, 7, 10, 0, "no fraction"},
		{State{T: 10, N: 1, P: 3}, 2, 10, 1, "1/3 rounds up to 1/2"},
		{State{T: 10, N: 2, P: 3}, 1, 11, 0, "2/3 rounds up to a whole ns"},
		{State{T: 10, N: 1, P: 4}, 8, 10, 2, "1/4 is 2/8 exactly"},
	} {
		t1, frac := bucketTAT(&c.st, c.limit)
		if t1 != c.wantT || frac != c.wantFrac {
			t.Errorf("%s: bucketTAT(%+v, %d) = %d, %d; want %d, %d",
				c.rationale, c.st, c.limit, t1, frac, c.wantT, c.wantFrac)
		}
	}
}

func TestBucketState(t *testing.T) {
	// The fraction of a nanosecond is stored: 2 tokens at 3/s move the TAT
	// by 666666666⅔ ns.
	var st State
	p := Params{Limit: 3, Window: sec}
	Check(Token, &st, p, 2, base)
	if want := (State{T: base + 666666666, N: 2, P: 3}); !stateEqual(&st, &want) {
		t.Fatalf("state = %+v, want %+v", st, want)
	}
	if got, want := ExpiresAt(Token, &st, p), base+666666667; got != want {
		t.Fatalf("ExpiresAt = %d, want %d", got, want)
	}
	Check(Token, &st, p, 1, base)
	if want := (State{T: base + sec, N: 0, P: 3}); !stateEqual(&st, &want) {
		t.Fatalf("state = %+v, want %+v", st, want)
	}
	if got, want := ExpiresAt(Leaky, &st, p), base+sec; got != want {
		t.Fatalf("ExpiresAt = %d, want %d", got, want)
	}
}
