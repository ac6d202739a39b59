package cluster

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/shards"
)

// TestLostLeadWindowEndsAtTheLoss: a lead lost behind an idle node's back
// (no flush has sealed the open epoch) makes the epochs not yet committed
// a lost window, whose waiters are answered ErrLostLead; a change made
// after the loss is not in it, and commits. Before, the open epoch stayed
// in the window until something else made the applier flush, and every
// change made meanwhile was answered ErrLostLead: after a SIGSTOP and
// SIGCONT of a cluster's meta leader, RL.RULE.SET on it answered "TRYAGAIN
// the group's leadership moved before the change was committed" for a
// rule that the meta group had committed on every node.
func TestLostLeadWindowEndsAtTheLoss(t *testing.T) {
	quit := make(chan struct{})
	a := newApplier(time.Hour, func() int64 { return time.Now().UnixNano() }, nil, slog.New(slog.DiscardHandler), quit, false)
	go a.run()
	defer func() { close(quit); close(a.stop); <-a.done }()
	g := &group{id: 1, store: shards.New(1)}
	a.activate(g)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.wait(a.Pending(), ctx.Done()); err != nil {
		t.Fatalf("the first epoch: %v", err)
	}
	before := a.Pending() // open, and not sealed: the node is idle
	a.deactivate(g, false)
	if _, err := a.Committed(before); !errors.Is(err, ErrLostLead) {
		t.Fatalf("a change made before the loss: %v, want ErrLostLead", err)
	}
	after := a.Pending()
	if _, err := a.Committed(after); err != nil {
		t.Fatalf("a change made after the loss is answered %v", err)
	}
	if err := a.wait(after, ctx.Done()); err != nil {
		t.Fatalf("a change made after the loss: %v, want it committed", err)
	}
}

// TestMetaCommandCommittedIsSuccess: a rule change that the meta group
// committed is answered as its success, even when the meta leader stalls
// after the commit and before its answer (as a SIGSTOP of it does): the
// node that asked sends the request again, and the meta group answers it
// as it answered the first time (RL.RULE.SET's 1: added) without making
// it twice. Before, the node answered "TRYAGAIN a node of the cluster
// cannot be reached" for a rule every node held.
func TestMetaCommandCommittedIsSuccess(t *testing.T) {
	tc := startCluster(t, 3, 2, Fast)
	leader, asker := tc.metaLeader(), -1
	for i := range tc.nodes {
		if i != leader {
			asker = i
			break
		}
	}
	var stalls atomic.Int32
	release := make(chan struct{})
	defer close(release)
	stall := func() {
		if stalls.Add(1) == 1 {
			<-release // the first answer never comes in time
		}
	}
	tc.nodes[leader].metaAnswered.Store(&stall)
	r := rules.Rule{ID: "stall", Target: "/x", Tier: "*", KeyType: "user", Algo: "fixed", Limit: 5, Window: "1m"}
	added, err := tc.nodes[asker].SetRule(r)
	if err != nil || !added {
		t.Fatalf("SetRule through a stalled meta leader: added %v, %v; want added (the change committed)", added, err)
	}
	if stalls.Load() < 2 {
		t.Fatalf("the meta leader answered %d times: the test did not stall it", stalls.Load())
	}
	for i, c := range tc.nodes {
		testutil.WaitFor(t, 5*time.Second, "the rule on every node", func() bool { _, ok := c.Rule("stall"); return ok })
		if n := c.RuleCount(); n != 1 {
			t.Fatalf("node %d holds %d rules", i, n)
		}
	}
}

// metaLeader returns the index of the node that leads the meta group.
func (tc *testCluster) metaLeader() int {
	tc.t.Helper()
	var at int
	testutil.WaitFor(tc.t, 10*time.Second, "a meta leader", func() bool {
		for i, c := range tc.nodes {
			if c != nil && c.metaR.State().String() == "Leader" {
				at = i
				return true
			}
		}
		return false
	})
	return at
}
