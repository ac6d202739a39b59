package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/shards"
)

// TestSweepTakesStoresAddedLater: the background sweep asks for the
// node's stores each round, so that a store added after it started (a
// cluster node's replica of a group it joins or that moves to it) has its
// expired keys dropped too. Before, the sweep got the stores of the start,
// one goroutine each, and a replica added later kept its expired keys
// until a check touched them.
func TestSweepTakesStoresAddedLater(t *testing.T) {
	parallel(t)
	const start = int64(1_000_000_000_000)
	clock := atomic.Int64{}
	clock.Store(start)
	early, late := shards.NewStore(shards.Options{}), shards.NewStore(shards.Options{})
	p := engine.Params{Limit: 10, Window: int64(time.Second)}
	for i := range 100 {
		for _, s := range []*shards.Store{early, late} {
			if _, err := s.Check(fmt.Appendf(nil, "k%d", i), engine.Fixed, p, 1, start); err != nil {
				t.Fatal(err)
			}
		}
	}
	var list atomic.Pointer[[]*shards.Store]
	list.Store(&[]*shards.Store{early})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sweep(ctx, func() []*shards.Store { return *list.Load() }, clock.Load)
	}()
	clock.Store(start + int64(time.Minute)) // every key has expired
	testutil.WaitFor(t, 10*time.Second, "the store known at start swept", func() bool { return early.Len() == 0 })
	if late.Len() != 100 {
		t.Fatalf("a store the sweep was not given lost keys: %d left", late.Len())
	}
	list.Store(&[]*shards.Store{early, late})
	testutil.WaitFor(t, 10*time.Second, "the store added later swept", func() bool { return late.Len() == 0 })
	cancel()
	<-done
}
