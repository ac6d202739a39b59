package shards

import (
	"flag"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("seed", 0, "seed for the randomized shards tests (also RL_SEED)")

// testSeed returns the seed from -seed or RL_SEED, or 0 if neither is set.
func testSeed(t testing.TB) uint64 {
	seed := *seedFlag
	if s := os.Getenv("RL_SEED"); seed == 0 && s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("RL_SEED=%q: %v", s, err)
		}
		seed = v
	}
	return seed
}

// newRand returns a generator seeded from -seed, RL_SEED or the clock, and
// logs the seed so that a failure can be replayed.
func newRand(t testing.TB) *rand.Rand {
	seed := testSeed(t)
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed=%d or RL_SEED=%d)", seed, seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}
