package hist

import (
	"math/rand/v2"
	"sort"
	"testing"
)

func TestIndexIsMonotonicAndBounded(t *testing.T) {
	prev := -1
	for v := int64(0); v < 1<<22; v += 1 + v/97 {
		i := index(v)
		if i < prev {
			t.Fatalf("index(%d) = %d < %d", v, i, prev)
		}
		if up := upper(i); up < v || float64(up-v) > float64(v)/subCount+1 {
			t.Fatalf("upper(index(%d)) = %d: outside 1/%d", v, up, subCount)
		}
		prev = i
	}
	if i := index(1 << 62); i != nBuckets-1 {
		t.Fatalf("index(2^62) = %d, want the last bucket", i)
	}
}

// TestQuantilesMatchSort compares quantiles with the exact order statistics
// of a random heavy-tailed sample. Seeded; the seed is printed on failure.
func TestQuantilesMatchSort(t *testing.T) {
	const seed = 42
	r := rand.New(rand.NewPCG(seed, 0))
	h := New()
	vals := make([]int64, 100000)
	for i := range vals {
		vals[i] = int64(r.ExpFloat64() * 50000)
		if i%1000 == 0 {
			vals[i] *= 100
		}
		h.Record(vals[i])
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
		exact := vals[int(q*float64(len(vals)))-1]
		got := h.Quantile(q)
		if got < exact || float64(got-exact) > float64(exact)/subCount+1 {
			t.Errorf("seed %d: q%.3f = %d, exact %d", seed, q, got, exact)
		}
	}
	if h.Max() != vals[len(vals)-1] || h.Min() != vals[0] || h.Count() != uint64(len(vals)) {
		t.Errorf("min/max/count = %d/%d/%d", h.Min(), h.Max(), h.Count())
	}
}

func TestMerge(t *testing.T) {
	a, b := New(), New()
	a.Record(10)
	b.Record(1000)
	b.Record(5)
	a.Merge(b)
	if a.Count() != 3 || a.Min() != 5 || a.Max() != 1000 || a.Quantile(0.5) != 10 {
		t.Fatalf("merged: n=%d min=%d max=%d p50=%d", a.Count(), a.Min(), a.Max(), a.Quantile(0.5))
	}
}

func BenchmarkRecord(b *testing.B) {
	h := New()
	for i := 0; i < b.N; i++ {
		h.Record(int64(i) * 7919 % 10_000_000)
	}
}
