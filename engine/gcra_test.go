package engine

import (
	"errors"
	"testing"
)

func TestGCRASteps(t *testing.T) {
	// redis-cell's own sequence (limit 5, 1 per second) through Check:
	// 5 per 5 s gives the same emission interval (1 s) and tolerance (5 s).
	k := newKey(t, GCRA, base)
	k.run(Params{Limit: 5, Window: 5 * sec}, []step{
		{0, 6, false, 5, -1, 0}, // never: 6 > capacity 5
		{0, 1, true, 4, 0, 1 * sec},
		{0, 1, true, 3, 0, 2 * sec},
		{0, 1, true, 2, 0, 3 * sec},
		{0, 1, true, 1, 0, 4 * sec},
		{0, 1, true, 0, 0, 5 * sec},
		{0, 1, false, 0, 1 * sec, 5 * sec},
		{3000 * ms, 1, true, 2, 0, 3000 * ms},
		{100 * ms, 1, true, 1, 0, 3900 * ms},
		{900 * ms, 1, true, 1, 0, 4000 * ms},
		{4000 * ms, 1, true, 4, 0, 1000 * ms},
		{1500 * ms, 1, true, 4, 0, 1000 * ms},
		{0, 0, true, 4, 0, 1 * sec}, // COST 0 peeks
		{0, 2, true, 2, 0, 3 * sec},
		{0, 5, false, 2, 3 * sec, 3 * sec},
		{3*sec - 1, 5, false, 4, 1, 1},
		{1, 5, true, 0, 0, 5 * sec},
	})
}

func TestGCRABurst(t *testing.T) {
	// BURST 3 at 1 per second: capacity 3 is reported as the limit.
	k := newKey(t, GCRA, base)
	k.run(Params{Limit: 1, Window: sec, Burst: 3}, []step{
		{0, 1, true, 2, 0, 1 * sec},
		{0, 2, true, 0, 0, 3 * sec},
		{0, 1, false, 0, 1 * sec, 3 * sec},
		{0, 4, false, 0, -1, 3 * sec},
		{2500 * ms, 2, true, 0, 0, 2500 * ms},
	})
}

func TestGCRATruncatedInterval(t *testing.T) {
	// 3 per second is an emission interval of trunc(1e9/3) = 333333333 ns,
	// as redis-cell computes it: 4 requests fit in one second with BURST 1.
	if got := Interval(3, sec); got != 333333333 {
		t.Fatalf("Interval(3, 1s) = %d", got)
	}
	k := newKey(t, GCRA, base)
	k.run(Params{Limit: 3, Window: sec, Burst: 1}, []step{
		{0, 1, true, 0, 0, 333333333},
		{0, 1, false, 0, 333333333, 333333333},
		{333333333, 1, true, 0, 0, 333333333},
		{333333333, 1, true, 0, 0, 333333333},
		{333333332, 1, false, 0, 1, 1},
		{1, 1, true, 0, 0, 333333333}, // base + 999999999
	})
}

func TestInterval(t *testing.T) {
	for _, c := range []struct{ limit, window, want int64 }{
		{1, sec, sec},
		{3, sec, 333333333},
		{30, 60 * sec, 2 * sec},
		{2e6, MinWindow, 0}, // above one request per ns
		{0, sec, 0},
		{1, 0, 0},
		// float64 division, as redis-cell: W/3 = 2^52 + 2/3 rounds up to
		// 2^52+1 before truncation; exact division would give 2^52.
		{3, 3<<52 + 2, 1<<52 + 1},
		// 1e16+1 is not a float64: it reads as 1e16.
		{1, 1e16 + 1, 1e16},
	} {
		if got := Interval(c.limit, c.window); got != c.want {
			t.Errorf("Interval(%d, %d) = %d, want %d", c.limit, c.window, got, c.want)
		}
	}
}

