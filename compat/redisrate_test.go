package compat

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/testseed"
)

// rateLimits are the limits the redis_rate test draws from. Their emission
// intervals (Period/Rate) are powers of two of a second, so that the
// library's GCRA computes in exact binary fractions: with 0.1 s, say, its
// remaining for a fresh key (burst - cost) comes out as 6.999999 or as 7
// depending on the last bits of the server's TIME, on redis-server alone,
// and two servers read TIME microseconds apart. Every decision boundary
// (the stored TAT plus a whole number of intervals) can then be kept at a
// guard's distance.
var rateLimits = []redis_rate.Limit{
	{Rate: 8, Period: time.Second, Burst: 8},      // 125 ms
	{Rate: 4, Period: time.Second, Burst: 6},      // 250 ms
	{Rate: 2, Period: time.Second, Burst: 3},      // 500 ms
	{Rate: 4, Period: 2 * time.Second, Burst: 5},  // 500 ms
	{Rate: 8, Period: 2 * time.Second, Burst: 10}, // 250 ms
	{Rate: 1, Period: time.Second, Burst: 2},      // 1 s
}

// jan2017 is the epoch of the TATs redis_rate stores.
const jan2017 = 1483228800

// TestRedisRate drives go-redis/redis_rate v10 (GCRA in a Lua script that
// reads the server's TIME; EVALSHA, EVAL on NOSCRIPT; DEL for Reset) on
// go-redis clients in RESP3 and RESP2 against redis-server and rlserver
// in lock step: Allow, AllowN,
// AllowAtMost and Reset on random keys, limits and costs, SCRIPT FLUSH
// now and then, and now and then a key that holds no number (the script
// fails: the errors are compared). Allowed and remaining must be equal, retry and reset
// within a second, the stored TATs and their PTTLs as close as the clocks
// explain.
func TestRedisRate(t *testing.T) {
	t.Parallel()
	rng := testseed.Rand(t)
	p := startPair(t)
	if err := driveRedisRate(context.Background(), p, rng, stepsFor(t, 120), false); err != nil {
		t.Fatal(err)
	}
	t.Log(p.figures())
}

type rateKey struct {
	name  string
	limit [2]redis_rate.Limit
}

type rateOut struct {
	res *redis_rate.Result
	err string
}

// driveRedisRate runs steps random calls of redis_rate on both sides of p
// and returns the first difference. With skew, side b's limits allow a
// larger burst (the harness must then see a difference).
func driveRedisRate(ctx context.Context, p *pair, rng *rand.Rand, steps int, skew bool) error {
	lims := [2][2]*redis_rate.Limiter{ // RESP3, RESP2
		{redis_rate.NewLimiter(p.c[0]), redis_rate.NewLimiter(p.c[1])},
		{redis_rate.NewLimiter(p.c2[0]), redis_rate.NewLimiter(p.c2[1])},
	}
	keys := make([]rateKey, 4)
	for i := range keys {
		l := rateLimits[rng.IntN(len(rateLimits))]
		lb := l
		if skew {
			lb.Burst++
		}
		keys[i] = rateKey{fmt.Sprintf("user:%d", i), [2]redis_rate.Limit{l, lb}}
	}
	for p.step = 0; p.step < steps; p.step++ {
		pause(rng, 100*time.Millisecond)
		k := keys[rng.IntN(len(keys))]
		op, n, proto := choose(rng, 30, 30, 25, 7, 5, 2), 1+rng.IntN(4), rng.IntN(2)
		switch op {
		case 4:
			p.note("SCRIPT FLUSH")
			if err := p.scriptFlush(ctx); err != nil {
				return err
			}
			continue
		case 5:
			if err := p.spoil(ctx, "rate:"+k.name, 300*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		p.note("%s %s %v n=%d over RESP%d", []string{"Allow", "AllowN", "AllowAtMost", "Reset"}[op], k.name, k.limit[0], n, 3-proto)
		if err := p.ready(ctx, func() ([]time.Time, error) { return tatBoundaries(ctx, p, k) }); err != nil {
			return err
		}
		out := both(p, func(i int) rateOut {
			var r *redis_rate.Result
			var err error
			switch op {
			case 0:
				r, err = lims[proto][i].Allow(ctx, k.name, k.limit[i])
			case 1:
				r, err = lims[proto][i].AllowN(ctx, k.name, k.limit[i], n)
			case 2:
				r, err = lims[proto][i].AllowAtMost(ctx, k.name, k.limit[i], n)
			case 3:
				err = lims[proto][i].Reset(ctx, k.name)
			}
			return rateOut{r, errText(err)}
		})
		if p.tainted {
			if err := p.resync(ctx, steps); err != nil {
				return err
			}
			continue
		}
		if err := compareRate(p, out); err != nil {
			return err
		}
		tatTol := func(string) float64 { return p.clockTol().Seconds() }
		if err := p.compareStored(ctx, "rate:"+k.name, "", tatTol); err != nil {
			return err
		}
	}
	return nil
}

func compareRate(p *pair, out [2]rateOut) error {
	a, b := out[0], out[1]
	if a.err != b.err || (a.res == nil) != (b.res == nil) {
		return p.fail("the call", a, b)
	}
	if a.err != "" {
		p.errorsAlike++
	}
	if a.res == nil {
		return nil
	}
	if a.res.Allowed != b.res.Allowed || a.res.Remaining != b.res.Remaining {
		return p.fail("allowed, remaining", *a.res, *b.res)
	}
	p.answered(map[bool]string{true: "allowed", false: "denied"}[a.res.Allowed > 0])
	if (a.res.RetryAfter == -1) != (b.res.RetryAfter == -1) {
		return p.fail("retry after", a.res.RetryAfter, b.res.RetryAfter)
	}
	if err := p.compareReset("retry after", a.res.RetryAfter, b.res.RetryAfter); err != nil {
		return err
	}
	return p.compareReset("reset after", a.res.ResetAfter, b.res.ResetAfter)
}

// tatBoundaries returns the instants near now at which redis_rate's
// decisions on k change, on either side: the stored TAT less a whole
// number of emission intervals (after the TAT, the script starts from now
// and the state no longer matters).
func tatBoundaries(ctx context.Context, p *pair, k rateKey) ([]time.Time, error) {
	var bs []time.Time
	for i, c := range p.c {
		v, err := c.Get(ctx, "rate:"+k.name).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, err
		}
		tat, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue // spoilt: the script fails
		}
		interval := k.limit[i].Period.Seconds() / float64(k.limit[i].Rate)
		bs = append(bs, gridNear(time.Now(), jan2017+tat, interval, true)...)
	}
	return bs, nil
}

// gridNear returns the two instants of origin + k*step (seconds since the
// epoch, k whole) around now; with upTo, only those not after origin.
func gridNear(now time.Time, origin, step float64, upTo bool) []time.Time {
	t := float64(now.UnixNano()) / 1e9
	k := math.Floor((t - origin) / step)
	var bs []time.Time
	for _, kk := range []float64{k, k + 1} {
		if upTo && kk > 0 {
			continue
		}
		bs = append(bs, time.Unix(0, int64((origin+kk*step)*1e9)))
	}
	return bs
}
