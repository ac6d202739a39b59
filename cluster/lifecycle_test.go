package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rlserver/rlserver/cluster/transport"
	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/shards"
)

// TestCallsDuringStartAndStop: a peer calls every internal method on a
// node's Raft port in a tight loop while the node opens (64 groups, so
// that starting them takes a while) and while it closes. No call may find
// a group or the meta group half made: before the fix, a status call
// arriving between a group's publication and its raft's start crashed the
// node (nil pointer in raft.LeaderWithID from status), and meta.apply
// before the meta group's raft existed did the same.
func TestCallsDuringStartAndStop(t *testing.T) {
	for round := 0; round < 3; round++ {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			addrs := freePorts(t, 2)
			caller, err := transport.Listen(addrs[1], transport.Options{Secret: []byte(testSecret),
				HoldTimeout: 20 * time.Millisecond}) // it hosts no group: n1's raft connections are dropped soon
			if err != nil {
				t.Fatal(err)
			}
			defer caller.Close()
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var answered, refused [5]int
			methods := []string{callStatus, callMetaApply, callMetaJoin, callCharge, callKey}
			bodies := [][]byte{nil, []byte(`{"op":"hello"}`), []byte(`{"node":{"id":"x","raft":"127.0.0.1:1","resp":"127.0.0.1:2"}}`),
				[]byte(`{"group":1,"cost":1,"now":1,"ops":[{"key":"YQ==","algo":0,"limit":5,"window":1000000000}]}`),
				[]byte(`{"op":"check","key":"YQ==","algo":0,"limit":5,"window":1000000000,"cost":1,"now":1}`)}
			for i := range methods {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
						_, err := caller.Call(ctx, addrs[0], methods[i], bodies[i])
						cancel()
						var re *transport.RemoteError
						switch {
						case err == nil:
							answered[i]++
						case errors.As(err, &re):
							refused[i]++
						default:
							time.Sleep(100 * time.Microsecond) // not listening yet, or closed
						}
					}
				}()
			}
			disk, err := OpenStorage(t.TempDir(), StorageOptions{NodeID: "n1"})
			if err != nil {
				t.Fatal(err)
			}
			defer disk.Close()
			cfg := ClusterConfig{Storage: disk, NodeID: "n1", RaftAddr: addrs[0], RESPAddr: "127.0.0.1:1", Secret: testSecret,
				Peers: []Peer{{ID: "n1", Raft: addrs[0]}, {ID: "n2", Raft: addrs[1]}}, Groups: 64,
				HeartbeatTimeout: 50 * time.Millisecond, ElectionTimeout: 50 * time.Millisecond, LeaderLeaseTimeout: 50 * time.Millisecond,
				NewStore: func(int) *shards.Store { return shards.New(8) }}
			cfg.Logger = testLogger("n1")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := OpenCluster(ctx, cfg)
			if err != nil {
				close(stop)
				wg.Wait()
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
			if err := c.Close(ctx); err != nil {
				t.Logf("close: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
			close(stop)
			wg.Wait()
			t.Logf("answered %v, refused %v (%v)", answered, refused, methods)
			if answered[0] == 0 {
				t.Errorf("no status call was answered while the node ran")
			}
		})
	}
}

// TestStepDownWaitsForANodeThatCanTakeTheLead: a stopping node whose
// peers cannot take a lead when it begins (they do not yet take clients,
// as a node that is still starting) keeps handing its groups over, and
// hands every one once they can: a node that stopped while leading would
// show its clients the errors of a kill.
func TestStepDownWaitsForANodeThatCanTakeTheLead(t *testing.T) {
	tc := startCluster(t, 3, 8, Fast)
	n1 := tc.nodes[0]
	if leads(n1) == 0 {
		t.Fatal("n1 leads no group: the test proves nothing")
	}
	for _, c := range tc.nodes[1:] {
		c.accepting.Store(false)
	}
	testutil.WaitFor(t, 10*time.Second, "n1 to hear that no other node takes clients", func() bool {
		for _, id := range []string{"n2", "n3"} {
			if p := n1.peer(id); p == nil || p.status.Accepting {
				return false
			}
		}
		return true
	})
	go func() {
		time.Sleep(4 * handOverPause)
		for _, c := range tc.nodes[1:] {
			c.Listening()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	n1.StepDown(ctx)
	assertLeadsNothing(t, n1, time.Since(start))
	t.Logf("every lead handed over %v after StepDown began", time.Since(start).Round(time.Millisecond))
}

// TestStepDownWaitsForALeadOnItsWay: a lead that another node announced
// it would hand to this node (callExpect accepted) just before this node
// began stopping, and that lands after StepDown's first look, is handed
// over before StepDown returns. Before, StepDown returned at once when
// the node led nothing, and the lead landed on a node that then closed
// its client connections: the clients of its slots saw EOF on a graceful
// stop (TestLongContainerRestarts: once in a stop's CI, twice in
// fresh-clone runs).
func TestStepDownWaitsForALeadOnItsWay(t *testing.T) {
	tc := startCluster(t, 3, 8, Strong)
	n1 := tc.nodes[0]
	var from *Cluster
	var g *group
	for _, c := range tc.nodes[1:] {
		for _, h := range c.hostedGroups() {
			if h.leader() && h.phase.serving() && n1.replica(int(h.id)) != nil {
				from, g = c, h
			}
		}
	}
	if g == nil {
		t.Fatal("n2 and n3 lead no group n1 has a replica of: the test proves nothing")
	}
	if err := n1.expectLead(readyReq{Group: int(g.id), Index: g.fsm.applied.Load()}); err != nil {
		t.Fatalf("n1 refused the lead of group %d before stopping: %v", g.id, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	returned := make(chan time.Time, 1)
	go func() {
		n1.StepDown(ctx)
		returned <- time.Now()
	}()
	time.Sleep(2 * handOverPause)
	f := g.raft.LeadershipTransferToServer(raft.ServerID(n1.cfg.NodeID), raft.ServerAddress(n1.cfg.RaftAdvertise))
	if err := f.Error(); err != nil {
		t.Fatalf("%s could not hand group %d to n1: %v", from.cfg.NodeID, g.id, err)
	}
	landed := time.Now()
	select {
	case at := <-returned:
		t.Fatalf("StepDown returned %v before the lead of group %d, announced to n1, landed there",
			landed.Sub(at).Round(time.Millisecond), g.id)
	default:
	}
	select {
	case at := <-returned:
		assertLeadsNothing(t, n1, at.Sub(landed))
	case <-time.After(15 * time.Second):
		t.Fatalf("StepDown had not returned 15s after the lead of group %d landed on n1", g.id)
	}
}

// assertLeadsNothing fails t if c serves or leads a group: StepDown has
// returned, after (its time is given in the message).
func assertLeadsNothing(t *testing.T, c *Cluster, after time.Duration) {
	t.Helper()
	if n := leads(c); n > 0 {
		t.Fatalf("%s still serves %d groups after StepDown (%v)", c.cfg.NodeID, n, after)
	}
	for _, g := range c.hostedGroups() {
		if g.leader() {
			t.Errorf("%s still leads group %d after StepDown", c.cfg.NodeID, g.id)
		}
	}
}