func TestGCRAParamChange(t *testing.T) {
	k := newKey(t, GCRA, base)
	k.run(Params{Limit: 2, Window: 2 * sec}, []step{{0, 2, true, 0, 0, 2 * sec}})
	// A bigger BURST admits more at once.
	k.run(Params{Limit: 2, Window: 2 * sec, Burst: 4}, []step{{0, 1, true, 1, 0, 3 * sec}})
	// Back to 2: the TAT is 1 s beyond the tolerance; even a peek waits.
	k.run(Params{Limit: 2, Window: 2 * sec}, []step{
		{0, 0, false, 0, 1 * sec, 3 * sec},
		{1 * sec, 0, true, 0, 0, 2 * sec},
		{0, 1, false, 0, 1 * sec, 2 * sec},
	})
	// A faster rate keeps the TAT and spaces requests 0.5 s apart.
	k.run(Params{Limit: 4, Window: 2 * sec}, []step{
		{0, 0, true, 0, 0, 2 * sec},
		{0, 1, false, 0, 500 * ms, 2 * sec},
		{500 * ms, 1, true, 0, 0, 2 * sec},
	})
}

func TestGCRAExpiresAt(t *testing.T) {
	var st State
	p := Params{Limit: 1, Window: sec}
	Check(GCRA, &st, p, 1, base)
	if got, want := ExpiresAt(GCRA, &st, p), base+sec; got != want {
		t.Fatalf("ExpiresAt = %d, want %d", got, want)
	}
}

func TestCellPublishedExample(t *testing.T) {
	// CL.THROTTLE user123 15 30 60 1 on a fresh key replies 0 16 15 -1 2.
	var st State
	r, err := CellThrottle(&st, 15, 30, 60, 1, base)
	if err != nil {
		t.Fatal(err)
	}
	want := CellResult{Limited: false, Limit: 16, Remaining: 15, RetryAfter: -1 * sec, ResetAfter: 2 * sec}
	if r != want {
		t.Fatalf("CellThrottle = %+v, want %+v", r, want)
	}
	if got := []int64{CellSeconds(r.RetryAfter), CellSeconds(r.ResetAfter)}; got[0] != -1 || got[1] != 2 {
		t.Fatalf("seconds = %v, want [-1 2]", got)
	}
}

// TestCellSequence ports redis-cell's it_rate_limits test: limit 5
// (max_burst 4) at 1 per second.
func TestCellSequence(t *testing.T) {
	var st State
	for i, c := range []struct {
		at, quantity     int64
		limited          bool
		remaining        int64
		reset, retryWant int64
	}{
		{0, 6, true, 5, 0, -1 * sec},
		{0, 1, false, 4, 1 * sec, -1 * sec},
		{0, 1, false, 3, 2 * sec, -1 * sec},
		{0, 1, false, 2, 3 * sec, -1 * sec},
		{0, 1, false, 1, 4 * sec, -1 * sec},
		{0, 1, false, 0, 5 * sec, -1 * sec},
		{0, 1, true, 0, 5 * sec, 1 * sec},
		{3000 * ms, 1, false, 2, 3000 * ms, -1 * sec},
		{3100 * ms, 1, false, 1, 3900 * ms, -1 * sec},
		{4000 * ms, 1, false, 1, 4000 * ms, -1 * sec},
		{8000 * ms, 1, false, 4, 1000 * ms, -1 * sec},
		{9500 * ms, 1, false, 4, 1000 * ms, -1 * sec},
		{9500 * ms, 0, false, 4, 1 * sec, -1 * sec},
		{9500 * ms, 2, false, 2, 3 * sec, -1 * sec},
		{9500 * ms, 5, true, 2, 3 * sec, 3 * sec},
	} {
		r, err := CellThrottle(&st, 4, 1, 1, c.quantity, base+c.at)
		want := CellResult{Limited: c.limited, Limit: 5, Remaining: c.remaining,
			RetryAfter: c.retryWant, ResetAfter: c.reset}
		if err != nil || r != want {
			t.Errorf("case %d: CellThrottle = %+v, %v; want %+v", i, r, err, want)
		}
	}
}

func TestCellSeconds(t *testing.T) {
	for _, c := range []struct{ ns, want int64 }{
		{2 * sec, 2},
		{2*sec + 500000, 2}, // 2.0005 s: less than a millisecond left
		{2*sec + 999999, 2},
		{2*sec + 1*ms, 3},
		{2*sec + 999*ms, 3},
		{-1 * sec, -1},
		{0, 0},
		{1 * ms, 1},
		{999999, 0},
	} {
		if got := CellSeconds(c.ns); got != c.want {
			t.Errorf("CellSeconds(%d) = %d, want %d", c.ns, got, c.want)
		}
	}
}

