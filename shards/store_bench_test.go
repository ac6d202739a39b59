package shards

import (
	"strconv"
	"testing"

	"github.com/rlserver/rlserver/engine"
)

func keys(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte("user:" + strconv.Itoa(i))
	}
	return out
}

// BenchmarkCheck measures Store.Check on 10,000 warm keys per algorithm.
func BenchmarkCheck(b *testing.B) {
	for _, a := range []engine.Algo{engine.Fixed, engine.Sliding, engine.Log, engine.Token, engine.Leaky, engine.GCRA} {
		b.Run(a.String(), func(b *testing.B) {
			s := New(0)
			ks := keys(10000)
			p := engine.Params{Limit: 100, Window: 60 * sec}
			now := int64(1_700_000_000) * sec
			for _, k := range ks {
				s.Check(k, a, p, 1, now)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.Check(ks[i%len(ks)], a, p, 1, now+int64(i)*1000)
			}
		})
	}
}

// BenchmarkCheckParallel measures contention across shards.
func BenchmarkCheckParallel(b *testing.B) {
	s := New(0)
	ks := keys(10000)
	p := engine.Params{Limit: 100, Window: 60 * sec}
	now := int64(1_700_000_000) * sec
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			s.Check(ks[i%len(ks)], engine.Token, p, 1, now)
			i += 7
		}
	})
}

// TestCheckDoesNotAllocate proves the steady-state check path is
// allocation-free for every algorithm.
func TestCheckDoesNotAllocate(t *testing.T) {
	for _, a := range []engine.Algo{engine.Fixed, engine.Sliding, engine.Log, engine.Token, engine.Leaky, engine.GCRA} {
		s := New(0)
		key := []byte("steady")
		p := engine.Params{Limit: 50, Window: sec}
		now := int64(1_700_000_000) * sec
		for i := 0; i < 200; i++ { // twice the refill rate: state stays live, a log ring reaches its working size
			s.Check(key, a, p, 1, now+int64(i)*sec/100)
		}
		i := 200
		allocs := testing.AllocsPerRun(1000, func() {
			s.Check(key, a, p, 1, now+int64(i)*sec/100)
			i++
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocs per Check, want 0", a, allocs)
		}
	}
}
