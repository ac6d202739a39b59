package compat

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/testseed"
)

// luaScript is one of testdata's scripts.
type luaScript struct {
	name, body, sha string
}

func readScript(t *testing.T, file string) luaScript {
	t.Helper()
	b, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum(b)
	return luaScript{file, string(b), hex.EncodeToString(sum[:])}
}

// handKey is a key of a hand-written script's run and its parameters.
type handKey struct {
	name   string
	window int64  // ms
	limit  [2]int // side a's, side b's (different with skew)
	rate   int    // tokens a second
}

// hand is how to run one hand-written script in lock step.
type hand struct {
	script luaScript
	// draw returns a key's parameters.
	draw func(rng *rand.Rand, name string, skew bool) handKey
	// args returns the script's ARGV for side i at now; cost is the
	// step's random cost (1-3).
	args func(k handKey, i int, now time.Time, cost, step int) []any
	// boundaries returns the instants near which k's decisions change
	// (nil: none but expiries).
	boundaries func(ctx context.Context, p *pair, k handKey) ([]time.Time, error)
	// replyTol gives a tolerance to elements of the reply by index, and
	// storeTol to stored items (see compareStored); nil: exact.
	replyTol func(p *pair, k handKey) func(i int) float64
	storeTol func(p *pair, k handKey) func(field string) float64
}

// TestScriptSlidingLog runs a sliding log in a sorted set (ZREMRANGEBYSCORE,
// ZCARD, ZADD, EXPIRE, ZRANGE WITHSCORES in one script), its time from
// ARGV and from the server's TIME, with EVAL and SCRIPT LOAD + EVALSHA,
// over RESP2 and RESP3, on redis-server and rlserver in lock step;
// replies and stored values are compared after each step.
func TestScriptSlidingLog(t *testing.T) {
	t.Parallel()
	for _, useTime := range []bool{false, true} {
		t.Run(timeName(useTime), func(t *testing.T) {
			t.Parallel()
			runHand(t, slidingLog(readScript(t, "sliding_log.lua"), useTime))
		})
	}
}

// TestScriptFixedWindow runs an INCR + PEXPIRE fixed window answering a
// table (a boolean, which is nil in RESP2 when false and a RESP3 boolean;
// a fraction, which Redis truncates) as TestScriptSlidingLog does.
func TestScriptFixedWindow(t *testing.T) {
	t.Parallel()
	runHand(t, fixedWindow(readScript(t, "fixed_window.lua")))
}

// TestScriptTokenBucket runs a token bucket in a hash (HMGET, HSET of
// floats, PEXPIRE; tostring of a float in the reply), its time from ARGV
// and from the server's TIME, as TestScriptSlidingLog does.
func TestScriptTokenBucket(t *testing.T) {
	t.Parallel()
	for _, useTime := range []bool{false, true} {
		t.Run(timeName(useTime), func(t *testing.T) {
			t.Parallel()
			runHand(t, tokenBucket(readScript(t, "token_bucket.lua"), useTime))
		})
	}
}

func timeName(useTime bool) string {
	if useTime {
		return "TIME"
	}
	return "ARGV"
}

func runHand(t *testing.T, h hand) {
	t.Helper()
	rng := testseed.Rand(t)
	p := startPair(t)
	if err := driveHand(context.Background(), p, rng, h, stepsFor(t, 120), false); err != nil {
		t.Fatal(err)
	}
	t.Log(p.figures())
}

