package engine

import (
	"math/rand/v2"
	"testing"
)

// refundOp is what a row of a refund table does.
type refundOp uint8

const (
	chk refundOp = iota // charge cost now; expect Check's result
	ref                 // give back cost charged by row of; expect a peek's result after
)

// refundStep is one row of a refund table: advance the fake clock, then
// check or refund, and expect this result (of the check, or of a peek right
// after the refund).
type refundStep struct {
	advance   int64
	op        refundOp
	of        int // ref: the row (1-based) whose charge is given back
	cost      int64
	allowed   bool
	remaining int64
	retry     int64
	reset     int64
}

// runRefunds runs steps on one key from start with parameters p. Beside
// the key it keeps its twin, charged with every admission but the ones
// the table refunds: the key must never allow what the twin denies, nor
// show more remaining after a refund. Every refunded state must encode,
// decode and expire correctly.
func runRefunds(t *testing.T, a Algo, start int64, p Params, steps []refundStep) {
	t.Helper()
	var st, twin State
	now, at := start, make([]int64, len(steps)+1)
	refunded := make([]bool, len(steps)+1)
	for _, s := range steps {
		if s.op == ref {
			refunded[s.of] = true
		}
	}
	for i, s := range steps {
		row := i + 1
		now += s.advance
		at[row] = now
		var got, tw Result
		if s.op == chk {
			got = Check(a, &st, p, s.cost, now)
			c := cloneState(&twin)
			if tw = Check(a, &c, p, s.cost, now); got.Allowed && !refunded[row] {
				twin = c
			}
		} else {
			Refund(a, &st, p, s.cost, at[s.of], now)
			checkValid(t, a, p, &st, now)
			got, tw = Peek(a, &st, p, now), Peek(a, &twin, p, now)
		}
		if (got.Allowed && !tw.Allowed) || got.Remaining > tw.Remaining {
			t.Errorf("%v row %d: over-returned: %s, the twin %s", a, row, fmtResult(got), fmtResult(tw))
		}
		want := Result{Allowed: s.allowed, Limit: p.Capacity(a), Remaining: s.remaining, RetryAfter: s.retry, ResetAfter: s.reset}
		if got != want {
			t.Errorf("%v row %d (t=%s, op %d, cost %d):\n got %s\nwant %s", a, row, fmtDur(now-start), s.op, s.cost, fmtResult(got), fmtResult(want))
		}
	}
}

// checkValid fails unless st, just refunded at now, round-trips through
// the codec and decides like a fresh key from ExpiresAt on.
func checkValid(t *testing.T, a Algo, p Params, st *State, now int64) {
	t.Helper()
	b := AppendState(nil, a, st)
	a2, st2, n, err := DecodeState(b)
	if err != nil || a2 != a || n != len(b) || !stateEqual(st, &st2) {
		t.Fatalf("%v: refunded state %+v (entries %v) does not round-trip: %v, %+v", a, *st, entries(st), err, st2)
	}
	checkExpires(t, a, p, st, req{at: now})
}

func TestRefundFixedSteps(t *testing.T) {
	// 3 per 10 s, starting 4 s into the window [base, base+10s).
	runRefunds(t, Fixed, base+4*sec, Params{Limit: 3, Window: 10 * sec}, []refundStep{
		{0, chk, 0, 2, true, 1, 0, 6 * sec},
		{1 * sec, chk, 0, 1, true, 0, 0, 5 * sec},
		{0, chk, 0, 1, false, 0, 5 * sec, 5 * sec},
		{1 * sec, ref, 1, 2, true, 2, 0, 4 * sec}, // count 3 - 2
		{0, chk, 0, 2, true, 0, 0, 4 * sec},
		{0, ref, 5, 2, true, 2, 0, 4 * sec},
		{0, chk, 0, 2, true, 0, 0, 4 * sec},
		{4 * sec, chk, 0, 1, true, 2, 0, 10 * sec}, // base+10s: a new window
		{0, ref, 7, 2, true, 2, 0, 10 * sec},       // charged in the last window: nothing
		{0, ref, 8, 1, true, 3, 0, 0},              // count 0: as fresh
		{0, ref, 8, 1, true, 3, 0, 0},              // nothing left: never below 0
	})
}

