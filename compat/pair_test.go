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
	// deadline is the first instant after ready at which a key expires
	// or a decision boundary falls; a step that ends later is tainted:
	// the two sides may legitimately differ, so it is not compared.
	deadline time.Time
	expiry   time.Time // the first expiry nearExpiry saw
	tainted  bool
	calls    int // both's calls in this step

	// Figures of the run.
	steps, settleWaits, boundaryWaits, skipped     int
	errorsAlike                                    int            // calls both sides failed alike
	answers                                        map[string]int // what the compared calls decided
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
		info, err := p.c[i].Info(context.Background(), "server").Result()
		if err != nil {
			t.Fatalf("INFO on %s: %v", sideNames[i], err)
		}
		if isRL := strings.Contains(info, "rlserver_version:"); isRL != (i == 1 && *sutFlag == "rlserver") {
			t.Fatalf("%s at %s is not the server it should be: INFO server says\n%s", sideNames[i], addr, info)
		}
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
	return fmt.Errorf("step %d (replay with the seed logged above): %s differs\n  %s %s: %#v\n  %s %s: %#v\nlast steps:\n  %s",
		p.step, what, sideNames[0], p.addrs[0], a, sideNames[1], p.addrs[1], b,
		strings.Join(p.record, "\n  "))
}

// both runs call on side 0, then at once on side 1, notes how long the
// two calls took, and taints the step if they ended past the deadline.
func both[T any](p *pair, call func(side int) T) [2]T {
	p.called[0] = time.Now()
	out := [2]T{call(0), call(1)}
	p.called[1] = time.Now()
	p.maxSpan = max(p.maxSpan, p.called[1].Sub(p.called[0]))
	p.maxExposure = max(p.maxExposure, p.called[1].Sub(p.checked))
	if !p.called[1].Add(2 * time.Millisecond).Before(p.deadline) {
		p.tainted = true
	}
	p.steps++
	p.calls++
	return out
}

// resync ends a tainted step: its results are not compared, and both
// sides start again from no keys (their states may legitimately differ
// from here). Too many of them fail the run: the machine was too slow to
// compare anything.
func (p *pair) resync(ctx context.Context, steps int) error {
	p.skipped++
	p.steps -= p.calls
	p.note("tainted (it ended %v after the keys were read, past an expiry or boundary): not compared; FLUSHALL",
		p.called[1].Sub(p.checked).Round(time.Millisecond))
	if p.skipped > steps/4+2 {
		return fmt.Errorf("step %d: %d steps of %d ran past an expiry or a decision boundary that was "+
			"more than %v away when they began: the machine is too slow to compare the servers\nlast steps:\n  %s",
			p.step, p.skipped, p.step+1, guard, strings.Join(p.record, "\n  "))
	}
	for i, c := range p.c {
		if err := c.FlushAll(ctx).Err(); err != nil {
			return fmt.Errorf("FLUSHALL on %s: %w", sideNames[i], err)
		}
	}
	return nil
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
		now := time.Now()
		if wait := awayFrom(now, bs); wait > 0 {
			p.boundaryWaits++
			time.Sleep(wait)
			continue
		}
		p.deadline, p.tainted, p.calls = p.expiry, false, 0
		for _, b := range bs {
			if b.After(now) && b.Before(p.deadline) {
				p.deadline = b
			}
		}
		return nil
	}
	return fmt.Errorf("step %d: keys or boundaries never passed within %v", p.step, settleTimeout)
}

