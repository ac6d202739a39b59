package main

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/raftlog"
)

// TestBudgetFor: --maxmemory sizes Pebble's memtables and block cache (a
// thirty-second each, within raftlog's bounds, durable nodes only) and the
// runtime's soft limit (a quarter more, at least 8 MiB more);
// no --maxmemory changes nothing.
func TestBudgetFor(t *testing.T) {
	parallel(t)
	const mb = 1 << 20
	for _, tc := range []struct {
		max     int64
		durable bool
		want    memoryBudget
	}{
		{0, true, memoryBudget{}},
		{0, false, memoryBudget{}},
		{64 * mb, false, memoryBudget{goLimit: 80 * mb}},
		{64 * mb, true, memoryBudget{memTable: 2 * mb, cache: 2 * mb, goLimit: 80 * mb}},
		{16 * mb, true, memoryBudget{memTable: raftlog.MinMemTableSize, cache: 1 * mb, goLimit: 24 * mb}},
		{2048 * mb, true, memoryBudget{memTable: raftlog.DefaultMemTableSize, cache: raftlog.DefaultCacheSize, goLimit: 2560 * mb}},
	} {
		if got := budgetFor(tc.max, tc.durable); got != tc.want {
			t.Errorf("budgetFor(%d MiB, durable %v) = %+v, want %+v", tc.max/mb, tc.durable, got, tc.want)
		}
	}
}

// TestHeapMeter: after a collection the overhead is the live heap less
// what the state and connections account for (never below 0), and the
// peak the largest live heap measured; without a collection nothing is
// measured.
func TestHeapMeter(t *testing.T) {
	alone(t)
	m := newHeapMeter()
	if m.held() <= 0 {
		t.Fatalf("a new meter holds %d: want the heap in use at start", m.held())
	}
	asked := 0
	quarter := func() int64 { asked++; live, _ := m.read(); return live / 4 }
	if m.measure(quarter) || asked != 0 {
		t.Fatalf("measured without a collection")
	}
	runtime.GC()
	live, _ := m.read()
	if !m.measure(quarter) || asked != 1 {
		t.Fatalf("a collection ran and was not measured")
	}
	if o, p := m.Memory(); o != live-live/4 || p != live {
		t.Errorf("overhead %d, peak %d with a live heap of %d, a quarter accounted", o, p, live)
	}
	runtime.GC()
	m.measure(func() int64 { return live * 10 })
	if o, p := m.Memory(); o != 0 || p < live/2 {
		t.Errorf("overhead %d, peak %d with more accounted than live: want 0 and the peak kept", o, p)
	}
}

// TestHeapMeterRunsAfterCollections: run measures after each collection,
// with no timer, until its context ends.
func TestHeapMeterRunsAfterCollections(t *testing.T) {
	alone(t)
	m := newHeapMeter()
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int64
	m.run(ctx, func() int64 { calls.Add(1); return 0 })
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	testutil.WaitFor(t, 10*time.Second, "a measure after a collection", func() bool {
		runtime.GC()
		return calls.Load() > 0
	})
	if o, p := m.Memory(); o <= 0 || p <= 0 {
		t.Errorf("after a collection: overhead %d, peak %d; want the live heap", o, p)
	}
	cancel()
	runtime.GC()
	runtime.GC()
	time.Sleep(50 * time.Millisecond) // let a last finalizer run
	n := calls.Load()
	runtime.GC()
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	if calls.Load() != n {
		t.Errorf("measured %d times after the context ended", calls.Load()-n)
	}
}
