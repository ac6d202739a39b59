package compat

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/redistest"
	"github.com/rlserver/rlserver/internal/testserver"
)

var sutFlag = flag.String("compat.sut", "rlserver",
	"side b, the server under test: rlserver (in-process) or redis (a second redis-server, to check the harness)")

const (
	// guard is how close to an expiry or a decision boundary a step may
	// not start: closer, the step waits until it has passed on both sides.
	guard = 25 * time.Millisecond
	// resetTol is how far resets (absolute or relative) may differ: the
	// issue's "reset within a second".
	resetTol = time.Second
	// settleTimeout bounds a wait for keys to expire.
	settleTimeout = 10 * time.Second
)

// Side names, for messages.
var sideNames = [2]string{"a (redis-server)", "b (under test)"}

// pair is a redis-server (side 0) and the server under test (side 1), a
// client of each in RESP3 (go-redis's default) and in RESP2, and the
// bookkeeping of one lock-step run.
type pair struct {
	addrs  [2]string
	c      [2]*redis.Client // RESP3
	c2     [2]*redis.Client // RESP2
	step   int
	record []string // the last steps, for a mismatch's message

	checked time.Time    // when ready last read the keys' PTTLs
	called  [2]time.Time // start and end of the current step's calls

	// Figures of the run.
	steps, settleWaits, boundaryWaits, unguarded   int
	maxSpan, maxExposure, maxTTLDiff, maxResetDiff time.Duration
}

// startPair starts both servers for t and connects to them.
func startPair(t *testing.T) *pair {
	t.Helper()
	p := &pair{}
	p.addrs[0] = redistest.Start(t)
	switch *sutFlag {
	case "rlserver":
		p.addrs[1] = testserver.Start(t, testserver.Options{}).Addr
	case "redis":
		p.addrs[1] = redistest.Start(t)
	default:
		t.Fatalf("-compat.sut=%q: want rlserver or redis", *sutFlag)
	}
	for i, addr := range p.addrs {
		p.c[i] = redis.NewClient(&redis.Options{Addr: addr})
		p.c2[i] = redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
		t.Cleanup(func() { p.c[i].Close(); p.c2[i].Close() })
		if err := p.c[i].FlushAll(context.Background()).Err(); err != nil {
			t.Fatalf("FLUSHALL on %s: %v", sideNames[i], err)
		}
	}
	return p
}

// note records what step p.step does.
func (p *pair) note(format string, args ...any) {
	p.record = append(p.record, fmt.Sprintf("step %d: ", p.step)+fmt.Sprintf(format, args...))
	if len(p.record) > 25 {
		p.record = p.record[1:]
	}
}

// fail returns the mismatch of what between a and b, with the seed, the
// step and the steps before it.
func (p *pair) fail(what string, a, b any) error {
	note := ""
	if exp := p.called[1].Sub(p.checked); exp > guard {
		note = fmt.Sprintf("\n(this step ended %v after the expiry check, more than the %v guard: "+
			"an expiry may have fallen inside it)", exp.Round(time.Millisecond), guard)
	}
	return fmt.Errorf("step %d (replay with the seed logged above): %s differs\n  %s %s: %#v\n  %s %s: %#v%s\nlast steps:\n  %s",
		p.step, what, sideNames[0], p.addrs[0], a, sideNames[1], p.addrs[1], b, note,
		strings.Join(p.record, "\n  "))
}

// both runs call on side 0, then at once on side 1, and notes how long
// the two calls took.
func both[T any](p *pair, call func(side int) T) [2]T {
	p.called[0] = time.Now()
	out := [2]T{call(0), call(1)}
	p.called[1] = time.Now()
	p.maxSpan = max(p.maxSpan, p.called[1].Sub(p.called[0]))
	exp := p.called[1].Sub(p.checked)
	p.maxExposure = max(p.maxExposure, exp)
	if exp > guard {
		p.unguarded++
	}
	p.steps++
	return out
}

