package luaref_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
)

// The differential test replays seeded random traces through the Lua
// scripts on a real redis-server and through engine.Check at the same
// instants, and compares every reply. A trace interleaves 32 keys, each with
// its own clock; the engine's replies steer it onto window edges and onto
// the instants at which a denied request would pass or a key would be back
// to full (±1 µs), between bursts at one instant, idle gaps, COST 0, COST
// above the capacity and changes of parameters.
//
// Fixed, sliding and log use integer arithmetic on both sides and must agree
// on every step: the decision, remaining, and retry-after and reset-after
// once the engine's nanoseconds are rounded up to the scripts' microseconds
// (the one named difference, resolution).
//
// The token, leaky and gcra scripts compute in doubles, as deployed scripts
// do, while the engine is exact; gcra's engine also truncates the emission
// interval to whole nanoseconds, as redis-cell does. Where the two do not
// agree exactly the test asserts the bound instead: the script's reply lies
// between the engine's replies to the same request with the bucket's
// theoretical arrival time (when it is full, or empty, again) moved by
// ±delta, delta being one microsecond plus the error that the doubles (and,
// for gcra, the truncated interval) can have accumulated since the bucket
// was last at rest. Moving the TAT by delta is moving the clock by delta,
// except that it also covers a bucket at rest, whose room the doubles can
// miss by an ulp. A step whose decision differs within the bound is
// followed by writing the engine's state into the script's key, so that one
// rounding does not make the rest of the trace diverge.
//
// On a change of parameters the scripts keep a different state from the
// engine's in two places, named and counted in the report (and shown by
// TestNamedDifferences):
//   - fixed, sliding: a new window length. The scripts key windows by
//     index, so they start counting afresh; the engine keeps the count when
//     the old window starts inside the new one.
//   - token, leaky: a new window length. A script keeps its token count or
//     level; the engine keeps tokens in use × window, which is a different
//     number of tokens in the new window.
//   - token: a new capacity. The script keeps the tokens available, the
//     engine the tokens in use. (A new limit keeps the tokens in both.)
//   - leaky: a smaller capacity. The script keeps a level above it; the
//     engine caps the level at a full bucket.
//
// At such a change the test writes the engine's state into the script's
// keys before the step. Changes of the limit alone (fixed, sliding), every
// change for log and gcra, and rate-preserving changes for the buckets are
// compared as they are.
//
// Every step also checks, in the same MULTI as the script, that each key
// the script left has a TTL at least as long as the engine says its state
// matters, and then extends it (see holdMS).
//
// LUAREF_SEED replays a run (its seed is logged); LUAREF_STEPS sets the
// number of steps per algorithm.

const (
	seedEnv      = "LUAREF_SEED"
	stepsEnv     = "LUAREF_STEPS"
	defaultSteps = 10000
	traceKeys    = 32
	ttlSlackMS   = 250              // PTTL is read in the same MULTI as the script; a loaded machine may pause Redis
	traceStartUS = 1767225600000000 // 2026-01-01T00:00:00Z
)

func TestDifferential(t *testing.T) {
	seed := envUint(t, seedEnv, uint64(time.Now().UnixNano()))
	steps := int(envUint(t, stepsEnv, defaultSteps))
	t.Logf("seed %d, %d steps per algorithm (replay with %s=%d)", seed, steps, seedEnv, seed)
	s := startScripts(t)
	for a := engine.Fixed; a <= engine.GCRA; a++ {
		t.Run(a.String(), func(t *testing.T) {
			t.Parallel()
			d := newDiff(t, s, a, seed)
			for i := range steps {
				d.step(i)
			}
			d.report()
		})
	}
}

func envUint(t *testing.T, name string, def uint64) uint64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: want an unsigned integer", name, v)
	}
	return n
}

// diff is one algorithm's differential run.
type diff struct {
	t     *testing.T
	s     *scripts
	a     engine.Algo
	seed  uint64
	exact bool // integer arithmetic on both sides: every step must agree
	rng   *rand.Rand
	keys  []*traceKey
	stats diffStats
}

