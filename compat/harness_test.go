package compat

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testseed"
)

// TestHarnessSeesDifferences checks that the lock-step harness can fail:
// every driver, run with side b's limits one larger than side a's, must
// report a difference within a few dozen steps, on any server pair.
func TestHarnessSeesDifferences(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	seed := testseed.Rand(t).Uint64()
	const steps = 60
	goDrivers := []struct {
		name  string
		drive func(p *pair, rng *rand.Rand) error
	}{
		{"redis_rate", func(p *pair, rng *rand.Rand) error { return driveRedisRate(ctx, p, rng, steps, true) }},
		{"ulule", func(p *pair, rng *rand.Rand) error { return driveUlule(ctx, p, rng, steps, true) }},
		{"sliding_log", func(p *pair, rng *rand.Rand) error {
			return driveHand(ctx, p, rng, slidingLog(readScript(t, "sliding_log.lua"), true), steps, true)
		}},
		{"fixed_window", func(p *pair, rng *rand.Rand) error {
			return driveHand(ctx, p, rng, fixedWindow(readScript(t, "fixed_window.lua")), steps, true)
		}},
		{"token_bucket", func(p *pair, rng *rand.Rand) error {
			return driveHand(ctx, p, rng, tokenBucket(readScript(t, "token_bucket.lua"), false), steps, true)
		}},
	}
	p := startPair(t)
	for _, d := range goDrivers {
		t.Run(d.name, func(t *testing.T) {
			flushAll(t, p)
			err := d.drive(p, rand.New(rand.NewPCG(seed, 1)))
			if err == nil || !strings.Contains(err.Error(), "differs") {
				t.Fatalf("with different limits on the two sides the driver reported %v", err)
			}
			t.Logf("as it must: %.200s", err)
		})
	}
	for _, driver := range []string{"limits_lockstep.py", "flask_lockstep.py"} {
		t.Run(driver, func(t *testing.T) {
			flushAll(t, p)
			out, ok := runDriver(t, p, driver, seed, steps, true)
			if ok || !strings.HasPrefix(out, "MISMATCH") {
				t.Fatalf("with different limits on the two sides %s reported:\n%s", driver, out)
			}
			t.Logf("as it must: %.200s", out)
		})
	}
}

