package shards

import (
	"fmt"
	"testing"

	"github.com/rlserver/rlserver/engine"
)

// TestPrefetchChangesNothing: prefetching present, absent, duplicate and
// more than maxPrefetch keys, on empty and populated shards, leaves every
// key's state and the key count as they were.
func TestPrefetchChangesNothing(t *testing.T) {
	s := New(4)
	s.Prefetch([][]byte{[]byte("a"), []byte("b")}) // empty shards
	p := engine.Params{Limit: 10, Window: 60e9}
	now := int64(1_700_000_000e9)
	var keys [][]byte
	for i := 0; i < 50; i++ {
		k := []byte(fmt.Sprint("k", i))
		keys = append(keys, k)
		if i%2 == 0 {
			s.Check(k, engine.Fixed, p, 1, now)
		}
	}
	keys = append(keys, keys[0], keys[0])
	s.Prefetch(keys)
	if s.Len() != 25 {
		t.Fatalf("Len = %d after Prefetch, want 25", s.Len())
	}
	for i, k := range keys[:50] {
		r, _ := s.Check(k, engine.Fixed, p, 0, now)
		if want := int64(10 - (1 - i%2)); r.Remaining != want {
			t.Fatalf("%s: remaining %d, want %d", k, r.Remaining, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { s.Prefetch(keys) }); n != 0 {
		t.Fatalf("Prefetch allocates %v times", n)
	}
}