// traceKey is one limiter key of the trace and its engine state.
type traceKey struct {
	name    string
	now     int64 // the key's own clock, µs since the Unix epoch
	p       engine.Params
	st      engine.State
	last    engine.Result // the engine's last reply, which steers the trace
	lastAt  int64         // when, µs
	ops     int64         // float algorithms: admissions since the key was last at rest or synced
	units   int64         // and their total cost
	history []string      // the key's recent steps, for failure messages
	charged bool          // a check of cost > 0 ran since the last sync
}

type diffStats struct {
	steps, agreed, bounded             int
	decided                            int // steps whose decision (allowed or not) agreed
	offRemaining, offRetry, offReset   int // bounded steps, by the field that differed
	rounded                            int // durations the script had rounded up to the µs
	allowed, denied, never, zeroCost   int
	boundaryHits                       int // steps placed on a window edge, retry or reset instant
	changes, syncChanges, syncBounded  int
	maxDelta, maxRetryDiff, maxSDiffNS int64
}

func newDiff(t *testing.T, s *scripts, a engine.Algo, seed uint64) *diff {
	rng := rand.New(rand.NewPCG(seed, uint64(a)))
	d := &diff{t: t, s: s, a: a, seed: seed, rng: rng,
		exact: a == engine.Fixed || a == engine.Sliding || a == engine.Log}
	for i := range traceKeys {
		d.keys = append(d.keys, &traceKey{
			name: fmt.Sprintf("{diff:%s:%d:%d}", a, seed, i),
			now:  traceStartUS + rng.Int64N(86400e6),
			p:    d.randParams(),
		})
	}
	return d
}

func (d *diff) fatalf(k *traceKey, format string, args ...any) {
	d.t.Helper()
	d.t.Fatalf("%s, seed %d (replay with %s=%d): %s\nkey %s, recent steps:\n  %s",
		d.a, d.seed, seedEnv, d.seed, fmt.Sprintf(format, args...), k.name, strings.Join(k.history, "\n  "))
}

// step runs one request of the trace through both sides and compares.
func (d *diff) step(i int) {
	k := d.keys[int(float64(len(d.keys))*math.Pow(d.rng.Float64(), 2))]
	d.advance(k)
	cost := d.pickCost(k)
	if d.rng.IntN(40) == 0 {
		d.change(k)
	}
	nowNS := k.now * 1000
	if !d.exact && engine.ExpiresAt(d.a, &k.st, k.p)+d.delta(k) <= nowNS {
		k.ops, k.units = 0, 0 // at rest on both sides: no error carried
	}
	delta := d.delta(k)
	before := k.st
	watch := d.watched(k)
	lua, ttls, err := d.s.callWatched(d.t.Context(), d.a, k.name, k.p, cost, k.now, watch)
	if err != nil {
		d.fatalf(k, "step %d: script: %v", i, err)
	}
	eng := engine.Check(d.a, &k.st, k.p, cost, nowNS)
	k.charged = k.charged || cost > 0
	since := "first"
	if k.lastAt > 0 {
		since = fmt.Sprintf("+%dus", k.now-k.lastAt)
	}
	k.history = append(k.history, fmt.Sprintf("step %d now=%dus (%s) limit=%d window=%dus burst=%d cost=%d: lua %v, engine %+v",
		i, k.now, since, k.p.Limit, k.p.Window/1000, k.p.Burst, cost, lua, eng))
	if len(k.history) > 12 {
		k.history = k.history[1:]
	}
	k.last, k.lastAt = eng, k.now
	d.count(cost, eng)
	if lua.Allowed == eng.Allowed {
		d.stats.decided++
	}
	if d.exact {
		d.compareExact(k, i, lua, eng)
	} else {
		d.compareBounded(k, i, before, cost, delta, lua, eng)
	}
	if lua.Allowed == eng.Allowed {
		d.checkTTLs(k, watch, ttls)
	}
	if !eng.Allowed && (k.st.T != before.T || k.st.N != before.N || k.st.P != before.P) {
		// A denial under a lowered capacity stored the capped amount
		// (engine/bucket.go); the scripts store nothing on a denial.
		d.sync(k)
		d.stats.syncChanges++
	}
}