func TestRefundSlidingSteps(t *testing.T) {
	// 10 per 10 s: the weighted count is floor(cur + prev*(W-e)/W).
	runRefunds(t, Sliding, base, Params{Limit: 10, Window: 10 * sec}, []refundStep{
		{2 * sec, chk, 0, 4, true, 6, 0, 15*sec + 500*ms + 1},
		{1 * sec, chk, 0, 3, true, 3, 0, 15571428572}, // 7 gone after e > 60/7 s next window
		{0, ref, 2, 3, true, 6, 0, 14*sec + 500*ms + 1},
		// base+11s: prev 4 weighs floor(4*0.9) = 3; cur 2.
		{8 * sec, chk, 0, 2, true, 5, 0, 14*sec + 1},
		{0, ref, 1, 4, true, 8, 0, 14*sec + 1}, // charged in the previous window: prev 0
		{0, ref, 4, 2, true, 10, 0, 0},         // cur 0 too: as fresh
		{0, chk, 0, 10, true, 0, 0, 18*sec + 1},
		// base+20s, the state not moved on since: the charge of base+11s
		// comes off what is now the previous window's count, 10 - 3.
		{9 * sec, ref, 7, 3, true, 3, 0, 8571428572},
	})
}

func TestRefundLogSteps(t *testing.T) {
	// 3 per 10 s.
	runRefunds(t, Log, base, Params{Limit: 3, Window: 10 * sec}, []refundStep{
		{0, chk, 0, 1, true, 2, 0, 10 * sec},
		{2 * sec, chk, 0, 2, true, 0, 0, 10 * sec},
		{0, chk, 0, 1, false, 0, 8 * sec, 10 * sec},
		{1 * sec, ref, 2, 1, true, 1, 0, 9 * sec}, // the entry at 2 s keeps 1
		{0, chk, 0, 1, true, 0, 0, 10 * sec},
		{0, ref, 2, 1, true, 1, 0, 10 * sec}, // the entry at 2 s is gone
		{0, ref, 5, 1, true, 2, 0, 7 * sec},  // so is the one at 3 s: 0 s is left
		// base+10s: the entry at 0 has left the window, not yet trimmed.
		{7 * sec, ref, 1, 1, true, 3, 0, 0},
		{0, chk, 0, 3, true, 0, 0, 10 * sec},
		{10 * sec, chk, 0, 1, true, 2, 0, 10 * sec}, // trims the entry at 10 s
		{0, ref, 9, 3, true, 2, 0, 10 * sec},        // trimmed: nothing to take
	})
}

func TestRefundBucketSteps(t *testing.T) {
	// 4 per 8 s: a token every 2 s, capacity 4.
	steps := []refundStep{
		{0, chk, 0, 2, true, 2, 0, 4 * sec},
		{0, chk, 0, 2, true, 0, 0, 8 * sec},
		{0, ref, 2, 2, true, 2, 0, 4 * sec},
		// Later, but nothing admitted since the charge (T is its time):
		// all of it comes back.
		{1 * sec, ref, 1, 2, true, 4, 0, 0},
		{0, chk, 0, 3, true, 1, 0, 6 * sec},
		{1 * sec, chk, 0, 1, true, 0, 0, 7 * sec},
		// An admission 1 s after the charge: the charge comes back less
		// the 0.5 token drained meanwhile, which the twin lost too (its
		// bucket stood empty): 1 in use at base+2s, 0.5 now.
		{1 * sec, ref, 5, 3, true, 3, 0, 1 * sec},
		{0, chk, 0, 3, true, 0, 0, 7 * sec},
		{1 * sec, chk, 0, 1, true, 0, 0, 8 * sec},
		// Here the twin's bucket (0.5 token at base+3s) was not empty
		// during the second since the charge: 2.5 of 3 tokens come back,
		// 1.5 stay in use where the twin has 1 (remaining 3, reset 2 s).
		{0, ref, 8, 3, true, 2, 0, 3 * sec},
		{4 * sec, chk, 0, 4, true, 0, 0, 8 * sec}, // both empty again
	}
	for _, a := range []Algo{Token, Leaky} {
		runRefunds(t, a, base, Params{Limit: 4, Window: 8 * sec}, steps)
	}
}