// ready waits until no key on either side is within guard of expiring (a
// key that is is waited out until it has expired on both) and now is not
// within guard of any instant boundaries returns (it is asked again after
// each wait; nil has none).
func (p *pair) ready(ctx context.Context, boundaries func() ([]time.Time, error)) error {
	deadline := time.Now().Add(settleTimeout)
	waited := false
	for time.Now().Before(deadline) {
		near, err := p.nearExpiry(ctx)
		if err != nil {
			return err
		}
		if near {
			if !waited {
				p.settleWaits++
			}
			waited = true
			time.Sleep(2 * time.Millisecond)
			continue
		}
		var bs []time.Time
		if boundaries != nil {
			if bs, err = boundaries(); err != nil {
				return err
			}
		}
		if wait := awayFrom(time.Now(), bs); wait > 0 {
			p.boundaryWaits++
			time.Sleep(wait)
			continue
		}
		return nil
	}
	return fmt.Errorf("step %d: keys or boundaries never passed within %v", p.step, settleTimeout)
}

// nearExpiry reads every key's PTTL on both sides and reports whether one
// is within guard of expiring; it sets p.checked.
func (p *pair) nearExpiry(ctx context.Context) (bool, error) {
	p.checked = time.Now()
	for i, c := range p.c {
		keys, err := c.Keys(ctx, "*").Result()
		if err != nil {
			return false, fmt.Errorf("KEYS on %s: %w", sideNames[i], err)
		}
		pipe := c.Pipeline()
		cmds := make([]*redis.Cmd, len(keys))
		for j, k := range keys {
			cmds[j] = pipe.Do(ctx, "PTTL", k)
		}
		if _, err := pipe.Exec(ctx); err != nil && len(keys) > 0 {
			return false, fmt.Errorf("PTTL on %s: %w", sideNames[i], err)
		}
		for _, cmd := range cmds {
			if ms, _ := cmd.Int64(); ms >= 0 && ms <= guard.Milliseconds() {
				return true, nil
			}
		}
	}
	return false, nil
}

// awayFrom returns how long to wait from now until now is at least guard
// away from each of bs, or 0 if it is already.
func awayFrom(now time.Time, bs []time.Time) time.Duration {
	var wait time.Duration
	for _, b := range bs {
		if d := now.Sub(b); d > -guard && d < guard {
			wait = max(wait, guard-d+time.Millisecond)
		}
	}
	return wait
}

// stored is a key's value on one side: its type, its items (a string's
// value; a list's elements; a hash's field, value pairs sorted by field; a
// sorted set's member, score pairs in order) and its PTTL in ms.
type stored struct {
	Type  string
	Items []string
	PTTL  int64
}

func dump(ctx context.Context, c *redis.Client, key string) (stored, error) {
	var s stored
	var err error
	if s.Type, err = c.Type(ctx, key).Result(); err != nil {
		return s, err
	}
	switch s.Type {
	case "string":
		var v string
		v, err = c.Get(ctx, key).Result()
		s.Items = []string{v}
	case "list":
		s.Items, err = c.LRange(ctx, key, 0, -1).Result()
	case "hash":
		var m map[string]string
		m, err = c.HGetAll(ctx, key).Result()
		for _, f := range slices.Sorted(maps.Keys(m)) {
			s.Items = append(s.Items, f, m[f])
		}
	case "zset":
		var zs []redis.Z
		zs, err = c.ZRangeWithScores(ctx, key, 0, -1).Result()
		for _, z := range zs {
			s.Items = append(s.Items, z.Member.(string), strconv.FormatFloat(z.Score, 'g', -1, 64))
		}
	}
	if err != nil {
		return s, err
	}
	s.PTTL, err = c.Do(ctx, "PTTL", key).Int64()
	return s, err
}

// clockTol is how far values written from the servers' clocks may differ:
// the longest time between the two sides' calls of a step so far (the
// value was written in one of them) plus 2 ms of rounding.
func (p *pair) clockTol() time.Duration { return p.maxSpan + 2*time.Millisecond }