func (d *diff) count(cost int64, eng engine.Result) {
	d.stats.steps++
	switch {
	case eng.Allowed:
		d.stats.allowed++
	case eng.RetryAfter < 0:
		d.stats.never++
	default:
		d.stats.denied++
	}
	if cost == 0 {
		d.stats.zeroCost++
	}
}

// compareExact requires the script and the engine to agree on everything,
// durations compared at the scripts' resolution.
func (d *diff) compareExact(k *traceKey, i int, lua luaReply, eng engine.Result) {
	want := luaReply{eng.Allowed, eng.Remaining, ceilUS(eng.RetryAfter), ceilUS(eng.ResetAfter)}
	if lua != want {
		d.fatalf(k, "step %d: script replied %v, engine %v (from %+v)", i, lua, want, eng)
	}
	d.stats.agreed++
	if eng.RetryAfter%1000 > 0 || eng.ResetAfter%1000 > 0 {
		d.stats.rounded++
	}
}

// compareBounded accepts an exact agreement or a reply within the named
// bound; a decision that differs within the bound is followed by a sync.
func (d *diff) compareBounded(k *traceKey, i int, before engine.State, cost, delta int64, lua luaReply, eng engine.Result) {
	if eng.Allowed && cost > 0 {
		k.ops++
		k.units += cost
	}
	if lua == (luaReply{eng.Allowed, eng.Remaining, ceilUS(eng.RetryAfter), ceilUS(eng.ResetAfter)}) {
		d.stats.agreed++
		return
	}
	nowNS := k.now * 1000
	lo, hi := perturb(d.a, before, k.p, nowNS, delta), perturb(d.a, before, k.p, nowNS, -delta)
	loR := engine.Check(d.a, &lo, k.p, cost, nowNS)
	hiR := engine.Check(d.a, &hi, k.p, cost, nowNS)
	// Allowed and the units available before the charge (remaining, plus
	// the cost if allowed) only grow as the TAT moves back.
	avail := func(allowed bool, remaining int64) int64 {
		if allowed {
			return remaining + cost
		}
		return remaining
	}
	s := avail(lua.Allowed, lua.Remaining)
	ok := b2i(loR.Allowed) <= b2i(lua.Allowed) && b2i(lua.Allowed) <= b2i(hiR.Allowed) &&
		avail(loR.Allowed, loR.Remaining) <= s && s <= avail(hiR.Allowed, hiR.Remaining) &&
		(lua.RetryAfter < 0) == (eng.RetryAfter < 0)
	if ok && !lua.Allowed && !eng.Allowed && eng.RetryAfter >= 0 {
		diff := abs(lua.RetryAfter*1000 - eng.RetryAfter)
		d.stats.maxRetryDiff = max(d.stats.maxRetryDiff, diff)
		ok = diff <= delta+1000
	}
	if ok && lua.Allowed == eng.Allowed {
		ok = abs(lua.ResetAfter*1000-eng.ResetAfter) <= delta+1000
	}
	if !ok {
		d.fatalf(k, "step %d: script replied %v, engine %+v; outside the bound delta=%dns: engine with the TAT delta later %+v, delta earlier %+v",
			i, lua, eng, delta, loR, hiR)
	}
	d.stats.bounded++
	d.stats.maxDelta = max(d.stats.maxDelta, delta)
	if lua.Remaining != eng.Remaining {
		d.stats.offRemaining++
	}
	if lua.RetryAfter != ceilUS(eng.RetryAfter) {
		d.stats.offRetry++
	}
	if lua.ResetAfter != ceilUS(eng.ResetAfter) {
		d.stats.offReset++
	}
	if lua.Allowed != eng.Allowed {
		d.sync(k)
		d.stats.syncBounded++
	}
}

