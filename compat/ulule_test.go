package compat

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	sredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/rlserver/rlserver/internal/testseed"
)

// ululeRates are the rates the ulule/limiter test draws from: fixed
// windows of a counter under PEXPIRE, so whole and odd periods alike.
var ululeRates = []limiter.Rate{
	{Period: time.Second, Limit: 5},
	{Period: 700 * time.Millisecond, Limit: 3},
	{Period: 2 * time.Second, Limit: 10},
	{Period: 1500 * time.Millisecond, Limit: 1},
	{Period: 300 * time.Millisecond, Limit: 2},
}

// TestUluleLimiter drives ulule/limiter v3 with its Redis store (SCRIPT
// LOAD when the store is built, EVALSHA, SCRIPT LOAD again on NOSCRIPT,
// DEL for Reset) on go-redis clients in RESP3 and RESP2 against
// redis-server and rlserver in lock step: Get, Peek,
// Increment and Reset on random keys, rates and counts, SCRIPT FLUSH now
// and then, and now and then a key that holds no number (the errors are
// compared). Limit, remaining and reached must be equal, the reset within a
// second, the stored counters equal and their PTTLs as close as the clocks
// explain.
func TestUluleLimiter(t *testing.T) {
	t.Parallel()
	rng := testseed.Rand(t)
	p := startPair(t)
	if err := driveUlule(context.Background(), p, rng, stepsFor(t, 120), false); err != nil {
		t.Fatal(err)
	}
	t.Log(p.figures())
}

type ululeOut struct {
	ctx limiter.Context
	err string
}

// driveUlule runs steps random calls of ulule/limiter on both sides of p
// and returns the first difference. With skew, side b's rates allow one
// more (the harness must then see a difference).
func driveUlule(ctx context.Context, p *pair, rng *rand.Rand, steps int, skew bool) error {
	var stores [2][2]limiter.Store // RESP3, RESP2
	for proto, cs := range [2][2]*redis.Client{p.c, p.c2} {
		for i, c := range cs {
			var err error
			if stores[proto][i], err = sredis.NewStoreWithOptions(c, limiter.StoreOptions{Prefix: "limiter"}); err != nil {
				return fmt.Errorf("building the store on %s: %w", sideNames[i], err)
			}
		}
	}
	type key struct {
		name string
		lim  [2][2]*limiter.Limiter
	}
	keys := make([]key, 4)
	for i := range keys {
		rate := ululeRates[rng.IntN(len(ululeRates))]
		rb := rate
		if skew {
			rb.Limit++
		}
		keys[i] = key{name: fmt.Sprintf("user:%d", i)}
		for proto := range stores {
			keys[i].lim[proto] = [2]*limiter.Limiter{limiter.New(stores[proto][0], rate), limiter.New(stores[proto][1], rb)}
		}
	}
	for p.step = 0; p.step < steps; p.step++ {
		pause(rng, 150*time.Millisecond)
		k := keys[rng.IntN(len(keys))]
		op, n, proto := choose(rng, 30, 20, 35, 7, 5, 2), int64(1+rng.IntN(3)), rng.IntN(2)
		switch op {
		case 4:
			p.note("SCRIPT FLUSH")
			if err := p.scriptFlush(ctx); err != nil {
				return err
			}
			continue
		case 5:
			if err := p.spoil(ctx, "limiter:"+k.name, 300*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		p.note("%s %s %v n=%d over RESP%d", []string{"Get", "Peek", "Increment", "Reset"}[op], k.name, k.lim[0][0].Rate, n, 3-proto)
		lim := k.lim[proto]
		if err := p.ready(ctx, nil); err != nil {
			return err
		}
		out := both(p, func(i int) ululeOut {
			var c limiter.Context
			var err error
			switch op {
			case 0:
				c, err = lim[i].Get(ctx, k.name)
			case 1:
				c, err = lim[i].Peek(ctx, k.name)
			case 2:
				c, err = lim[i].Increment(ctx, k.name, n)
			case 3:
				c, err = lim[i].Reset(ctx, k.name)
			}
			return ululeOut{c, errText(err)}
		})
		if p.tainted {
			if err := p.resync(ctx, steps); err != nil {
				return err
			}
			continue
		}
		if err := compareUlule(p, out); err != nil {
			return err
		}
		if err := p.compareStored(ctx, "limiter:"+k.name, "", nil); err != nil {
			return err
		}
	}
	return nil
}

func compareUlule(p *pair, out [2]ululeOut) error {
	a, b := out[0], out[1]
	if a.err != b.err {
		return p.fail("the call", a.err, b.err)
	}
	if a.err != "" {
		p.errorsAlike++
	}
	if a.ctx.Limit != b.ctx.Limit || a.ctx.Remaining != b.ctx.Remaining || a.ctx.Reached != b.ctx.Reached {
		return p.fail("limit, remaining, reached", a.ctx, b.ctx)
	}
	p.answered(map[bool]string{true: "reached", false: "not reached"}[a.ctx.Reached])
	return p.compareReset("reset", time.Duration(a.ctx.Reset)*time.Second, time.Duration(b.ctx.Reset)*time.Second)
}