// nearExpiry reads every key's PTTL on both sides and reports whether one
// is within guard of expiring; it sets p.checked, and p.expiry to the
// first instant a key expires.
func (p *pair) nearExpiry(ctx context.Context) (bool, error) {
	p.checked = time.Now()
	p.expiry = p.checked.Add(time.Hour)
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
			ms, _ := cmd.Int64()
			if ms >= 0 && ms <= guard.Milliseconds() {
				return true, nil
			}
			if at := p.checked.Add(time.Duration(ms) * time.Millisecond); ms >= 0 && at.Before(p.expiry) {
				p.expiry = at
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

// dump reads key on one side, in one MULTI/EXEC so that an expiry cannot
// fall between the readings.
func dump(ctx context.Context, c *redis.Client, key string) (stored, error) {
	for {
		typ, err := c.Type(ctx, key).Result()
		if err != nil {
			return stored{}, err
		}
		var inner *redis.StatusCmd
		var read redis.Cmder
		var pttl *redis.Cmd
		_, err = c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			inner = pipe.Type(ctx, key)
			switch typ {
			case "string":
				read = pipe.Get(ctx, key)
			case "list":
				read = pipe.LRange(ctx, key, 0, -1)
			case "hash":
				read = pipe.HGetAll(ctx, key)
			case "zset":
				read = pipe.ZRangeWithScores(ctx, key, 0, -1)
			}
			pttl = pipe.Do(ctx, "PTTL", key)
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) { // nil: GET of a key that expired since TYPE
			return stored{}, err
		}
		if inner.Val() != typ {
			continue // it changed (expired) in between
		}
		return stored{Type: typ, Items: items(read), PTTL: pttl.Val().(int64)}, nil
	}
}

// items returns what read read as stored's items.
func items(read redis.Cmder) []string {
	switch r := read.(type) {
	case *redis.StringCmd:
		return []string{r.Val()}
	case *redis.StringSliceCmd:
		return r.Val()
	case *redis.MapStringStringCmd:
		var out []string
		for _, f := range slices.Sorted(maps.Keys(r.Val())) {
			out = append(out, f, r.Val()[f])
		}
		return out
	case *redis.ZSliceCmd:
		var out []string
		for _, z := range r.Val() {
			out = append(out, z.Member.(string), strconv.FormatFloat(z.Score, 'g', -1, 64))
		}
		return out
	}
	return nil
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
	s, err := p.dumpBoth(ctx, key, keyB)
	if err != nil {
		return err
	}
	ttlTol := p.clockTol() + time.Since(start)
	if gone := max(s[0].PTTL, s[1].PTTL); (s[0].PTTL == -2) != (s[1].PTTL == -2) &&
		gone >= 0 && time.Duration(gone)*time.Millisecond <= ttlTol {
		// Read while it expired: gone on one side, about to go on the
		// other. Wait it out and read again.
		time.Sleep(time.Duration(gone+2) * time.Millisecond)
		if s, err = p.dumpBoth(ctx, key, keyB); err != nil {
			return err
		}
	}
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

// dumpBoth reads key on side a and keyB on side b.
func (p *pair) dumpBoth(ctx context.Context, key, keyB string) ([2]stored, error) {
	var s [2]stored
	for i, k := range [2]string{key, keyB} {
		var err error
		if s[i], err = dump(ctx, p.c[i], k); err != nil {
			return s, fmt.Errorf("reading %s on %s: %w", k, sideNames[i], err)
		}
	}
	return s, nil
}

func sameItems(a, b stored, tol func(string) float64) bool {
	if a.Type != b.Type || len(a.Items) != len(b.Items) {
		return false
	}
	if a.Type == "zset" && tol != nil {
		// Scores written from two clocks may order members apart by a
		// hair: compare them by member.
		a.Items, b.Items = byMember(a.Items), byMember(b.Items)
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

// byMember returns a sorted set's member, score pairs sorted by member.
func byMember(items []string) []string {
	pairs := make([][2]string, 0, len(items)/2)
	for i := 0; i+1 < len(items); i += 2 {
		pairs = append(pairs, [2]string{items[i], items[i+1]})
	}
	slices.SortFunc(pairs, func(x, y [2]string) int { return strings.Compare(x[0], y[0]) })
	out := make([]string, 0, len(items))
	for _, p := range pairs {
		out = append(out, p[0], p[1])
	}
	return out
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

// spoil sets key to a string that is not a number, for ttl, on both
// sides: the next calls of a limiter on it fail, and their errors are
// compared (scripts' errors name the script and the line).
func (p *pair) spoil(ctx context.Context, key string, ttl time.Duration) error {
	p.note("SET %s garbage PX %d", key, ttl.Milliseconds())
	start := time.Now()
	for i, c := range p.c {
		if err := c.Set(ctx, key, "garbage", ttl).Err(); err != nil {
			return fmt.Errorf("SET on %s: %w", sideNames[i], err)
		}
	}
	p.maxSpan = max(p.maxSpan, time.Since(start)) // the TTLs differ by as much
	return nil
}

// answered counts one decision both sides made.
func (p *pair) answered(what string) {
	if p.answers == nil {
		p.answers = map[string]int{}
	}
	p.answers[what]++
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
	return fmt.Sprintf("%d calls compared (%d failing alike); waits: %d for expiries, %d for boundaries; "+
		"longest step %v, longest from expiry check to step end %v; "+
		"%d steps not compared (they ran past an expiry or boundary, and FLUSHALL followed); "+
		"largest PTTL difference %v, largest reset difference %v; answers %v",
		p.steps, p.errorsAlike, p.settleWaits, p.boundaryWaits, p.maxSpan.Round(time.Microsecond),
		p.maxExposure.Round(time.Microsecond), p.skipped, p.maxTTLDiff, p.maxResetDiff, p.answers)
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
