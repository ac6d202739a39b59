package shards

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/rlserver/rlserver/engine"
)

// logView is what the store holds for a log key: its entries, whether
// they have spilled to a ring, and the length of the record's log part.
type logView struct {
	entries  []engine.Entry
	present  bool
	spilled  bool
	logBytes int
}

// viewLog decodes key's record in s without changing anything.
func viewLog(s *Store, key []byte) logView {
	sh := s.shardFor(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i := sh.tab.find(key, tagOf(xxhash.Sum64(key)))
	if i < 0 {
		return logView{}
	}
	var e entry
	sh.tab.decode(i, &e)
	rec := sh.tab.record(uint32(sh.tab.slots[i]))
	pos := logPart(rec)
	return logView{entries: logEntries(e.st.Log), present: true, spilled: e.spilled,
		logBytes: logPartLen(rec[pos:])}
}

// liveEntries returns the entries of l inside the window (now-w, now].
func liveEntries(l []engine.Entry, now, w int64) []engine.Entry {
	var out []engine.Entry
	for _, e := range l {
		if e.At > now-w {
			out = append(out, e)
		}
	}
	return out
}

// logStep is one row of a time-stepped log table: advance the clock,
// charge cost, expect the decision, and expect the key's record to hold
// entries entries (0: no record), spilled or inline, with a log part of
// logBytes bytes (0: not checked).
type logStep struct {
	advance   int64
	cost      int64
	allowed   bool
	remaining int64
	entries   int
	spilled   bool
	logBytes  int
}

// runLogSteps runs steps on one key of a Store and on a plain engine
// State, and requires the same results, the expected ones, and the same
// entries, exactly, in the store as in the engine.
func runLogSteps(t *testing.T, p engine.Params, steps []logStep) {
	t.Helper()
	s := New(1)
	key := []byte("k")
	var st engine.State
	now := int64(1_700_000_000e9)
	for i, c := range steps {
		now += c.advance
		got, err := s.Check(key, engine.Log, p, c.cost, now)
		if err != nil {
			t.Fatal(err)
		}
		want := engine.Peek(engine.Log, &st, p, now) // a peek changes nothing
		if c.cost > 0 {
			want = engine.Check(engine.Log, &st, p, c.cost, now)
		}
		if got != want || got.Allowed != c.allowed || got.Remaining != c.remaining {
			t.Fatalf("step %d: store %+v, engine %+v, want allowed %v remaining %d", i, got, want, c.allowed, c.remaining)
		}
		v := viewLog(s, key)
		if len(v.entries) != c.entries || v.present != (c.entries > 0) || v.spilled != c.spilled {
			t.Fatalf("step %d: %d entries (present %v, spilled %v), want %d (spilled %v)", i, len(v.entries), v.present, v.spilled, c.entries, c.spilled)
		}
		if c.logBytes != 0 && v.logBytes != c.logBytes {
			t.Fatalf("step %d: log part of %d bytes, want %d", i, v.logBytes, c.logBytes)
		}
		if wantLog := logEntries(st.Log); len(wantLog) > 0 && !reflect.DeepEqual(v.entries, wantLog) {
			t.Fatalf("step %d: store holds %v, engine %v", i, v.entries, wantLog)
		}
	}
}

func TestLogInlineSteps(t *testing.T) {
	const sec = int64(1e9)
	p10 := engine.Params{Limit: 10, Window: 10 * sec}
	// Crossing spillAt up, then unspillAt down as the window moves on: 40
	// entries a second apart, then a denied check (which trims; a peek
	// changes nothing) when all but unspillAt+1 have left the window, and
	// one a second later.
	big := engine.Params{Limit: 100, Window: 100 * sec}
	var cross []logStep
	for i := 1; i <= 40; i++ {
		cross = append(cross, logStep{sec, 1, true, int64(100 - i), i, i > spillAt, 0})
	}
	u := int64(unspillAt)
	cross = append(cross,
		logStep{(99 - u) * sec, 0, true, 100 - u - 1, 40, true, 0},  // a peek trims nothing
		logStep{0, 101, false, 100 - u - 1, unspillAt + 1, true, 0}, // the window has moved past all but unspillAt+1
		logStep{sec, 101, false, 100 - u, unspillAt, false, 0},      // back inline at unspillAt
		logStep{0, 1, true, 100 - u - 1, unspillAt + 1, false, 0},   // and stays there
	)
	// Gaps of every width up to MaxWindow: all gap words take the width
	// of the longest. The log part is the count, the first cost, the width
	// and the words.
	huge := []logStep{{0, 1, true, 9, 1, false, 2}}
	for i, gap := range []int64{1, 1 << 7, 1 << 14, 1 << 21, 1 << 28, 1 << 35, 1 << 42, 1 << 49, 1 << 53} {
		w := (bits.Len64(uint64(gap)<<1|1) + 7) / 8
		huge = append(huge, logStep{gap, 1, true, int64(8 - i), i + 2, false, 3 + (i+1)*w})
	}
	for _, c := range []struct {
		name  string
		p     engine.Params
		steps []logStep
	}{
		{"first entry", p10, []logStep{
			{0, 1, true, 9, 1, false, 2}, // count, cost 1
		}},
		{"first entry costs more", p10, []logStep{
			{0, 7, true, 3, 1, false, 2},
			{sec, 1, true, 2, 2, false, 1 + 1 + 1 + 4}, // count, cost 7, width 4, gap word of 1 s
			{sec, 2, true, 0, 3, false, 1 + 1 + 1 + 4 + 4 + 1},
		}},
		{"same instant merges", p10, []logStep{
			{0, 1, true, 9, 1, false, 2},
			{0, 0, true, 9, 1, false, 2},
			{0, 3, true, 6, 1, false, 2},
			{0, 7, false, 6, 1, false, 2}, // denied: nothing merged
			{1, 1, true, 5, 2, false, 1 + 1 + 1 + 1},
			{0, 1, true, 4, 2, false, 1 + 1 + 1 + 1 + 1}, // the last entry's cost is 2 now
		}},
		{"trimming every entry drops the key", p10, []logStep{
			{0, 1, true, 9, 1, false, 0},
			{sec, 2, true, 7, 2, false, 0},
			{20 * sec, 0, true, 10, 2, false, 0}, // a peek leaves expired state to the sweep
			{0, 11, false, 10, 0, false, 0},      // a denied check drops it
			{0, 1, true, 9, 1, false, 2},
			{10 * sec, 1, true, 9, 1, false, 2}, // the old entry leaves as the new one comes
		}},
		{"crossing the threshold up and down", big, cross},
		{"huge gaps", engine.Params{Limit: 10, Window: engine.MaxWindow}, huge},
		{"cost of 2^48", engine.Params{Limit: engine.MaxLimit, Window: 10 * sec}, []logStep{
			{0, engine.MaxLimit, true, 0, 1, false, 1 + 7},
			{1, 1, false, 0, 1, false, 1 + 7},
			{10 * sec, engine.MaxLimit - 1, true, 1, 1, false, 1 + 7},
			{0, 1, true, 0, 1, false, 1 + 7}, // merged into 2^48
		}},
	} {
		t.Run(c.name, func(t *testing.T) { runLogSteps(t, c.p, c.steps) })
	}
}

// TestLogMatchesEngine runs random log checks on a Store and on plain
// engine States side by side and requires identical results at every
// step: a few keys (and two token keys) in two shards; random costs,
// including 0 and up to 2^48; the same instant, short steps, idle
// stretches past the window and huge gaps; limits and windows that change
// under a key; multi-key checks (CheckAll) of keys often in one shard;
// Resets, Sweeps and Prefetches. Logs cross spillAt and unspillAt both
// ways, which the test requires. It logs its seed; replay a failure with
// -seed or RL_SEED.
func TestLogMatchesEngine(t *testing.T) {
	rng := newRand(t)
	var ups, downs int
	for run := 0; run < 10; run++ {
		u, d := logDifferential(t, rng, 6000)
		ups, downs = ups+u, downs+d
	}
	t.Logf("%d spills, %d returns inline", ups, downs)
	if ups == 0 || downs == 0 {
		t.Fatalf("%d spills and %d returns inline: the threshold was not crossed both ways", ups, downs)
	}
}

type diffKey struct {
	key  []byte
	algo engine.Algo
	p    engine.Params
	st   engine.State
	// exp is ExpiresAt of st under the parameters it was last written
	// with: the store drops the key from then on. Until the parameters
	// change that is invisible; after, the model must drop it too.
	exp int64
	// spilled is the key's record's last seen form, for counting moves.
	spilled bool
}

var diffWindows = []int64{engine.MinWindow, 7e6, 1e9, 10e9, 60e9, 3600e9, engine.MaxWindow}

func diffParams(rng *rand.Rand) engine.Params {
	p := engine.Params{Window: diffWindows[rng.IntN(len(diffWindows))]}
	if rng.IntN(4) == 0 {
		p.Window = engine.MinWindow + rng.Int64N(100e9)
	}
	switch n := rng.IntN(10); {
	case n < 3:
		p.Limit = 1 + rng.Int64N(5)
	case n < 9:
		p.Limit = 10 + rng.Int64N(90) // enough to cross spillAt
	default:
		p.Limit = engine.MaxLimit
	}
	return p
}

func diffCost(rng *rand.Rand, p engine.Params) int64 {
	switch n := rng.IntN(100); {
	case n < 10:
		return 0
	case n < 88:
		return 1
	case n < 96:
		return rng.Int64N(min(p.Limit+3, engine.MaxLimit+1))
	case n < 98:
		return engine.MaxLimit
	}
	return 1 + rng.Int64N(engine.MaxLimit)
}

// diffGap returns a pause before the next operation: with several keys
// sharing the clock, mostly a fraction of the key's mean spacing W/L, so
// that its log fills up to its limit; rarely the window or more, which
// empties every key's log.
func diffGap(rng *rand.Rand, p engine.Params) int64 {
	m := max(p.Window/p.Limit/8, 1)
	switch n := rng.IntN(1000); {
	case n < 250:
		return 0
	case n < 850:
		return rng.Int64N(2 * m)
	case n < 950:
		return rng.Int64N(m/8 + 1)
	case n < 990:
		return rng.Int64N(p.Window / 8)
	case n < 997:
		return rng.Int64N(p.Window)
	case n < 999:
		return rng.Int64N(3 * p.Window)
	}
	return rng.Int64N(1 << 50)
}

// logDifferential runs steps random operations and returns how many times
// a log moved to a ring and back inline.
func logDifferential(t *testing.T, rng *rand.Rand, steps int) (ups, downs int) {
	t.Helper()
	s := New(2)
	var keys []*diffKey
	for i := 0; i < 6; i++ {
		keys = append(keys, &diffKey{key: []byte(fmt.Sprint("log", i)), algo: engine.Log, p: diffParams(rng)})
	}
	for i := 0; i < 2; i++ {
		p := engine.Params{Limit: 1 + rng.Int64N(50), Window: 1e9 + rng.Int64N(60e9)}
		keys = append(keys, &diffKey{key: []byte(fmt.Sprint("tok", i)), algo: engine.Token, p: p})
	}
	now := int64(1_700_000_000e9) + rng.Int64N(1e18)
	for step := 0; step < steps; step++ {
		k := keys[rng.IntN(len(keys))]
		at := fmt.Sprintf("step %d, %s %+v", step, k.key, k.p)
		if k.algo == engine.Log && rng.IntN(200) == 0 {
			k.p = diffParams(rng)
		}
		now += diffGap(rng, k.p)
		for _, k := range keys {
			if k.exp <= now {
				k.st, k.exp = engine.State{}, 0
			}
		}
		switch n := rng.IntN(100); {
		case n < 80:
			cost := diffCost(rng, k.p)
			got, err := s.Check(k.key, k.algo, k.p, cost, now)
			want := k.check(cost, now)
			if err != nil || got != want {
				t.Fatalf("%s: cost %d at %d: store %+v (%v), engine %+v", at, cost, now, got, err, want)
			}
		case n < 92:
			diffCheckAll(t, rng, s, keys, now, at)
		case n < 95:
			s.Reset(k.key, now)
			k.st, k.exp = engine.State{}, 0
		case n < 97:
			s.Sweep(now, 1+rng.IntN(8))
		default:
			batch := [][]byte{k.key, keys[rng.IntN(len(keys))].key, []byte("absent")}
			s.Prefetch(batch)
		}
		for _, k := range keys {
			if k.algo != engine.Log || k.exp <= now {
				continue
			}
			v := viewLog(s, k.key)
			want := liveEntries(logEntries(k.st.Log), now, k.p.Window)
			if got := liveEntries(v.entries, now, k.p.Window); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: %s holds %v, engine %v", at, k.key, got, want)
			}
			if !v.present {
				k.spilled = false
			} else if v.spilled != k.spilled {
				if v.spilled {
					ups++
				} else {
					downs++
				}
				k.spilled = v.spilled
			}
		}
		if step%50 == 0 {
			for i := range s.shards {
				checkLayout(t, &s.shards[i].tab, at)
			}
		}
	}
	return ups, downs
}