// perturb returns st with its bucket moved by shift ns: later (less room)
// for a positive shift. For gcra that moves the theoretical arrival time; a
// bucket at rest first has it put at now, so that its room can be made
// smaller too (the script's doubles can miss the room of a full bucket by an
// ulp as well). For token and leaky it changes the tokens in use by shift ns
// worth of drain at the rate of p.
func perturb(a engine.Algo, st engine.State, p engine.Params, nowNS, shift int64) engine.State {
	if a == engine.Token || a == engine.Leaky {
		used := bucketUsed(st, p, nowNS)
		used.Add(used, new(big.Int).Mul(big.NewInt(shift), big.NewInt(p.Limit)))
		if used.Sign() < 0 {
			used.SetInt64(0)
		}
		return setBucketUsed(nowNS, used)
	}
	if st.T < nowNS || (st.T == nowNS && (a == engine.GCRA || st.N == 0)) {
		st.T, st.N = nowNS, 0
	}
	st.T += shift
	return st
}

// capPending reports whether a bucket's stored amount exceeds the smaller
// of two capacities (same window): the engine caps it at each check's
// capacity and stores the cap only at a check of cost > 0, the scripts
// keep what they were given, so a change between the two moves the engine
// and not the script. The caller asks only while no such check ran since
// the last sync (a lowered capacity only peeked at, then raised again).
func capPending(st engine.State, old, p engine.Params, a engine.Algo) bool {
	full := new(big.Int).Mul(big.NewInt(min(old.Capacity(a), p.Capacity(a))), big.NewInt(p.Window))
	return bucketStored(st).Cmp(full) > 0
}

// bucketStored returns the tokens in use × window a token or leaky state
// holds, as stored: 128 bits, P the high word and N the low one.
func bucketStored(st engine.State) *big.Int {
	stored := new(big.Int).Lsh(big.NewInt(st.P), 64)
	return stored.Or(stored, new(big.Int).SetUint64(uint64(st.N)))
}

// bucketUsed returns the tokens in use × window of a token or leaky state
// at now under p, as the engine computes it (see engine/bucket.go): capped
// at a full bucket, then drained since the last admission.
func bucketUsed(st engine.State, p engine.Params, nowNS int64) *big.Int {
	used := bucketStored(st)
	if full := new(big.Int).Mul(big.NewInt(p.Capacity(engine.Token)), big.NewInt(p.Window)); used.Cmp(full) > 0 {
		used = full
	}
	if nowNS > st.T {
		used.Sub(used, new(big.Int).Mul(big.NewInt(nowNS-st.T), big.NewInt(p.Limit)))
	}
	if used.Sign() < 0 {
		used.SetInt64(0)
	}
	return used
}

// setBucketUsed returns the token or leaky state holding used at now.
func setBucketUsed(nowNS int64, used *big.Int) engine.State {
	lo := new(big.Int).And(used, new(big.Int).SetUint64(^uint64(0)))
	return engine.State{T: nowNS, N: int64(lo.Uint64()), P: new(big.Int).Rsh(used, 64).Int64()}
}

// delta returns the bound, in ns, on how far a float script's reply may be
// from the engine's, as a shift of the bucket's TAT (see perturb).
func (d *diff) delta(k *traceKey) int64 {
	switch d.a {
	case engine.GCRA:
		// The engine's emission interval is below the script's by less
		// than 1 ns: each admitted unit moves the TAT apart by < 1 ns, and
		// the tolerance (interval × capacity) differs by < capacity ns.
		// Each admission rounds the script's TAT, a double of µs since
		// 2024 (ulp < 16 ns until 2026-03, < 32 ns until 2028), a few times.
		return 1000 + 2*(k.units+k.p.Capacity(d.a)) + 64*k.ops
	case engine.Token, engine.Leaky:
		// Each admission rounds the token count (at most the capacity) a
		// few times: 4 ulps of the capacity, turned into time at the rate.
		capa := float64(k.p.Capacity(d.a))
		perOp := 4 * capa * math.Pow(2, -52) * float64(k.p.Window) / float64(k.p.Limit)
		return 1000 + int64(math.Ceil(float64(k.ops)*perOp))
	}
	return 0
}