// driveHand runs steps random calls of h's script on both sides of p and
// returns the first difference. With skew, side b's limits allow one more.
func driveHand(ctx context.Context, p *pair, rng *rand.Rand, h hand, steps int, skew bool) error {
	keys := make([]handKey, 3)
	for i := range keys {
		keys[i] = h.draw(rng, fmt.Sprintf("%s:%d", strings.TrimSuffix(h.script.name, ".lua"), i), skew)
	}
	for p.step = 0; p.step < steps; p.step++ {
		pause(rng, 120*time.Millisecond)
		k := keys[rng.IntN(len(keys))]
		switch rng.IntN(40) {
		case 0, 1:
			p.note("SCRIPT FLUSH")
			if err := p.scriptFlush(ctx); err != nil {
				return err
			}
			continue
		case 2:
			if err := p.spoil(ctx, k.name, 300*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		var bounds func() ([]time.Time, error)
		if h.boundaries != nil {
			bounds = func() ([]time.Time, error) { return h.boundaries(ctx, p, k) }
		}
		if err := p.ready(ctx, bounds); err != nil {
			return err
		}
		now, cost := time.Now(), 1+rng.IntN(3)
		args := [2][]any{h.args(k, 0, now, cost, p.step), h.args(k, 1, now, cost, p.step)}
		p.note("%s %s %v", h.script.name, k.name, args[0])
		got, err := p.eval(ctx, rng, h.script, []string{k.name}, args)
		if err != nil {
			return err
		}
		if p.tainted {
			if err := p.resync(ctx, steps); err != nil {
				return err
			}
			continue
		}
		var tol func(int) float64
		if h.replyTol != nil {
			tol = h.replyTol(p, k)
		}
		if got[0].err != got[1].err || !sameReply(got[0].v, got[1].v, tol) {
			st, _ := p.dumpBoth(ctx, k.name, "")
			p.note("after it: %s holds %+v on a, %+v on b", k.name, st[0], st[1])
			return p.fail("the reply", got[0], got[1])
		}
		if got[0].err != "" {
			p.errorsAlike++
		} else if r, ok := got[0].v.([]any); ok && len(r) > 0 {
			p.answered(fmt.Sprintf("allowed=%v", r[0]))
		}
		var stol func(string) float64
		if h.storeTol != nil {
			stol = h.storeTol(p, k)
		}
		if err := p.compareStored(ctx, k.name, "", stol); err != nil {
			return err
		}
	}
	return nil
}

// reply is what a script answered: a value as go-redis decodes it, or an
// error's text.
type reply struct {
	v   any
	err string
}

// eval runs s on both sides, in RESP2 or RESP3, with EVAL or with EVALSHA
// (on NOSCRIPT, which both sides must answer alike, SCRIPT LOAD on both,
// which must answer the script's SHA1, and EVALSHA again), at random.
func (p *pair) eval(ctx context.Context, rng *rand.Rand, s luaScript, keys []string, args [2][]any) ([2]reply, error) {
	cs, proto := p.c, "RESP3"
	if rng.IntN(2) == 0 {
		cs, proto = p.c2, "RESP2"
	}
	run := func(cmd string) [2]reply {
		return both(p, func(i int) reply {
			var v any
			var err error
			if cmd == "EVAL" {
				v, err = cs[i].Eval(ctx, s.body, keys, args[i]...).Result()
			} else {
				v, err = cs[i].EvalSha(ctx, s.sha, keys, args[i]...).Result()
			}
			return reply{v, errText(err)}
		})
	}
	if rng.IntN(3) == 0 {
		p.note("  EVAL over %s", proto)
		return run("EVAL"), nil
	}
	p.note("  EVALSHA over %s", proto)
	got := run("EVALSHA")
	if !strings.HasPrefix(got[0].err, "NOSCRIPT") && !strings.HasPrefix(got[1].err, "NOSCRIPT") {
		return got, nil
	}
	if got[0].err != got[1].err {
		return got, p.fail("EVALSHA of an unloaded script", got[0].err, got[1].err)
	}
	if err := p.scriptLoad(ctx, cs, s); err != nil {
		return got, err
	}
	return run("EVALSHA"), nil
}

// scriptLoad loads s on both sides and checks SCRIPT LOAD's and SCRIPT
// EXISTS's answers.
func (p *pair) scriptLoad(ctx context.Context, cs [2]*redis.Client, s luaScript) error {
	loaded := both(p, func(i int) reply {
		v, err := cs[i].ScriptLoad(ctx, s.body).Result()
		return reply{v, errText(err)}
	})
	if loaded[0] != loaded[1] || loaded[0].v != s.sha {
		return p.fail("SCRIPT LOAD (want "+s.sha+")", loaded[0], loaded[1])
	}
	exists := both(p, func(i int) reply {
		v, err := cs[i].ScriptExists(ctx, s.sha, strings.Repeat("0", 40)).Result()
		return reply{fmt.Sprint(v), errText(err)}
	})
	if exists[0] != exists[1] {
		return p.fail("SCRIPT EXISTS", exists[0], exists[1])
	}
	return nil
}

// sameReply reports whether a and b are equal, but for the elements of a
// top-level array that tol gives a tolerance, which may differ by that as
// numbers.
func sameReply(a, b any, tol func(i int) float64) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	as, ok1 := a.([]any)
	bs, ok2 := b.([]any)
	if tol == nil || !ok1 || !ok2 || len(as) != len(bs) {
		return false
	}
	for i := range as {
		if reflect.DeepEqual(as[i], bs[i]) {
			continue
		}
		if tol(i) <= 0 || !near(fmt.Sprint(as[i]), fmt.Sprint(bs[i]), tol(i)) {
			return false
		}
	}
	return true
}

func slidingLog(s luaScript, useTime bool) hand {
	h := hand{
		script: s,
		draw: func(rng *rand.Rand, name string, skew bool) handKey {
			w := []int64{300, 500, 800, 1000, 1500}[rng.IntN(5)]
			l := 1 + rng.IntN(5)
			return handKey{name: name, window: w, limit: [2]int{l, l + skewBy(skew)}}
		},
		args: func(k handKey, i int, now time.Time, _, step int) []any {
			a := []any{k.window, k.limit[i], fmt.Sprintf("req-%d", step)}
			if !useTime {
				a = append(a, now.UnixMilli())
			}
			return a
		},
	}
	if useTime {
		// The members' scores are each server's TIME (ms); the wait in a
		// reply is derived from one.
		h.boundaries = func(ctx context.Context, p *pair, k handKey) ([]time.Time, error) {
			var bs []time.Time
			for _, c := range p.c {
				zs, err := c.ZRangeWithScores(ctx, k.name, 0, -1).Result()
				if isWrongType(err) {
					continue // spoilt: the script fails
				}
				if err != nil {
					return nil, err
				}
				for _, z := range zs {
					bs = append(bs, time.UnixMilli(int64(z.Score)+k.window))
				}
			}
			return bs, nil
		}
		h.replyTol = func(*pair, handKey) func(int) float64 {
			return func(i int) float64 { return map[bool]float64{true: float64(resetTol.Milliseconds())}[i == 2] }
		}
		h.storeTol = func(p *pair, _ handKey) func(string) float64 {
			return func(string) float64 { return float64(p.clockTol().Milliseconds()) }
		}
	}
	return h
}

func fixedWindow(s luaScript) hand {
	return hand{
		script: s,
		draw: func(rng *rand.Rand, name string, skew bool) handKey {
			w := []int64{300, 700, 1000, 1500}[rng.IntN(4)]
			l := 1 + rng.IntN(6)
			return handKey{name: name, window: w, limit: [2]int{l, l + skewBy(skew)}}
		},
		args: func(k handKey, i int, _ time.Time, _, _ int) []any { return []any{k.window, k.limit[i]} },
		// The TTL in ms as the clocks explain; in whole seconds within a
		// second.
		replyTol: func(p *pair, _ handKey) func(int) float64 {
			return func(i int) float64 {
				switch i {
				case 2:
					return float64(p.clockTol().Milliseconds())
				case 3:
					return resetTol.Seconds()
				}
				return 0
			}
		},
	}
}

func tokenBucket(s luaScript, useTime bool) hand {
	h := hand{
		script: s,
		draw: func(rng *rand.Rand, name string, skew bool) handKey {
			c := 1 + rng.IntN(10)
			return handKey{name: name, limit: [2]int{c, c + skewBy(skew)}, rate: []int{2, 4, 5, 10}[rng.IntN(4)]}
		},
		args: func(k handKey, i int, now time.Time, cost, _ int) []any {
			a := []any{k.limit[i], k.rate, cost}
			if !useTime {
				ms := now.UnixMilli()
				a = append(a, fmt.Sprintf("%d.%03d", ms/1000, ms%1000))
			}
			return a
		},
	}
	if useTime {
		h.boundaries = bucketBoundaries
		// Tokens and the time they were counted differ by what the
		// clocks explain.
		h.replyTol = func(p *pair, k handKey) func(int) float64 {
			return func(i int) float64 {
				return map[bool]float64{true: float64(k.rate) * p.clockTol().Seconds()}[i == 2]
			}
		}
		h.storeTol = func(p *pair, k handKey) func(string) float64 {
			return func(field string) float64 {
				if field == "tokens" {
					return float64(k.rate) * p.clockTol().Seconds()
				}
				return p.clockTol().Seconds()
			}
		}
	}
	return h
}

// bucketBoundaries returns the instants at which a bucket's tokens, on
// either side, reach a whole number (where the decision and the floor in
// the reply change).
func bucketBoundaries(ctx context.Context, p *pair, k handKey) ([]time.Time, error) {
	var bs []time.Time
	for i, c := range p.c {
		st, err := c.HMGet(ctx, k.name, "tokens", "ts").Result()
		if isWrongType(err) {
			continue // spoilt: the script fails
		}
		if err != nil {
			return nil, err
		}
		if st[0] == nil || st[1] == nil {
			continue
		}
		tokens, err1 := strconv.ParseFloat(st[0].(string), 64)
		ts, err2 := strconv.ParseFloat(st[1].(string), 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s stores a bucket %v", sideNames[i], st)
		}
		for n := math.Floor(tokens) + 1; n <= float64(k.limit[i]); n++ {
			bs = append(bs, time.Unix(0, int64((ts+(n-tokens)/float64(k.rate))*1e9)))
		}
	}
	return bs, nil
}

func isWrongType(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE")
}

func skewBy(skew bool) int {
	if skew {
		return 1
	}
	return 0
}
