package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/clock"
	"github.com/rlserver/rlserver/internal/testutil"
)

// shiftedClocks gives the nodes of startClusterWith decision clocks
// (internal/clock) over the wall clock shifted by shifts[i] for node i:
// node i's wall clock is that far ahead of the others'.
func shiftedClocks(shifts ...time.Duration) ([]*clock.Clock, func(*ClusterConfig)) {
	clocks := make([]*clock.Clock, len(shifts))
	start := time.Now()
	i := 0
	return clocks, func(cfg *ClusterConfig) {
		shift := int64(shifts[i])
		c := clock.New(clock.SourceFunc(func() (int64, int64) {
			t := time.Now()
			return t.UnixNano() + shift, int64(t.Sub(start))
		}))
		clocks[i] = c
		cfg.Clock, cfg.RaiseClock = c.Now, func(ns int64) { c.AtLeast(ns) }
		i++
	}
}

// oneSecond is a fixed window of 10 a second.
var oneSecond = engine.Params{Limit: 10, Window: int64(time.Second)}

// leaderOf returns the index of the live node that serves key (a peek
// there answers), or -1.
func (tc *testCluster) leaderOf(key string, clocks []*clock.Clock) int {
	for i, c := range tc.nodes {
		if c == nil {
			continue
		}
		if _, err := c.Check([]byte(key), engine.Fixed, oneSecond, 0, clocks[i].Now()); err == nil {
			return i
		}
	}
	return -1
}

// keyLedBy returns a key whose group node i leads.
func (tc *testCluster) keyLedBy(t *testing.T, i int, clocks []*clock.Clock) string {
	t.Helper()
	for k := 0; k < 10000; k++ {
		if key := fmt.Sprintf("k%d", k); tc.leaderOf(key, clocks) == i {
			return key
		}
	}
	t.Fatalf("no key is led by node %d", i)
	return ""
}

// admitsWithin checks key on node i (at its clock) until it is allowed,
// and fails the test if that takes longer than d.
func (tc *testCluster) admitsWithin(t *testing.T, i int, clocks []*clock.Clock, key string, d time.Duration) {
	t.Helper()
	var r engine.Result
	var err error
	if testutil.Poll(d, func() error {
		r, err = tc.nodes[i].Check([]byte(key), engine.Fixed, oneSecond, 1, clocks[i].Now())
		if err == nil && !r.Allowed {
			return errors.New("denied")
		}
		return err
	}) != nil {
		t.Fatalf("%s on n%d: not allowed within %v (%+v, %v): its keys are frozen", key, i+1, d, r, err)
	}
}

// spendOn checks key with check until it is denied.
func spendOn(t *testing.T, key string, check func() (engine.Result, error)) {
	t.Helper()
	for n := 0; ; n++ {
		r, err := check()
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if !r.Allowed {
			return
		}
		if n > 20 {
			t.Fatalf("%s: never denied", key)
		}
	}
}

// TestClockAheadDoesNotFreezeOthers: node n1's wall clock is an hour
// ahead of n2's and n3's. A check forwarded by n1 is decided at the
// leader's clock, so it leaves the leader's keys running (before: at n1's,
// which moved the leader's shard an hour ahead and froze its keys for the
// hour). When n1 hands its leads over, the new leaders' clocks are raised
// to the latest time their groups committed, so the keys n1 charged run on
// (before: frozen for the hour the new leaders were behind). A key of one
// second's window is allowed again within 10 s: a frozen one would not be
// for the hour (3 s was too short for a new leader to start serving on a
// machine loaded four times over).
func TestClockAheadDoesNotFreezeOthers(t *testing.T) {
	clocks, mod := shiftedClocks(time.Hour, 0, 0)
	tc := startClusterWith(t, 3, 4, Fast, mod)

	fwd := tc.keyLedBy(t, 1, clocks)
	spendOn(t, fwd, func() (engine.Result, error) {
		return tc.nodes[0].Forwarder().Check([]byte(fwd), engine.Fixed, oneSecond, 1, clocks[0].Now())
	})
	tc.admitsWithin(t, 1, clocks, fwd, 10*time.Second)

	key := tc.keyLedBy(t, 0, clocks)
	spendOn(t, key, func() (engine.Result, error) {
		return tc.nodes[0].Check([]byte(key), engine.Fixed, oneSecond, 1, clocks[0].Now())
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tc.nodes[0].StepDown(ctx)
	var to int
	testutil.WaitFor(t, 10*time.Second, "another node leads "+key, func() bool {
		to = tc.leaderOf(key, clocks)
		return to > 0
	})
	tc.admitsWithin(t, to, clocks, key, 10*time.Second)
	if behind := time.Duration(clocks[0].Now() - clocks[to].Now()); behind > time.Second {
		t.Fatalf("n%d's clock is %v behind n1's, whose entries it applied", to+1, behind)
	}
}