// watched returns the Redis keys the script uses at this step.
func (d *diff) watched(k *traceKey) []string {
	w := k.p.Window / 1000
	switch d.a {
	case engine.Fixed:
		return []string{windowKey(k.name, floorDiv(k.now, w))}
	case engine.Sliding:
		i := floorDiv(k.now, w)
		return []string{windowKey(k.name, i), windowKey(k.name, i-1)}
	}
	return []string{k.name}
}

// lifetimes returns, for each watched key, how long (ns) after now the
// engine's state says the key must still exist.
func (d *diff) lifetimes(k *traceKey) []int64 {
	nowNS, w := k.now*1000, k.p.Window
	start := floorDiv(nowNS, w) * w
	switch d.a {
	case engine.Fixed:
		if k.st.N > 0 && k.st.T == start {
			return []int64{start + w - nowNS}
		}
		return []int64{0}
	case engine.Sliding:
		cur, prev := slidingCounts(k.st, start, w)
		life := []int64{0, 0}
		if cur > 0 {
			life[0] = start + 2*w - nowNS
		}
		if prev > 0 {
			life[1] = start + w - nowNS
		}
		return life
	case engine.Log:
		if k.st.Log == nil || k.st.Log.Len() == 0 {
			return []int64{0}
		}
		return []int64{k.st.Log.Last().At + w - nowNS}
	}
	return []int64{engine.ExpiresAt(d.a, &k.st, k.p) - nowNS}
}

// checkTTLs checks that every key the script left has a TTL, and one long
// enough for the state it holds.
func (d *diff) checkTTLs(k *traceKey, watch []string, ttls []int64) {
	for i, life := range d.lifetimes(k) {
		needMS := life / 1e6
		switch {
		case ttls[i] == -1:
			d.fatalf(k, "key %s has no TTL: it would never be freed", watch[i])
		case needMS > ttlSlackMS && ttls[i] < needMS-ttlSlackMS:
			d.fatalf(k, "key %s has a TTL of %dms but its state matters for %dms more", watch[i], ttls[i], needMS)
		}
	}
}

// slidingCounts returns the current and previous window counts of st as of
// the window starting at start (ns), as the engine reads them.
func slidingCounts(st engine.State, start, w int64) (cur, prev int64) {
	switch {
	case st.T >= start:
		return st.N, st.P
	case st.T >= start-w:
		return 0, st.N
	}
	return 0, 0
}