// diffCheckAll runs a CheckAll of two or three distinct keys and checks it
// against the engine: the check passes iff every op alone would, and then
// each is charged; otherwise each reports its denial or its allowance.
func diffCheckAll(t *testing.T, rng *rand.Rand, s *Store, keys []*diffKey, now int64, at string) {
	t.Helper()
	perm := rng.Perm(len(keys))[:2+rng.IntN(2)]
	cost := diffCost(rng, keys[perm[0]].p)
	ops := make([]Op, len(perm))
	for i, j := range perm {
		ops[i] = Op{Key: keys[j].key, Algo: keys[j].algo, Params: keys[j].p}
	}
	allowed, err := s.CheckAll(ops, cost, now)
	if err != nil {
		t.Fatalf("%s: CheckAll: %v", at, err)
	}
	pass := make([]bool, len(perm))
	wantAllowed := true
	for i, j := range perm {
		c := cloneState(&keys[j].st)
		pass[i] = engine.Check(keys[j].algo, &c, keys[j].p, cost, now).Allowed
		wantAllowed = wantAllowed && pass[i]
	}
	if allowed != wantAllowed {
		t.Fatalf("%s: CheckAll cost %d allowed %v, want %v", at, cost, allowed, wantAllowed)
	}
	for i, j := range perm {
		k := keys[j]
		var want engine.Result
		switch {
		case wantAllowed:
			want = k.check(cost, now)
		case pass[i]:
			c := cloneState(&k.st)
			want = engine.Check(k.algo, &c, k.p, 0, now)
		default:
			c := cloneState(&k.st)
			want = engine.Check(k.algo, &c, k.p, cost, now)
		}
		if ops[i].Result != want {
			t.Fatalf("%s: CheckAll cost %d, op %s: %+v, engine %+v", at, cost, k.key, ops[i].Result, want)
		}
	}
}

