package engine

import (
	"math/bits"
	"math/rand/v2"
	"testing"
)

// Randomized properties. Each test logs its seed; replay a failure with
// go test -run Name -seed=N ./engine (or RL_SEED=N).

type req struct{ at, cost int64 }

// segment is a stretch of requests under one set of parameters.
type segment struct {
	p    Params
	reqs []req
}

type outcome struct {
	req
	r Result
}

var windows = []int64{MinWindow, 7 * ms, 1 * sec, 10 * sec, 60 * sec, 3600 * sec}

func genParams(rng *rand.Rand, a Algo) Params {
	p := Params{Limit: 1 + rng.Int64N(20), Window: windows[rng.IntN(len(windows))]}
	if rng.IntN(3) == 0 {
		p.Window = MinWindow + rng.Int64N(20*sec)
	}
	if a.Bucket() && rng.IntN(2) == 0 {
		p.Burst = 1 + rng.Int64N(30)
	}
	return p
}

// genGap returns a pause between requests: often none, mostly around the
// mean spacing W/L, sometimes an idle stretch of up to three windows.
func genGap(rng *rand.Rand, p Params) int64 {
	m := max(p.Window/p.Limit, 1)
	switch n := rng.IntN(100); {
	case n < 25:
		return 0
	case n < 70:
		return rng.Int64N(2 * m)
	case n < 90:
		return rng.Int64N(m/4 + 1)
	case n < 98:
		return rng.Int64N(p.Window)
	}
	return rng.Int64N(3 * p.Window)
}

func genCost(rng *rand.Rand, a Algo, p Params) int64 {
	switch n := rng.IntN(100); {
	case n < 65:
		return 1
	case n < 75:
		return 0
	}
	return rng.Int64N(p.Capacity(a) + 3)
}

// genTrace returns 1 to 4 segments, starting at a random time.
func genTrace(rng *rand.Rand, a Algo, maxSegs int) []segment {
	now := base + rng.Int64N(day)
	segs := make([]segment, 1+rng.IntN(maxSegs))
	for i := range segs {
		p := genParams(rng, a)
		if err := p.Validate(a); err != nil {
			panic(err)
		}
		segs[i].p = p
		for n := 50 + rng.IntN(350); n > 0; n-- {
			now += genGap(rng, p)
			segs[i].reqs = append(segs[i].reqs, req{now, genCost(rng, a, p)})
		}
	}
	return segs
}

// runTrace charges every request of segs to one key, checking at each step
// that a denial changes nothing and, if probe is set, that the reported
// numbers are exact. It returns the outcomes per segment.
func runTrace(t *testing.T, a Algo, segs []segment, probe bool) [][]outcome {
	t.Helper()
	var st State
	out := make([][]outcome, len(segs))
	for i, sg := range segs {
		shadow := cloneState(&st) // charged only with admitted requests
		for j, q := range sg.reqs {
			before := cloneState(&st)
			r := Check(a, &st, sg.p, q.cost, q.at)
			sh := cloneState(&shadow)
			if rs := Check(a, &sh, sg.p, q.cost, q.at); rs != r {
				t.Fatalf("%v %+v seg %d step %d: %s, without the denied requests %s", a, sg.p, i, j, fmtResult(r), fmtResult(rs))
			}
			switch {
			case r.Allowed:
				shadow = sh
			case cappedRewrite(a, &before, &st, sg.p, q.at):
				shadow = cloneState(&st) // a fallen capacity, stored (bucket.go)
			default:
				checkUnchanged(t, a, sg.p, &before, &st, q.at)
			}
			if probe {
				checkExact(t, a, sg.p, &before, &st, q, r)
			}
			out[i] = append(out[i], outcome{q, r})
		}
	}
	return out
}

func checkUnchanged(t *testing.T, a Algo, p Params, before, after *State, now int64) {
	t.Helper()
	if a == Log && before.Log != nil {
		before.Log.TrimBefore(now - p.Window) // trimming changes no decision
	}
	if !stateEqual(before, after) {
		t.Fatalf("%v %+v: a denied request at %d changed %+v into %+v", a, p, now, *before, *after)
	}
}

// checkExact verifies Result r of request q against probes on copies of the
// state: Remaining more cost-1 requests pass now and one more does not; the
// request passes RetryAfter from now and not 1 ns earlier; the key is back
// to its full allowance ResetAfter from now and not 1 ns earlier; from
// ExpiresAt on the state decides like a fresh key.
func checkExact(t *testing.T, a Algo, p Params, before, st *State, q req, r Result) {
	t.Helper()
	capa := p.Capacity(a)
	fail := func(what string, got Result) {
		t.Helper()
		t.Fatalf("%v %+v: request %+v on %+v gave %s; %s: %s", a, p, q, *before, fmtResult(r), what, fmtResult(got))
	}
	if r.Limit != capa || r.Remaining < 0 || r.Remaining > capa || r.ResetAfter < 0 ||
		r.Allowed != (r.RetryAfter == 0) || (q.cost > capa) != (r.RetryAfter == -1) {
		fail("out of range", r)
	}
	c := cloneState(st)
	for i := int64(0); i < r.Remaining; i++ {
		if got := Check(a, &c, p, 1, q.at); !got.Allowed {
			fail("a remaining request was denied", got)
		}
	}
	if got := Check(a, &c, p, 1, q.at); got.Allowed {
		fail("one more than remaining passed", got)
	}
	if r.RetryAfter > 0 {
		probeAt(a, st, p, q.cost, q.at+r.RetryAfter-1, func(g Result) bool { return !g.Allowed }, fail, "retry-1")
		probeAt(a, st, p, q.cost, q.at+r.RetryAfter, func(g Result) bool { return g.Allowed }, fail, "retry")
	}
	full := func(g Result) bool { return g.Allowed && g.Remaining == capa && g.ResetAfter == 0 }
	probeAt(a, st, p, 0, q.at+r.ResetAfter, full, fail, "reset")
	if r.ResetAfter > 0 {
		probeAt(a, st, p, 0, q.at+r.ResetAfter-1, func(g Result) bool { return g.Remaining < capa && g.ResetAfter == 1 }, fail, "reset-1")
	}
	checkExpires(t, a, p, st, q)
}

