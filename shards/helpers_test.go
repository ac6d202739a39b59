package shards

import (
	"math/rand/v2"
	"testing"

	"github.com/rlserver/rlserver/internal/testseed"
)

// testSeed returns the seed from -seed or RL_SEED, or 0 if neither is set.
func testSeed(t testing.TB) uint64 { return testseed.Given(t) }

// newRand returns a generator seeded from -seed, RL_SEED or the clock, and
// logs the seed so that a failure can be replayed.
func newRand(t testing.TB) *rand.Rand {
	t.Helper()
	return testseed.Rand(t)
}