func TestRefundGCRASteps(t *testing.T) {
	// 5 per 5 s: emission interval 1 s, tolerance 5 s.
	runRefunds(t, GCRA, base, Params{Limit: 5, Window: 5 * sec}, []refundStep{
		{0, chk, 0, 2, true, 3, 0, 2 * sec},
		{0, ref, 1, 2, true, 5, 0, 0}, // at once: all of it, TAT back to now
		{0, chk, 0, 5, true, 0, 0, 5 * sec},
		// 1 s later the TAT alone cannot tell these charges from 2 at 0 s
		// and 3 admitted at 1 s, whose twin has its TAT at 4 s: it moves
		// back by 2 s - 1 s only.
		{1 * sec, ref, 3, 2, true, 2, 0, 3 * sec},
		{0, chk, 0, 2, true, 0, 0, 5 * sec},
		{5 * sec, chk, 0, 5, true, 0, 0, 5 * sec}, // base+6s, fresh
		{3 * sec, chk, 0, 1, true, 2, 0, 3 * sec}, // base+9s, TAT 12 s
		// TAT 12 s - (5 s - 3 s) = 10 s: the twin's, the 1 admitted at 9 s
		// alone. Back by the whole 5 s (to 7 s, fresh) would admit 5 more
		// now: 6 in one instant, above the burst of 5.
		{0, ref, 6, 5, true, 4, 0, 1 * sec},
		{0, chk, 0, 5, false, 4, 1 * sec, 1 * sec},
		{0, chk, 0, 4, true, 0, 0, 5 * sec},
	})
}

// TestRefundCostZero: a refund of nothing changes nothing, whatever the
// state.
func TestRefundCostZero(t *testing.T) {
	p := Params{Limit: 5, Window: 10 * sec}
	for _, a := range allAlgos {
		var st State
		Check(a, &st, p, 3, base)
		before := cloneState(&st)
		Refund(a, &st, p, 0, base, base)
		if !stateEqual(&before, &st) {
			t.Errorf("%v: a refund of 0 changed %+v into %+v", a, before, st)
		}
	}
}

// TestRefundDoesNotAllocate: a charge and its refund on a key in steady
// state allocate nothing.
func TestRefundDoesNotAllocate(t *testing.T) {
	for _, a := range allAlgos {
		st, p, now := steadyKey(a)
		refunds := 0
		allocs := testing.AllocsPerRun(1000, func() {
			now += 7 * ms
			if Check(a, st, p, 1, now).Allowed {
				Refund(a, st, p, 1, now, now+ms)
				refunds++
			}
		})
		if allocs != 0 || refunds == 0 {
			t.Errorf("%v: %v allocations per check and refund (%d refunds)", a, allocs, refunds)
		}
	}
}

// TestPropertyRefund: on random traces (genTrace), some admitted charges
// are given back a few requests later (often at the same instant). A twin
// state is charged with every admission but those. Then:
//
//   - the refunded state never allows a request that the twin denies, and
//     never shows more remaining after a refund (never over-returns), for
//     every algorithm;
//   - while no refund is pending, every decision is the twin's, exactly:
//     always for fixed, sliding and log; for token and leaky while every
//     refund found no admission at a later instant than its charge; for
//     gcra while every refund came at the instant of its charge. Past
//     another refund, the token and leaky bucket keeps at most
//     (T-chargedAt)*limit/window tokens more in use than the twin, and
//     gcra's TAT is at most now-chargedAt later;
//   - every refunded state round-trips the codec and expires correctly.
//
// One refund in eight is given a chargedAt earlier than the charge's time
// (a caller whose clock lagged): it may give back less, never more, and
// ends exactness until both states are as good as fresh. Pending refunds
// are all made before the parameters change.
func TestPropertyRefund(t *testing.T) {
	rng := newRand(t)
	for _, a := range allAlgos {
		var refunds, inexact int
		for i := 0; i < 60; i++ {
			r := &refundRun{t: t, rng: rng, a: a}
			for _, sg := range genTrace(rng, a, 3) {
				r.segment(sg)
			}
			refunds, inexact = refunds+r.refunds, inexact+r.inexact
		}
		if refunds < 500 || inexact == 0 {
			t.Errorf("%v: %d refunds, %d of them inexact: the trace misses cases", a, refunds, inexact)
		}
	}
}

// refundRun is one key of TestPropertyRefund with its twin.
type refundRun struct {
	t       *testing.T
	rng     *rand.Rand
	a       Algo
	p       Params
	st      State
	twin    State     // charged with the admissions not refunded
	exact   bool      // every refund so far gave back exactly the charge
	pending []pending // admitted charges to give back
	refunds int
	inexact int
}

// pending is an admitted charge to refund at request due of its segment,
// as if charged early ns before it was (a caller whose clock lagged the
// state's).
type pending struct {
	at, cost, early int64
	due             int
}