func flushAll(t *testing.T, p *pair) {
	t.Helper()
	for _, c := range p.c {
		if err := c.FlushAll(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCompareStored checks the stored-value comparison on keys written
// differently on the two sides: a value, a type, a TTL too far apart, a
// number within and beyond its tolerance.
func TestCompareStored(t *testing.T) {
	ctx := context.Background()
	p := startPair(t)
	for _, tc := range []struct {
		name   string
		write  [2][][]any // commands for side a and side b
		tol    float64
		differ bool
	}{
		{"same string", [2][][]any{{{"SET", "k", "1"}}, {{"SET", "k", "1"}}}, 0, false},
		{"other string", [2][][]any{{{"SET", "k", "1"}}, {{"SET", "k", "2"}}}, 0, true},
		{"missing on b", [2][][]any{{{"SET", "k", "1"}}, {}}, 0, true},
		{"other type", [2][][]any{{{"SET", "k", "1"}}, {{"RPUSH", "k", "1"}}}, 0, true},
		{"list order", [2][][]any{{{"RPUSH", "k", "1", "2"}}, {{"RPUSH", "k", "2", "1"}}}, 0, true},
		{"hash value", [2][][]any{{{"HSET", "k", "f", "1"}}, {{"HSET", "k", "f", "1.5"}}}, 0, true},
		{"hash value within", [2][][]any{{{"HSET", "k", "f", "1"}}, {{"HSET", "k", "f", "1.5"}}}, 0.5, false},
		{"hash value beyond", [2][][]any{{{"HSET", "k", "f", "1"}}, {{"HSET", "k", "f", "1.5"}}}, 0.4, true},
		{"hash field", [2][][]any{{{"HSET", "k", "f", "1"}}, {{"HSET", "k", "g", "1"}}}, 1, true},
		{"zset member", [2][][]any{{{"ZADD", "k", "1", "a"}}, {{"ZADD", "k", "1", "b"}}}, 1, true},
		{"zset score within", [2][][]any{{{"ZADD", "k", "1", "a"}}, {{"ZADD", "k", "2", "a"}}}, 1, false},
		{"zset order within", [2][][]any{{{"ZADD", "k", "1", "a", "1.5", "b"}}, {{"ZADD", "k", "1.5", "a", "1", "b"}}}, 1, false},
		{"zset order exact", [2][][]any{{{"ZADD", "k", "1", "a", "1", "b"}}, {{"ZADD", "k", "1", "a", "0.5", "b"}}}, 0, true},
		{"TTL on a only", [2][][]any{{{"SET", "k", "1", "PX", "5000"}}, {{"SET", "k", "1"}}}, 0, true},
		{"TTLs apart", [2][][]any{{{"SET", "k", "1", "PX", "5000"}}, {{"SET", "k", "1", "PX", "4500"}}}, 0, true},
		{"TTLs alike", [2][][]any{{{"SET", "k", "1", "PX", "5000"}}, {{"SET", "k", "1", "PX", "5000"}}}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flushAll(t, p)
			start := time.Now()
			for i, cmds := range tc.write {
				for _, cmd := range cmds {
					if err := p.c[i].Do(ctx, cmd...).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			// The two sides were written one after the other, as a step's
			// two calls are: their span counts in the PTTL's tolerance as
			// a step's does (clockTol). Unaccounted, a busy machine's gap
			// between the two SETs failed "TTLs alike" (tolerance 2.41 ms).
			p.maxSpan = max(p.maxSpan, time.Since(start))
			err := p.compareStored(ctx, "k", "", func(string) float64 { return tc.tol })
			if (err != nil) != tc.differ {
				t.Fatalf("compareStored = %v, want a difference: %v", err, tc.differ)
			}
		})
	}
}

// TestAwayFrom checks the boundary guard's waits.
func TestAwayFrom(t *testing.T) {
	now := time.Unix(1000, 0)
	ms := time.Millisecond
	for _, tc := range []struct {
		bs   []time.Duration // boundaries relative to now
		want time.Duration
	}{
		{nil, 0},
		{[]time.Duration{guard, -guard}, 0},
		{[]time.Duration{10 * ms}, guard + 10*ms + ms},
		{[]time.Duration{-10 * ms}, guard - 10*ms + ms},
		{[]time.Duration{0}, guard + ms},
		{[]time.Duration{-10 * ms, 20 * ms, time.Second}, guard + 20*ms + ms},
	} {
		var bs []time.Time
		for _, d := range tc.bs {
			bs = append(bs, now.Add(d))
		}
		if got := awayFrom(now, bs); got != tc.want {
			t.Errorf("awayFrom(%v) = %v, want %v", tc.bs, got, tc.want)
		}
	}
}

// TestGridNear checks the grid of GCRA boundaries around now.
func TestGridNear(t *testing.T) {
	now := time.Unix(100, 300_000_000) // 100.3 s
	for _, tc := range []struct {
		origin, step float64
		upTo         bool
		want         []float64
	}{
		{100, 0.25, false, []float64{100.25, 100.5}},
		{101, 0.25, true, []float64{100.25, 100.5}},
		{100.5, 0.25, true, []float64{100.25, 100.5}},
		{100.25, 0.25, true, []float64{100.25}},
		{99, 1, true, nil},
	} {
		var got []float64
		for _, b := range gridNear(now, tc.origin, tc.step, tc.upTo) {
			got = append(got, float64(b.UnixNano())/1e9)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("gridNear(%v, %v, %v) = %v, want %v", tc.origin, tc.step, tc.upTo, got, tc.want)
		}
		for i := range got {
			if d := got[i] - tc.want[i]; d > 1e-6 || d < -1e-6 {
				t.Fatalf("gridNear(%v, %v, %v) = %v, want %v", tc.origin, tc.step, tc.upTo, got, tc.want)
			}
		}
	}
}

// TestTaintedSteps checks that a step ending past the deadline ready set
// is tainted, that resync flushes both sides, and that too many tainted
// steps fail the run.
func TestTaintedSteps(t *testing.T) {
	ctx := context.Background()
	p := startPair(t)
	for _, c := range p.c {
		if err := c.Set(ctx, "k", "1", 20*time.Millisecond).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.ready(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for i, c := range p.c { // ready waits out a key about to expire
		if ks := c.Keys(ctx, "*").Val(); len(ks) != 0 {
			t.Fatalf("after ready %s holds %q", sideNames[i], ks)
		}
	}
	if d := p.deadline.Sub(p.checked); d < time.Hour-time.Second {
		t.Fatalf("with no keys, the deadline is %v after the check, want an hour", d)
	}
	both(p, func(int) int { return 0 })
	if p.tainted {
		t.Fatal("a step well before the deadline is tainted")
	}
	p.deadline = time.Now().Add(time.Millisecond) // a boundary falls inside the next step
	both(p, func(int) int { time.Sleep(2 * time.Millisecond); return 0 })
	if !p.tainted {
		t.Fatal("a step past the deadline is not tainted")
	}
	for _, c := range p.c {
		c.Set(ctx, "k", "1", 0)
	}
	if err := p.resync(ctx, 100); err != nil {
		t.Fatal(err)
	}
	for i, c := range p.c {
		if ks := c.Keys(ctx, "*").Val(); len(ks) != 0 {
			t.Fatalf("after resync %s holds %q", sideNames[i], ks)
		}
	}
	var err error
	for range 30 {
		if err = p.resync(ctx, 100); err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "too slow") {
		t.Fatalf("30 tainted steps of 100: %v, want the run failed", err)
	}
}
