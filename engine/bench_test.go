package engine

import "testing"

// steadyKey returns a key for a that has seen 2000 requests, one every
// 7 ms at 100 per second (so about 30% are denied): a log's ring has grown
// to its final size.
func steadyKey(a Algo) (st *State, p Params, now int64) {
	st, p, now = &State{}, Params{Limit: 100, Window: sec}, base
	for i := 0; i < 2000; i++ {
		now += 7 * ms
		Check(a, st, p, 1, now)
	}
	return st, p, now
}

func BenchmarkCheck(b *testing.B) {
	for _, a := range allAlgos {
		b.Run(a.String(), func(b *testing.B) {
			st, p, now := steadyKey(a)
			b.ReportAllocs()
			var n, allowed int
			for b.Loop() {
				now += 7 * ms
				if Check(a, st, p, 1, now).Allowed {
					allowed++
				}
				n++
			}
			b.ReportMetric(float64(allowed)/float64(n), "allowed/op")
		})
	}
}

func TestCheckSteadyStateAllocs(t *testing.T) {
	for _, a := range allAlgos {
		st, p, now := steadyKey(a)
		var allowed, denied int
		allocs := testing.AllocsPerRun(1000, func() {
			now += 7 * ms
			if Check(a, st, p, 1, now).Allowed {
				allowed++
			} else {
				denied++
			}
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocations per Check", a, allocs)
		}
		if allowed == 0 || denied == 0 {
			t.Errorf("%v: %d allowed, %d denied: not a steady state under load", a, allowed, denied)
		}
	}
}