// sync writes the engine's state of k at now into the script's keys, in the
// script's representation.
func (d *diff) sync(k *traceKey) {
	ctx := d.t.Context()
	nowNS, w := k.now*1000, k.p.Window
	start := floorDiv(nowNS, w) * w
	count := func(n int64) string {
		if n == 0 {
			return ""
		}
		return strconv.FormatInt(n, 10)
	}
	var err error
	switch d.a {
	case engine.Fixed:
		cur, _ := slidingCounts(k.st, start, w)
		err = d.s.set(ctx, windowKey(k.name, start/w), count(cur))
	case engine.Sliding:
		cur, prev := slidingCounts(k.st, start, w)
		if err = d.s.set(ctx, windowKey(k.name, start/w), count(cur)); err == nil {
			err = d.s.set(ctx, windowKey(k.name, start/w-1), count(prev))
		}
	case engine.Token, engine.Leaky:
		// The amount the engine keeps, capped, as of its last admission
		// (not drained to now): the script then drains it from the same
		// instant at whatever rate later checks give, as the engine does
		// (the parameters of a check apply to the time since the last
		// admission), also across later changes that are not synced.
		at := min(k.st.T, nowNS)
		used, _ := new(big.Rat).SetFrac(bucketUsed(k.st, k.p, at), big.NewInt(k.p.Window)).Float64()
		units := used // tokens in use
		ts := strconv.FormatInt(at/1000, 10)
		switch {
		case units <= 0:
			err = d.s.set(ctx, k.name, "")
		case d.a == engine.Token:
			err = d.s.set(ctx, k.name, "", "tokens", fmtFloat(float64(k.p.Capacity(d.a))-units), "ts", ts)
		default:
			err = d.s.set(ctx, k.name, "", "level", fmtFloat(units), "ts", ts)
		}
	case engine.GCRA:
		tat := ""
		if k.st.T > nowNS {
			tat = fmtFloat(float64(k.st.T-gcraEpochUS*1000) / 1000)
		}
		err = d.s.set(ctx, k.name, tat)
	}
	if err != nil {
		d.fatalf(k, "sync: %v", err)
	}
	k.ops, k.units, k.charged = 0, 0, false
}

// Trace generation. Everything is drawn from d.rng, so a seed replays the
// same trace; the engine's replies steer it to the interesting instants.

// windowsUS and limits are the parameters traces draw from. Windows are at
// least a second; see harness_test.go (holdMS) on Redis's clock.
func windowsUS() []int64 {
	return []int64{1e6, 1_500_000, 2e6, 3_333_333, 10e6, 60e6, 3600e6}
}

func limits() []int64 { return []int64{1, 2, 3, 5, 7, 10, 12, 60, 100, 1000} }

func (d *diff) randParams() engine.Params {
	ws, ls := windowsUS(), limits()
	for {
		p := engine.Params{Limit: ls[d.rng.IntN(len(ls))], Window: ws[d.rng.IntN(len(ws))] * 1000}
		if d.a.Bucket() && d.rng.IntN(2) == 0 {
			p.Burst = 1 + d.rng.Int64N(2*p.Limit+3)
		}
		if p.Validate(d.a) == nil {
			return p
		}
	}
}

// advance moves the clock for a request on k: not at all (a burst), by about
// the rate, onto a window edge or the instant the engine said a denied
// request would pass or the key would be back to full (±1 µs), or over an
// idle gap.
func (d *diff) advance(k *traceKey) {
	w := k.p.Window / 1000
	interval := max(1, w/k.p.Limit)
	var dt int64
	switch r := d.rng.IntN(100); {
	case r < 36:
	case r < 44:
		dt = 1 + d.rng.Int64N(interval)
	case r < 50:
		dt = 1 + d.rng.Int64N(10)
	case r < 60:
		dt = (floorDiv(k.now, w)+1)*w + d.rng.Int64N(3) - 1 - k.now
		d.stats.boundaryHits++
	case r < 76:
		at := k.last.ResetAfter
		if !k.last.Allowed && k.last.RetryAfter > 0 && r < 70 {
			at = k.last.RetryAfter
		}
		dt = k.lastAt + ceilUS(at) + d.rng.Int64N(3) - 1 - k.now
		d.stats.boundaryHits++
	case r < 86:
		dt = d.rng.Int64N(w + 1)
	case r < 92:
		dt = w + d.rng.Int64N(2*w)
	default:
		dt = d.rng.Int64N(k.p.Capacity(d.a)*interval + 1)
	}
	k.now += max(dt, 0)
}

func (d *diff) pickCost(k *traceKey) int64 {
	capa := k.p.Capacity(d.a)
	switch r := d.rng.IntN(100); {
	case r < 60:
		return 1
	case r < 68:
		return 0
	case r < 82:
		return 1 + d.rng.Int64N(capa)
	case r < 86:
		return capa
	case r < 89:
		return capa + 1 + d.rng.Int64N(3)
	case r < 95:
		return max(k.last.Remaining, 1)
	}
	return k.last.Remaining + 1
}