// check charges cost to the engine's model of k at now, as the store
// does: a check of cost 0 is a peek and changes nothing.
func (k *diffKey) check(cost, now int64) engine.Result {
	if cost == 0 {
		return engine.Peek(k.algo, &k.st, k.p, now)
	}
	r := engine.Check(k.algo, &k.st, k.p, cost, now)
	k.exp = engine.ExpiresAt(k.algo, &k.st, k.p)
	return r
}

// cloneState returns a deep copy of st.
func cloneState(st *engine.State) engine.State {
	c := *st
	if st.Log != nil {
		c.Log = &engine.Ring{}
		c.Log.Load(logEntries(st.Log))
	}
	return c
}

// TestLogCheckDoesNotAllocate: a check of a log kept inline allocates
// nothing, and neither does a new key's first check once its shard's
// pages, index and scratch log exist.
func TestLogCheckDoesNotAllocate(t *testing.T) {
	s := New(1)
	p := engine.Params{Limit: 100, Window: 1e9}
	now := int64(1_700_000_000e9)
	steady := []byte("steady")
	for i := 0; i < 50; i++ { // ten entries in the window
		now += 1e8
		s.Check(steady, engine.Log, p, 1, now)
	}
	if v := viewLog(s, steady); v.spilled || len(v.entries) != 10 {
		t.Fatalf("steady key: %d entries, spilled %v", len(v.entries), v.spilled)
	}
	if n := testing.AllocsPerRun(1000, func() {
		now += 1e8
		s.Check(steady, engine.Log, p, 1, now)
	}); n != 0 {
		t.Errorf("steady inline log: %v allocations per check", n)
	}
	// New keys whose records fit in free space and whose slots fit in the
	// index: 200 keys stay, 100 come and go.
	for i := 0; i < 200; i++ {
		s.Check([]byte(fmt.Sprintf("keep:%03d", i)), engine.Log, p, 1, now)
	}
	fresh := make([][]byte, 100)
	for i := range fresh {
		fresh[i] = []byte(fmt.Sprintf("new:%04d", i))
	}
	cycle := func() {
		for _, k := range fresh {
			s.Check(k, engine.Log, p, 1, now)
		}
		for _, k := range fresh {
			s.Reset(k, now)
		}
	}
	cycle()
	if n := testing.AllocsPerRun(10, cycle); n != 0 {
		t.Errorf("100 new log keys: %v allocations", n)
	}
}

