package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/raftlog"
	"github.com/rlserver/rlserver/shards"
	"github.com/rlserver/rlserver/slots"
)

// fakeDisk returns a disk guard (MinFree 64 MiB) over a fake disk of
// 2 GiB whose free space is avail, 1 GiB at first.
func fakeDisk(t *testing.T) (*atomic.Int64, *raftlog.Space) {
	avail := new(atomic.Int64)
	avail.Store(1 << 30)
	space, err := raftlog.OpenSpace(t.TempDir(), raftlog.SpaceOptions{MinFree: 64 << 20, Poll: 5 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
		Usage:  func(string) (uint64, uint64, error) { return uint64(avail.Load()), 2 << 30, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(space.Close)
	return avail, space
}

// TestClusterNodeOnAFullDiskRefusesChanges: the stores of a cluster node
// whose disk guard refuses (its Space on a fake disk that fills) answer
// -MISCONF to the checks of the groups it leads, also when another node
// forwards them (Proxy), and change nothing; peeks of those keys and
// checks of the groups other nodes lead are answered; once the disk has
// room again, every check is allowed.
func TestClusterNodeOnAFullDiskRefusesChanges(t *testing.T) {
	avail, space := fakeDisk(t)
	tc := startClusterWith(t, 3, 6, Strong, func(c *ClusterConfig) {
		c.Proxy = true
		if c.NodeID == "n1" {
			c.NewStore = func(int) *shards.Store { return shards.NewStore(shards.Options{Shards: 8, Refuse: space.Err}) }
		}
	})
	n1, n2 := tc.nodes[0], tc.nodes[1]
	p := engine.Params{Limit: 100, Window: noRollover}
	ledByN1 := func(key string) bool {
		g := n1.replica(n1.groupOf(slots.Of([]byte(key))))
		return g != nil && g.phase.serving()
	}
	avail.Store(10 << 20) // the disk fills
	testutil.WaitFor(t, 5*time.Second, "the guard to see the disk fill", func() bool { return space.Err() != nil })
	var served int
	refused := map[string]bool{}
	for k := 0; k < 60; k++ {
		key := fmt.Sprint("full:", k)
		before := ledByN1(key)
		r, err := n2.Check([]byte(key), engine.Fixed, p, 1, time.Now().UnixNano())
		misconf := err != nil && strings.HasPrefix(err.Error(), "MISCONF ")
		after := ledByN1(key) // a lead may move meanwhile (a hand-over, or a heartbeat missed on a busy machine)
		switch {
		case misconf && (before || after):
			refused[key] = true
		case before && after:
			t.Fatalf("%s (n1 leads it) checked through n2: %+v %v, want MISCONF", key, r, err)
		case err != nil || !r.Allowed:
			t.Fatalf("%s (another node leads it): %+v %v, want allowed", key, r, err)
		default:
			served++
		}
		if r, err := n2.Check([]byte(key), engine.Fixed, p, 0, time.Now().UnixNano()); err != nil || r.Remaining < 99 {
			t.Fatalf("peek of %s: %+v %v", key, r, err)
		}
	}
	if len(refused) == 0 || served == 0 {
		t.Fatalf("%d keys refused, %d served: the test needs both", len(refused), served)
	}
	avail.Store(1 << 30)
	for space.Err() != nil {
		time.Sleep(time.Millisecond)
	}
	for k := 0; k < 60; k++ {
		key := fmt.Sprint("full:", k)
		want := int64(98) // charged before, charged now
		if refused[key] {
			want = 99 // the refused check changed nothing
		}
		r, err := n2.Check([]byte(key), engine.Fixed, p, 1, time.Now().UnixNano())
		if errors.Is(err, ErrLostLead) && tc.leadsLost() > 0 {
			t.Logf("%s: %v after a lead was lost to a missed heartbeat: the outcome is unknown", key, err)
			continue
		}
		if err != nil || r.Remaining != want {
			t.Fatalf("%s once the disk has room: %+v %v, want %d remaining", key, r, err, want)
		}
	}
}

// TestClusterNodeOnAFullDiskHandsItsLeadsOver: a cluster node whose disk
// refuses state changes could only answer MISCONF for the groups it
// leads; it hands them to nodes whose disks have room (each hand-over as
// any planned move), takes none while its disk is low (nor does the
// balancer give it any), and gets its leads back once the disk has room:
// every key is then checked without an error through any node.
func TestClusterNodeOnAFullDiskHandsItsLeadsOver(t *testing.T) {
	avail, space := fakeDisk(t)
	tc := startClusterWith(t, 3, 6, Strong, func(c *ClusterConfig) {
		c.Proxy = true
		if c.NodeID == "n1" {
			c.NewStore = func(int) *shards.Store { return shards.NewStore(shards.Options{Shards: 8, Refuse: space.Err}) }
			c.DiskErr = space.Err
		}
	})
	n1, n2 := tc.nodes[0], tc.nodes[1]
	if leads(n1) == 0 {
		t.Fatal("n1 leads no group before its disk fills")
	}
	avail.Store(10 << 20) // n1's disk fills
	testutil.WaitFor(t, 10*time.Second, "n1 leads no group and every group is served", func() bool {
		return leads(n1) == 0 && tc.servedOnce(false)
	})
	p := engine.Params{Limit: 100, Window: noRollover}
	for k := 0; k < 60; k++ {
		key := fmt.Sprint("handed:", k)
		if r, err := n1.Forwarder().Check([]byte(key), engine.Fixed, p, 1, time.Now().UnixNano()); err != nil || !r.Allowed {
			t.Fatalf("%s through n1, whose disk is full: %+v %v", key, r, err)
		}
	}
	time.Sleep(3 * time.Second) // the balancer runs every 2 s: it must not give n1 a lead back
	if n := leads(n1); n != 0 {
		t.Fatalf("n1 was given %d leads while its disk is full", n)
	}
	assertDiskLowReported(t, n2, "n1")
	avail.Store(1 << 30)
	tc.waitBalanced(60 * time.Second)
	assertDiskLowReported(t, n2, "")
	for k := 0; k < 60; k++ {
		key := fmt.Sprint("handed:", k)
		if r, err := n2.Check([]byte(key), engine.Fixed, p, 1, time.Now().UnixNano()); err != nil || r.Remaining != 98 {
			t.Fatalf("%s once n1's disk has room: %+v %v, want 98 remaining", key, r, err)
		}
	}
}

// assertDiskLowReported: c's report marks node low's disk low, and no
// other's (low "": none).
func assertDiskLowReported(t *testing.T, c *Cluster, low string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r := c.Report(ctx, 0)
	for _, n := range r.Nodes {
		if n.DiskLow != (n.Name == low) {
			t.Errorf("the report says node %s's disk_low is %v (low: %q): %+v", n.Name, n.DiskLow, low, r.Nodes)
		}
	}
}
