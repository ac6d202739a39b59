// Package scaling checks, in tests, how the time a piece of work takes
// grows with the size of its input, in a way that holds on a busy machine:
// rather than a bound on wall time, which a loaded machine exceeds and a
// fast one hides a quadratic cost under, it compares the work at two sizes
// measured in the same test.
package scaling

import (
	"testing"
	"time"
)

// Linear runs work(n/8) and work(n), each twice, and fails t if the best
// time at n is more than 16 times the best at n/8, plus slack: a cost
// linear in n takes about 8 times as long, a quadratic one 64 times. The
// best of two runs keeps a moment of load from deciding; slack absorbs
// the fixed costs (a round trip, a scheduling delay) that dominate when
// the work is fast. It returns the best time at n.
func Linear(t testing.TB, n int, slack time.Duration, work func(n int)) time.Duration {
	t.Helper()
	best := func(n int) time.Duration {
		d := time.Duration(1<<63 - 1)
		for range 2 {
			start := time.Now()
			work(n)
			d = min(d, time.Since(start))
		}
		return d
	}
	small, large := best(n/8), best(n)
	t.Logf("%d: %v, %d: %v (%.1fx)", n/8, small, n, large, float64(large)/float64(max(small, 1)))
	if large > 16*small+slack {
		t.Errorf("%d took %v, %d took %v: more than 16 times as long plus %v for 8 times the size, a cost that grows faster than linearly",
			n/8, small, n, large, slack)
	}
	return large
}