// TestCheckAllTwoLogsInOneShard: two log keys of one shard, one inline and
// one spilled, share the shard's scratch ring in CheckAll; neither corrupts
// the other, whether the check is allowed or denied. Every row runs at one
// instant, so charges merge into each key's newest entry.
func TestCheckAllTwoLogsInOneShard(t *testing.T) {
	s := New(1)
	p := engine.Params{Limit: 50, Window: 100e9}
	now := int64(1_700_000_000e9)
	short, long := &diffKey{key: []byte("short"), algo: engine.Log, p: p}, &diffKey{key: []byte("long"), algo: engine.Log, p: p}
	for i := 0; i < 40; i++ {
		now += 1e9
		for _, k := range []*diffKey{short, long} {
			if k == long || i < 3 {
				s.Check(k.key, engine.Log, p, 1, now)
				engine.Check(engine.Log, &k.st, p, 1, now)
			}
		}
	}
	for i, c := range []struct {
		both                bool
		cost                int64
		allowed             bool
		shortLeft, longLeft int64
	}{
		{true, 1, true, 46, 9},
		{true, 10, false, 46, 9}, // long denies: nothing charged
		{true, 9, true, 37, 0},
		{true, 0, true, 37, 0}, // peeks of a full key pass
		{true, 1, false, 37, 0},
		{false, 20, true, 17, 0},
		{false, 18, false, 17, 0},
		{false, 17, true, 0, 0},
		{true, 0, true, 0, 0},
	} {
		ks := []*diffKey{short}
		if c.both {
			ks = []*diffKey{long, short}
		}
		ops := make([]Op, len(ks))
		for j, k := range ks {
			ops[j] = Op{Key: k.key, Algo: engine.Log, Params: p}
		}
		allowed, err := s.CheckAll(ops, c.cost, now)
		if err != nil || allowed != c.allowed {
			t.Fatalf("row %d: allowed %v (%v), want %v", i, allowed, err, c.allowed)
		}
		if allowed {
			for _, k := range ks {
				k.check(c.cost, now)
			}
		}
		for _, k := range []*diffKey{short, long} {
			v := viewLog(s, k.key)
			if want := logEntries(k.st.Log); !reflect.DeepEqual(v.entries, want) || v.spilled != (k == long) {
				t.Fatalf("row %d: %s holds %v (spilled %v), want %v", i, k.key, v.entries, v.spilled, want)
			}
		}
		if r, _ := s.Check(short.key, engine.Log, p, 0, now); r.Remaining != c.shortLeft {
			t.Fatalf("row %d: short has %d left, want %d", i, r.Remaining, c.shortLeft)
		}
		if r, _ := s.Check(long.key, engine.Log, p, 0, now); r.Remaining != c.longLeft {
			t.Fatalf("row %d: long has %d left, want %d", i, r.Remaining, c.longLeft)
		}
	}
}