// change gives k new parameters, syncing the script's state where the
// scripts and the engine keep different state across the change.
func (d *diff) change(k *traceKey) {
	old := k.p
	for k.p == old {
		switch p := d.randParams(); {
		case (d.a == engine.Fixed || d.a == engine.Sliding) && d.rng.IntN(2) == 0:
			k.p.Limit = p.Limit
		case (d.a == engine.Token || d.a == engine.Leaky) && d.rng.IntN(2) == 0:
			k.p = d.sameRate(old)
		default:
			k.p = p
		}
	}
	switch {
	case (d.a == engine.Fixed || d.a == engine.Sliding) && old.Window != k.p.Window,
		(d.a == engine.Token || d.a == engine.Leaky) && old.Window != k.p.Window,
		d.a == engine.Token && old.Capacity(d.a) != k.p.Capacity(d.a),
		d.a == engine.Leaky && k.p.Capacity(d.a) < old.Capacity(d.a),
		(d.a == engine.Token || d.a == engine.Leaky) && !k.charged && capPending(k.st, old, k.p, d.a):
		d.sync(k)
		d.stats.syncChanges++
	default:
		d.stats.changes++
	}
}

// sameRate returns parameters with p's rate written differently (limit and
// window both scaled); the token bucket also keeps its capacity.
func (d *diff) sameRate(p engine.Params) engine.Params {
	f := 2 + d.rng.Int64N(2)
	q := p
	if p.Limit%f == 0 && (p.Window/1000)%f == 0 && (d.rng.IntN(2) == 0 || p.Window*f > 4*3600e9) {
		q.Limit, q.Window = p.Limit/f, p.Window/f
	} else if p.Window*f <= 4*3600e9 {
		q.Limit, q.Window = p.Limit*f, p.Window*f
	}
	switch d.a {
	case engine.Token:
		q.Burst = p.Capacity(d.a)
	case engine.Leaky:
		if d.rng.IntN(2) == 0 {
			q.Burst = 1 + d.rng.Int64N(2*q.Limit+3)
		}
	}
	if q.Validate(d.a) != nil {
		return p
	}
	return q
}

func (d *diff) report() {
	st := d.stats
	d.t.Logf("%s: %d steps compared, %d agreed on every field (%.2f%%), %d within the named bound (largest delta %dns, largest retry-after difference %dns); %d decisions agreed (%.2f%%)",
		d.a, st.steps, st.agreed, 100*float64(st.agreed)/float64(st.steps), st.bounded, st.maxDelta, st.maxRetryDiff,
		st.decided, 100*float64(st.decided)/float64(st.steps))
	if st.bounded > 0 {
		d.t.Logf("%s: of the steps within the bound, %d differ in the decision, %d in remaining, %d in retry-after, %d in reset-after",
			d.a, st.steps-st.decided, st.offRemaining, st.offRetry, st.offReset)
	}
	d.t.Logf("%s: %d allowed, %d denied, %d never, %d with COST 0, %d placed on an edge; %d parameter changes compared as is, %d synced (named difference), %d syncs after a bounded disagreement; %d durations rounded up to the µs",
		d.a, st.allowed, st.denied, st.never, st.zeroCost, st.boundaryHits, st.changes, st.syncChanges, st.syncBounded, st.rounded)
	if st.agreed+st.bounded != st.steps {
		d.t.Errorf("%d steps compared but %d agreed and %d within the bound", st.steps, st.agreed, st.bounded)
	}
	if d.exact && st.bounded > 0 {
		d.t.Errorf("%d steps differed; %s must agree on every step", st.bounded, d.a)
	}
	if st.steps >= 1000 && (st.allowed == 0 || st.denied == 0 || st.never == 0 || st.zeroCost == 0 ||
		st.boundaryHits == 0 || st.changes+st.syncChanges == 0) {
		d.t.Errorf("the trace missed a case it must cover: %+v", st)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