// compareStored compares key (keyB on side b if not "") on both sides: its
// type and items exactly, except an item that tol gives a tolerance (by
// its field: "" for a string's value, the field for a hash's value,
// "score" for a sorted set's score; nil tol: none), which may differ by
// that as a number; its PTTL by clockTol and the time between the two
// readings.
func (p *pair) compareStored(ctx context.Context, key, keyB string, tol func(field string) float64) error {
	if keyB == "" {
		keyB = key
	}
	start := time.Now()
	var s [2]stored
	for i, k := range [2]string{key, keyB} {
		var err error
		if s[i], err = dump(ctx, p.c[i], k); err != nil {
			return fmt.Errorf("reading %s on %s: %w", k, sideNames[i], err)
		}
	}
	ttlTol := p.clockTol() + time.Since(start)
	if !sameItems(s[0], s[1], tol) {
		return p.fail("stored value of "+key, s[0], s[1])
	}
	a, b := s[0].PTTL, s[1].PTTL
	d := time.Duration(abs(a-b)) * time.Millisecond
	if (a < 0 || b < 0) && a != b || d > ttlTol {
		return p.fail(fmt.Sprintf("PTTL of %s (tolerance %v)", key, ttlTol), a, b)
	}
	p.maxTTLDiff = max(p.maxTTLDiff, d)
	return nil
}

func sameItems(a, b stored, tol func(string) float64) bool {
	if a.Type != b.Type || len(a.Items) != len(b.Items) {
		return false
	}
	for i := range a.Items {
		if a.Items[i] == b.Items[i] {
			continue
		}
		field := ""
		switch {
		case a.Type == "hash" && i%2 == 1:
			field = a.Items[i-1]
		case a.Type == "zset" && i%2 == 1:
			field = "score"
		case a.Type != "string":
			return false
		}
		if tol == nil || !near(a.Items[i], b.Items[i], tol(field)) {
			return false
		}
	}
	return true
}

// near reports whether a and b are numbers at most tol apart.
func near(a, b string, tol float64) bool {
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	return err1 == nil && err2 == nil && math.Abs(x-y) <= tol
}

// compareReset compares two resets within resetTol and notes the
// difference.
func (p *pair) compareReset(what string, a, b time.Duration) error {
	d := a - b
	if d < 0 {
		d = -d
	}
	if d > resetTol {
		return p.fail(what, a, b)
	}
	p.maxResetDiff = max(p.maxResetDiff, d)
	return nil
}

// scriptFlush runs SCRIPT FLUSH on both sides: the libraries' next
// EVALSHA gets NOSCRIPT and they load their scripts again.
func (p *pair) scriptFlush(ctx context.Context) error {
	for i, c := range p.c {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			return fmt.Errorf("SCRIPT FLUSH on %s: %w", sideNames[i], err)
		}
	}
	return nil
}

// stepsFor returns how many steps a randomized test runs: n, or
// RL_COMPAT_STEPS if set.
func stepsFor(t *testing.T, n int) int {
	t.Helper()
	if s := os.Getenv("RL_COMPAT_STEPS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("RL_COMPAT_STEPS=%q: want a positive count", s)
		}
		return v
	}
	return n
}

// choose returns i with probability weights[i]/sum(weights).
func choose(rng *rand.Rand, weights ...int) int {
	sum := 0
	for _, w := range weights {
		sum += w
	}
	n := rng.IntN(sum)
	for i, w := range weights {
		if n < w {
			return i
		}
		n -= w
	}
	return len(weights) - 1
}

// pause sleeps, now and then, up to max, so that windows pass between
// steps.
func pause(rng *rand.Rand, max time.Duration) {
	if rng.IntN(10) < 3 {
		time.Sleep(time.Duration(rng.Int64N(int64(max))))
	}
}

// errText is err's message, "" for nil and redis.Nil.
func errText(err error) string {
	if err == nil || errors.Is(err, redis.Nil) {
		return ""
	}
	return err.Error()
}

// figures is the run's summary for the test log.
func (p *pair) figures() string {
	return fmt.Sprintf("%d calls compared; waits: %d for expiries, %d for boundaries; "+
		"longest step %v, longest from expiry check to step end %v (%d steps past the %v guard); "+
		"largest PTTL difference %v, largest reset difference %v",
		p.steps, p.settleWaits, p.boundaryWaits, p.maxSpan.Round(time.Microsecond),
		p.maxExposure.Round(time.Microsecond), p.unguarded, guard, p.maxTTLDiff, p.maxResetDiff)
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
