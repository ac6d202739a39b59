package shards

import (
	"fmt"
	"reflect"
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

// TestPrefetchLogKeys: prefetching log keys held inline (short and across
// cache lines) and in a ring leaves their entries as they were.
func TestPrefetchLogKeys(t *testing.T) {
	s := New(2)
	p := engine.Params{Limit: 100, Window: 3600e9}
	now := int64(1_700_000_000e9)
	var keys [][]byte
	for _, n := range []int{1, 10, spillAt - 2, spillAt + 8} {
		k := []byte(fmt.Sprint("log", n))
		keys = append(keys, k)
		for i := 0; i < n; i++ {
			s.Check(k, engine.Log, p, 1+int64(i%3), now+int64(i)*7e9)
		}
	}
	var before []logView
	for _, k := range keys {
		before = append(before, viewLog(s, k))
	}
	if !before[3].spilled || before[2].spilled {
		t.Fatalf("%d entries spilled %v, %d spilled %v", spillAt-2, before[2].spilled, spillAt+8, before[3].spilled)
	}
	if n := testing.AllocsPerRun(100, func() { s.Prefetch(keys) }); n != 0 {
		t.Fatalf("Prefetch allocates %v times", n)
	}
	for i, k := range keys {
		if v := viewLog(s, k); !reflect.DeepEqual(v, before[i]) {
			t.Fatalf("%s: %+v after Prefetch, %+v before", k, v, before[i])
		}
	}
}