// segment runs the requests of sg, refunding the charges due before each,
// and at the end every charge still pending.
func (r *refundRun) segment(sg segment) {
	r.p, r.twin, r.exact = sg.p, cloneState(&r.st), true
	for j, q := range sg.reqs {
		for k := 0; k < len(r.pending); {
			if c := r.pending[k]; c.due <= j {
				r.pending = append(r.pending[:k], r.pending[k+1:]...)
				r.refund(c, q.at)
			} else {
				k++
			}
		}
		r.check(q, j)
	}
	last := sg.reqs[len(sg.reqs)-1].at
	for len(r.pending) > 0 {
		c := r.pending[0]
		r.pending = r.pending[1:]
		r.refund(c, last)
	}
}

// check charges q to the key and compares its decision with the twin's;
// three in ten admitted charges are picked to be refunded.
func (r *refundRun) check(q req, j int) {
	t := r.t
	t.Helper()
	got := Check(r.a, &r.st, r.p, q.cost, q.at)
	tw := cloneState(&r.twin)
	want := Check(r.a, &tw, r.p, q.cost, q.at)
	if got.Allowed && !want.Allowed {
		t.Fatalf("%v %+v: request %+v allowed (%s), the twin denies it (%s): over-returned", r.a, r.p, q, fmtResult(got), fmtResult(want))
	}
	if r.exact && len(r.pending) == 0 && got != want {
		t.Fatalf("%v %+v: request %+v: %s, the twin %s", r.a, r.p, q, fmtResult(got), fmtResult(want))
	}
	if !got.Allowed {
		return
	}
	if q.cost > 0 && r.rng.IntN(10) < 3 {
		c := pending{at: q.at, cost: q.cost, due: j + r.rng.IntN(5)}
		if r.rng.IntN(8) == 0 {
			c.early = 1 + r.rng.Int64N(2*max(r.p.Window/r.p.Limit, 1))
		}
		r.pending = append(r.pending, c)
		return
	}
	r.twin = tw
}

// refund gives back c at now and checks the refunded state against the
// twin.
func (r *refundRun) refund(c pending, now int64) {
	t := r.t
	t.Helper()
	sole := r.exact && len(r.pending) == 0 // the twin differs by c alone
	exact := r.refundExact(c, now)
	lastT := r.st.T
	Refund(r.a, &r.st, r.p, c.cost, c.at-c.early, now)
	r.refunds++
	checkValid(t, r.a, r.p, &r.st, now)
	got, want := Peek(r.a, &r.st, r.p, now), Peek(r.a, &r.twin, r.p, now)
	if got.Remaining > want.Remaining || (got.Allowed && !want.Allowed) {
		t.Fatalf("%v %+v: refund of %+v at %d: %s, the twin %s: over-returned", r.a, r.p, c, now, fmtResult(got), fmtResult(want))
	}
	if !exact {
		r.inexact++
		if sole && c.early == 0 {
			r.checkUnderReturn(c, lastT, now)
		}
	}
	r.exact = r.exact && exact
	if !r.exact && len(r.pending) == 0 && ExpiresAt(r.a, &r.st, r.p) <= now && ExpiresAt(r.a, &r.twin, r.p) <= now {
		r.exact = true // both as good as fresh: they decide alike again
	}
}

// refundExact reports whether Refund promises to give back exactly c at
// now, given the state before the refund.
func (r *refundRun) refundExact(c pending, now int64) bool {
	if c.early > 0 {
		return false
	}
	switch r.a {
	case Token, Leaky:
		return r.st.T == c.at
	case GCRA:
		return now == c.at
	}
	return true
}

// checkUnderReturn fails if the refund of c at now, the only difference
// from the twin, kept more in use than Refund's bound allows: for token
// and leaky (lastT-c.at)*limit token-nanoseconds as of now, lastT being
// the last admission; for gcra a TAT now-c.at later.
func (r *refundRun) checkUnderReturn(c pending, lastT, now int64) {
	t := r.t
	t.Helper()
	if r.a == GCRA {
		got, want := max(r.st.T, now), max(r.twin.T, now)
		if got < want || got-want > now-c.at {
			t.Fatalf("gcra %+v: refund of %+v at %d: TAT %d, the twin's %d", r.p, c, now, got, want)
		}
		return
	}
	full := mul128(uint64(r.p.Capacity(r.a)), uint64(r.p.Window))
	got, want := usedAt(&r.st, full, r.p.Limit, now), usedAt(&r.twin, full, r.p.Limit, now)
	bound := want.add(mul128(uint64(lastT-c.at), uint64(r.p.Limit)))
	if got.less(want) || bound.less(got) {
		t.Fatalf("%v %+v: refund of %+v at %d: %v in use, the twin %v, the bound %v", r.a, r.p, c, now, got, want, bound)
	}
}
