// Package testseed gives randomized tests a seed that they print and that
// a failure can be replayed with: the -seed flag of the test binary, or
// the RL_SEED environment variable, or else the clock. Only tests import
// it; it registers the -seed flag in their binary.
package testseed

import (
	"flag"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("seed", 0, "seed for the randomized tests (also RL_SEED); 0 draws one from the clock")

// Given returns the seed from -seed or RL_SEED, or 0 if neither is set.
func Given(t testing.TB) uint64 {
	t.Helper()
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

// Rand returns a generator seeded from -seed, RL_SEED or the clock, and
// logs the seed so that a failure can be replayed.
func Rand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := Given(t)
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed=%d or RL_SEED=%d)", seed, seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}