func probeAt(a Algo, st *State, p Params, cost, at int64, ok func(Result) bool, fail func(string, Result), what string) {
	c := cloneState(st)
	if got := Check(a, &c, p, cost, at); !ok(got) {
		fail("probe at "+what, got)
	}
}

func checkExpires(t *testing.T, a Algo, p Params, st *State, q req) {
	t.Helper()
	at := max(ExpiresAt(a, st, p), q.at)
	for _, cost := range []int64{0, 1, p.Capacity(a)} {
		c, fresh := cloneState(st), State{}
		got, want := Check(a, &c, p, cost, at), Check(a, &fresh, p, cost, at)
		if got != want {
			t.Fatalf("%v %+v: state %+v at ExpiresAt %d, cost %d: %s, a fresh key %s", a, p, *st, at, cost, fmtResult(got), fmtResult(want))
		}
	}
}

// admitted returns the admitted requests of a segment with a positive cost.
func admitted(os []outcome) []req {
	var rs []req
	for _, o := range os {
		if o.r.Allowed && o.cost > 0 {
			rs = append(rs, o.req)
		}
	}
	return rs
}

// mulDivFloor returns floor(a*b/c) for non-negative a, b and positive c.
func mulDivFloor(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q)
}

func TestPropertyReportedValuesExact(t *testing.T) {
	rng := newRand(t)
	for _, a := range allAlgos {
		for i := 0; i < 15; i++ {
			runTrace(t, a, genTrace(rng, a, 4), true)
		}
	}
}

// TestPropertyWindowBounds: log admits at most limit in any (t-W, t];
// fixed and sliding at most limit in any epoch-aligned window.
func TestPropertyWindowBounds(t *testing.T) {
	rng := newRand(t)
	for _, a := range []Algo{Fixed, Sliding, Log} {
		for i := 0; i < 100; i++ {
			segs := genTrace(rng, a, 4)
			for j, os := range runTrace(t, a, segs, false) {
				p := segs[j].p
				if a == Log {
					checkLogBound(t, p, admitted(os))
				} else {
					checkAlignedBound(t, a, p, admitted(os))
				}
			}
		}
	}
}

func checkLogBound(t *testing.T, p Params, rs []req) {
	t.Helper()
	var sum int64
	lo := 0
	for _, r := range rs {
		sum += r.cost
		for rs[lo].at <= r.at-p.Window {
			sum -= rs[lo].cost
			lo++
		}
		if sum > p.Limit {
			t.Fatalf("log %+v: %d admitted in (%d, %d]", p, sum, r.at-p.Window, r.at)
		}
	}
}

func checkAlignedBound(t *testing.T, a Algo, p Params, rs []req) {
	t.Helper()
	sums := map[int64]int64{}
	for _, r := range rs {
		w := floorDiv(r.at, p.Window)
		if sums[w] += r.cost; sums[w] > p.Limit {
			t.Fatalf("%v %+v: %d admitted in the window at %d", a, p, sums[w], w*p.Window)
		}
	}
}

// TestPropertyBucketBounds: over any [t0, t1], token and leaky admit at most
// burst + floor(L*(t1-t0)/W), and gcra at most burst + floor((t1-t0)/E)
// with E = Interval(L, W), exactly.
func TestPropertyBucketBounds(t *testing.T) {
	rng := newRand(t)
	for _, a := range []Algo{Token, Leaky, GCRA} {
		for i := 0; i < 100; i++ {
			segs := genTrace(rng, a, 4)
			for j, os := range runTrace(t, a, segs, false) {
				checkBucketBound(t, a, segs[j].p, admitted(os))
			}
		}
	}
}

func checkBucketBound(t *testing.T, a Algo, p Params, rs []req) {
	t.Helper()
	e := Interval(p.Limit, p.Window)
	for i := range rs {
		var sum int64
		for j := i; j < len(rs); j++ {
			sum += rs[j].cost
			d := rs[j].at - rs[i].at
			bound := p.Capacity(a) + mulDivFloor(p.Limit, d, p.Window)
			if a == GCRA {
				bound = p.Capacity(a) + d/e
			}
			if sum > bound {
				t.Fatalf("%v %+v: %d admitted in [%d, %d], bound %d", a, p, sum, rs[i].at, rs[j].at, bound)
			}
		}
	}
}

func TestPropertyTokenEqualsLeaky(t *testing.T) {
	rng := newRand(t)
	for i := 0; i < 100; i++ {
		segs := genTrace(rng, Token, 4)
		var tok, leak State
		for _, sg := range segs {
			for _, q := range sg.reqs {
				rt := Check(Token, &tok, sg.p, q.cost, q.at)
				rl := Check(Leaky, &leak, sg.p, q.cost, q.at)
				if rt != rl || tok != leak {
					t.Fatalf("%+v %+v: token %s %+v, leaky %s %+v", sg.p, q, fmtResult(rt), tok, fmtResult(rl), leak)
				}
			}
		}
	}
}
