package engine

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testseed"
)

const (
	ms  = int64(time.Millisecond)
	sec = int64(time.Second)
	day = 86400 * sec
)

// base is a clock reading aligned to every window used in the tables
// (20000 days after the epoch).
const base = 20000 * day

var allAlgos = []Algo{Fixed, Sliding, Log, Token, Leaky, GCRA}

// newRand returns a generator seeded from -seed, RL_SEED or the clock, and
// logs the seed so that a failure can be replayed.
func newRand(t testing.TB) *rand.Rand {
	t.Helper()
	return testseed.Rand(t)
}

// step is one row of a time-stepped table: advance the fake clock, charge
// cost, and expect this Result.
type step struct {
	advance   int64
	cost      int64
	allowed   bool
	remaining int64
	retry     int64
	reset     int64
}

// fakeKey runs steps against one key on a fake clock. Alongside the real
// state it keeps a shadow that is charged only with the requests the real
// state admitted: every decision must be the same on both, which shows that
// denied requests change nothing.
type fakeKey struct {
	t      *testing.T
	algo   Algo
	now    int64
	st     State
	shadow State
	row    int
}

func newKey(t *testing.T, a Algo, start int64) *fakeKey {
	return &fakeKey{t: t, algo: a, now: start}
}

// run checks the rows in order with parameters p.
func (k *fakeKey) run(p Params, steps []step) {
	k.t.Helper()
	for _, s := range steps {
		k.row++
		k.now += s.advance
		got := k.check(p, s.cost)
		want := Result{Allowed: s.allowed, Limit: p.Capacity(k.algo), Remaining: s.remaining,
			RetryAfter: s.retry, ResetAfter: s.reset}
		if got != want {
			k.t.Errorf("%v row %d (t=%s, cost %d, %+v):\n got %s\nwant %s", k.algo, k.row,
				fmtDur(k.now-base), s.cost, p, fmtResult(got), fmtResult(want))
		}
	}
}

// check charges cost at the current time and verifies the shadow and the
// denied-leaves-state-alone rule.
func (k *fakeKey) check(p Params, cost int64) Result {
	k.t.Helper()
	before := cloneState(&k.st)
	got := Check(k.algo, &k.st, p, cost, k.now)
	sh := cloneState(&k.shadow)
	if shr := Check(k.algo, &sh, p, cost, k.now); shr != got {
		k.t.Errorf("%v row %d: denied requests changed a later decision: %s, without them %s",
			k.algo, k.row, fmtResult(got), fmtResult(shr))
	}
	if got.Allowed {
		k.shadow = sh
		return got
	}
	if k.algo == Log && before.Log != nil {
		before.Log.TrimBefore(k.now - p.Window)
	}
	switch {
	case stateEqual(&before, &k.st):
	case cappedRewrite(k.algo, &before, &k.st, p, k.now):
		// The bucket's capacity fell: the denial stored the capped amount,
		// the same for p, and later changes start from it (bucket.go).
		k.shadow = cloneState(&k.st)
	default:
		k.t.Errorf("%v row %d: denied request changed the state: %+v -> %+v", k.algo, k.row, before, k.st)
	}
	return got
}

// cappedRewrite reports whether after is before's bucket capped at p's
// capacity and drained to now: the one rewrite a denied check may make.
func cappedRewrite(a Algo, before, after *State, p Params, now int64) bool {
	if a != Token && a != Leaky {
		return false
	}
	full := mul128(uint64(p.Capacity(a)), uint64(p.Window))
	if !full.less(bucketUsed(before)) {
		return false
	}
	used := usedAt(before, full, p.Limit, now)
	return stateEqual(after, &State{T: now, P: int64(used.hi), N: int64(used.lo)})
}

func fmtResult(r Result) string {
	return "{allowed " + strconv.FormatBool(r.Allowed) + " limit " + strconv.FormatInt(r.Limit, 10) +
		" remaining " + strconv.FormatInt(r.Remaining, 10) + " retry " + fmtDur(r.RetryAfter) +
		" reset " + fmtDur(r.ResetAfter) + "}"
}

func fmtDur(ns int64) string {
	if ns == -1 {
		return "-1"
	}
	return time.Duration(ns).String()
}

// cloneState returns a deep copy of st.
func cloneState(st *State) State {
	c := *st
	if st.Log != nil {
		c.Log = &Ring{}
		for i := 0; i < st.Log.Len(); i++ {
			c.Log.Push(st.Log.At(i))
		}
	}
	return c
}

// entries returns the log entries of st, oldest first (nil for none).
func entries(st *State) []Entry {
	var es []Entry
	if st.Log != nil {
		for i := 0; i < st.Log.Len(); i++ {
			es = append(es, st.Log.At(i))
		}
	}
	return es
}

// stateEqual compares two states field by field, logs by their entries.
func stateEqual(a, b *State) bool {
	if a.T != b.T || a.N != b.N || a.P != b.P {
		return false
	}
	ea, eb := entries(a), entries(b)
	if len(ea) != len(eb) {
		return false
	}
	for i := range ea {
		if ea[i] != eb[i] {
			return false
		}
	}
	var sa, sb int64
	if a.Log != nil {
		sa = a.Log.Sum()
	}
	if b.Log != nil {
		sb = b.Log.Sum()
	}
	return sa == sb
}
