package transport

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/rlserver/rlserver/internal/testutil"
)

// listFSM appends every entry to a slice.
type listFSM struct {
	mu      sync.Mutex
	entries []string
}

func (f *listFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries = append(f.entries, string(l.Data))
	return nil
}

func (f *listFSM) Snapshot() (raft.FSMSnapshot, error) {
	return listSnapshot(f.list()), nil
}

func (f *listFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var entries []string
	if err := json.NewDecoder(rc).Decode(&entries); err != nil {
		return err
	}
	f.mu.Lock()
	f.entries = entries
	f.mu.Unlock()
	return nil
}

func (f *listFSM) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.entries)
}

type listSnapshot []string

func (s listSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode([]string(s)); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (listSnapshot) Release() {}

// replica is one group's raft on one node.
type replica struct {
	node int
	raft *raft.Raft
	fsm  *listFSM
}

// testCluster is three muxes, each running a replica of every group.
type testCluster struct {
	muxes  []*Mux
	groups map[uint32][]*replica
	dead   map[int]bool
}

func newTestCluster(t *testing.T, nodes int, groups []uint32) *testCluster {
	tc := &testCluster{groups: map[uint32][]*replica{}, dead: map[int]bool{}}
	var servers []raft.Server
	for i := range nodes {
		m := newMux(t, Options{})
		tc.muxes = append(tc.muxes, m)
		servers = append(servers, raft.Server{ID: nodeID(i), Address: raft.ServerAddress(m.Advertise())})
	}
	for _, g := range groups {
		for i, m := range tc.muxes {
			r := startReplica(t, m, i, g)
			if err := r.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
				t.Fatalf("bootstrap group %d on node %d: %v", g, i, err)
			}
			tc.groups[g] = append(tc.groups[g], r)
		}
	}
	return tc
}

func nodeID(i int) raft.ServerID { return raft.ServerID(fmt.Sprintf("node%d", i)) }

// startReplica starts group g's raft on node i over m, shut down at the
// end of the test (before the muxes close: cleanups run last first).
func startReplica(t *testing.T, m *Mux, i int, g uint32) *replica {
	conf := raft.DefaultConfig()
	conf.LocalID = nodeID(i)
	conf.HeartbeatTimeout = 150 * time.Millisecond
	conf.ElectionTimeout = 150 * time.Millisecond
	conf.LeaderLeaseTimeout = 100 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.Logger = hclog.NewNullLogger()
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: m.Stream(g), MaxPool: 3, Timeout: 2 * time.Second, Logger: hclog.NewNullLogger(),
	})
	fsm := &listFSM{}
	store := raft.NewInmemStore()
	r, err := raft.NewRaft(conf, fsm, store, store, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatalf("raft for group %d on node %d: %v", g, i, err)
	}
	t.Cleanup(func() { r.Shutdown().Error() })
	return &replica{node: i, raft: r, fsm: fsm}
}

// live returns group g's replicas on nodes still up.
func (tc *testCluster) live(g uint32) []*replica {
	var out []*replica
	for _, r := range tc.groups[g] {
		if !tc.dead[r.node] {
			out = append(out, r)
		}
	}
	return out
}

// leader returns group g's leader among the live replicas, or nil.
func (tc *testCluster) leader(g uint32) *replica {
	for _, r := range tc.live(g) {
		if r.raft.State() == raft.Leader {
			return r
		}
	}
	return nil
}

// apply commits data in group g through whichever live replica leads,
// retrying across elections until the deadline.
func (tc *testCluster) apply(t *testing.T, g uint32, data string) {
	t.Helper()
	var err error // the last Apply's: no leader is no news
	if testutil.Poll(10*time.Second, func() error {
		l := tc.leader(g)
		if l == nil {
			return errors.New("no leader")
		}
		err = l.raft.Apply([]byte(data), time.Second).Error()
		return err
	}) != nil {
		t.Fatalf("group %d: could not apply %q: %v", g, data, err)
	}
}

// checkReplicas waits until every live replica of g holds the same entries
// and want appears among them in order (an apply retried after a lost
// leadership may have committed twice).
func (tc *testCluster) checkReplicas(t *testing.T, g uint32, want []string) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("group %d's replicas to agree on %d entries", g, len(want)), func() bool {
		first := tc.live(g)[0].fsm.list()
		for _, r := range tc.live(g)[1:] {
			if !slices.Equal(r.fsm.list(), first) {
				return false
			}
		}
		return isSubsequence(want, first)
	})
}

// isSubsequence reports whether want appears in got in order.
func isSubsequence(want, got []string) bool {
	i := 0
	for _, s := range got {
		if i < len(want) && s == want[i] {
			i++
		}
	}
	return i == len(want)
}

func TestRaftGroupsOverOneListener(t *testing.T) {
	groups := []uint32{0, 1, 7}
	tc := newTestCluster(t, 3, groups)
	for _, g := range groups {
		testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("a leader in group %d", g), func() bool { return tc.leader(g) != nil })
	}

	want := map[uint32][]string{}
	for _, g := range groups {
		for i := range 20 {
			e := fmt.Sprintf("g%d-e%d", g, i)
			tc.apply(t, g, e)
			want[g] = append(want[g], e)
		}
	}
	for _, g := range groups {
		tc.checkReplicas(t, g, want[g])
	}

	// Node of group 0's leader dies: its mux closes, cutting every group.
	victim := tc.leader(0).node
	tc.dead[victim] = true
	if err := tc.muxes[victim].Close(); err != nil {
		t.Fatalf("close node %d's mux: %v", victim, err)
	}
	for _, g := range groups {
		testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("a leader in group %d without node %d", g, victim),
			func() bool { return tc.leader(g) != nil })
		for i := range 10 {
			e := fmt.Sprintf("g%d-after-%d", g, i)
			tc.apply(t, g, e)
			want[g] = append(want[g], e)
		}
	}
	for _, g := range groups {
		tc.checkReplicas(t, g, want[g])
	}
}