func TestCellZeroRate(t *testing.T) {
	for _, c := range [][2]int64{{0, 60}, {30, 0}, {2e9, 1}} {
		var st State
		_, err := CellThrottle(&st, 15, c[0], c[1], 1, base)
		if !errors.Is(err, ErrZeroRate) || err.Error() != "Zero rates are not supported" {
			t.Errorf("count %d period %d: err = %v, want ErrZeroRate", c[0], c[1], err)
		}
	}
}

func TestCellPeekAndDenialKeepState(t *testing.T) {
	var st State
	if _, err := CellThrottle(&st, 4, 1, 1, 0, base); err != nil || st != (State{}) {
		t.Fatalf("quantity 0 on a fresh key stored %+v (err %v)", st, err)
	}
	CellThrottle(&st, 4, 1, 1, 5, base)
	want := st
	for _, q := range []int64{0, 1, 6} {
		r, _ := CellThrottle(&st, 4, 1, 1, q, base)
		if st != want {
			t.Fatalf("quantity %d (limited %v) changed the state to %+v, want %+v", q, r.Limited, st, want)
		}
	}
}

// redis-cell divides microseconds in float64 for remaining; RL.CHECK divides
// nanoseconds exactly. With 3 per second the two can differ by one.
func TestCellRemainingInMicroseconds(t *testing.T) {
	var cell, check State
	p := Params{Limit: 3, Window: sec}
	for i := 0; i < 2; i++ {
		CellThrottle(&cell, 2, 3, 1, 1, base)
		Check(GCRA, &check, p, 1, base)
	}
	// TAT = base+666666666; 333333334 ns of it left; next = 666666665 ns.
	now := base + 333333332
	r, _ := CellThrottle(&cell, 2, 3, 1, 0, now)
	if r.Remaining != 2 || r.ResetAfter != 333333334 {
		t.Fatalf("CellThrottle = %+v, want remaining 2 (666666/333333 µs), reset 333333334", r)
	}
	if r := Check(GCRA, &check, p, 0, now); r.Remaining != 1 {
		t.Fatalf("Check = %s, want remaining 1", fmtResult(r))
	}
}

// After max_burst is lowered on a key, redis-cell's remaining can come out
// as -1: next = dvt - ttl lies in (-interval, 0) and its microseconds are
// truncated towards zero before the float division. CellThrottle keeps that.
func TestCellRemainingAfterLoweredBurst(t *testing.T) {
	var st State
	CellThrottle(&st, 5, 3, 1, 2, base) // TAT = base + 666666666
	r, _ := CellThrottle(&st, 0, 3, 1, 0, base+1)
	// ttl 666666665, dvt 333333333: next = -333333332 ns = -333333 µs.
	want := CellResult{Limited: true, Limit: 1, Remaining: -1, RetryAfter: 333333332, ResetAfter: 666666665}
	if r != want {
		t.Fatalf("CellThrottle = %+v, want %+v", r, want)
	}
}

// TestGCRAMatchesCellThrottle runs random sequences through Check (BURST B,
// L per W s) and CellThrottle (max_burst B-1, L per W): the same decisions,
// the same TAT, the same reset and retry times.
func TestGCRAMatchesCellThrottle(t *testing.T) {
	rng := newRand(t)
	for trace := 0; trace < 200; trace++ {
		b, l, w := 1+rng.Int64N(10), 1+rng.Int64N(20), 1+rng.Int64N(10)
		p := Params{Limit: l, Window: w * sec, Burst: b}
		var check, cell State
		now := base + rng.Int64N(sec)
		for i := 0; i < 300; i++ {
			now += rng.Int64N(2 * w * sec / l)
			if rng.IntN(4) == 0 {
				now -= now % ms // redis-cell's clock has millisecond steps
			}
			cost := rng.Int64N(b + 3)
			r := Check(GCRA, &check, p, cost, now)
			c, err := CellThrottle(&cell, b-1, l, w, cost, now)
			if err != nil || r.Allowed == c.Limited || check != cell || r.ResetAfter != c.ResetAfter ||
				(c.Limited && c.RetryAfter != r.RetryAfter && !(r.RetryAfter == -1 && c.RetryAfter == -sec)) {
				t.Fatalf("B=%d L=%d W=%ds step %d (t=%d cost %d): Check %s state %+v; CellThrottle %+v state %+v, err %v",
					b, l, w, i, now-base, cost, fmtResult(r), check, c, cell, err)
			}
		}
	}
}
