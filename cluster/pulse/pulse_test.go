package pulse

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/cluster/transport"
	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/internal/wire"
)

// The pulse's timing in these tests: a follower that hears nothing for
// pulseHB starts an election; a leader that hears from no quorum for
// pulseLease steps down.
const (
	pulseHB    = 100 * time.Millisecond
	pulseLease = 100 * time.Millisecond
)

// pulseNode is one node of a pulse test: its listener, its pulse, and its
// replica of each group.
type pulseNode struct {
	id    raft.ServerID
	mux   *transport.Mux
	pulse *Pulse
	ticks atomic.Int64 // raft.hb calls this node made
	rafts map[uint32]*raft.Raft
	store map[uint32]*raft.InmemStore
}

// pulseCluster is n nodes, each with a replica of every group, their
// heartbeats carried by their pulses.
type pulseCluster struct {
	nodes  []*pulseNode
	groups []uint32
}

func newPulseCluster(t *testing.T, n int, groups []uint32) *pulseCluster {
	pc := &pulseCluster{groups: groups}
	var servers []raft.Server
	for i := range n {
		m, err := transport.Listen("127.0.0.1:0", transport.Options{})
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		t.Cleanup(func() { m.Close() })
		node := &pulseNode{id: raft.ServerID(fmt.Sprintf("n%d", i+1)), mux: m,
			rafts: map[uint32]*raft.Raft{}, store: map[uint32]*raft.InmemStore{}}
		call := func(ctx context.Context, addr, method string, body []byte) ([]byte, error) {
			node.ticks.Add(1)
			return m.Call(ctx, addr, method, body)
		}
		node.pulse = New(string(node.id), call, Period(pulseHB), pulseHB, time.Now)
		t.Cleanup(node.pulse.Stop)
		m.Handle(func(_ context.Context, method string, body []byte) ([]byte, error) {
			return node.pulse.Answer(body)
		})
		pc.nodes = append(pc.nodes, node)
		servers = append(servers, raft.Server{ID: node.id, Address: raft.ServerAddress(m.Advertise())})
	}
	for _, g := range groups {
		for _, node := range pc.nodes {
			node.store[g] = raft.NewInmemStore()
			pc.start(t, node, g)
			if err := node.rafts[g].BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
				t.Fatalf("bootstrap group %d on %s: %v", g, node.id, err)
			}
		}
	}
	return pc
}

// start starts node's replica of group g over its stores.
func (pc *pulseCluster) start(t *testing.T, node *pulseNode, g uint32) {
	conf := raft.DefaultConfig()
	conf.LocalID = node.id
	conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = pulseHB, pulseHB, pulseLease
	conf.CommitTimeout = 20 * time.Millisecond
	conf.Logger = hclog.NewNullLogger()
	trans := NewQuietTransport(NoPipeline{NetworkTransport: raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: node.mux.Stream(g), MaxPool: 3, Timeout: 2 * time.Second, Logger: hclog.NewNullLogger(),
	})}, g, node.pulse, Fresh(Period(pulseHB)))
	st := node.store[g]
	r, err := raft.NewRaft(conf, &raft.MockFSM{}, st, st, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatalf("raft for group %d on %s: %v", g, node.id, err)
	}
	t.Cleanup(func() { r.Shutdown().Error() })
	node.rafts[g] = r
}

// leader returns the node leading group g among nodes up, or nil.
func (pc *pulseCluster) leader(g uint32, up func(*pulseNode) bool) *pulseNode {
	for _, node := range pc.nodes {
		if up(node) && node.rafts[g].State() == raft.Leader {
			return node
		}
	}
	return nil
}

func everyNode(*pulseNode) bool { return true }

// apply applies data to group g through its leader, and finds the leader
// again when the lead moved meanwhile (a second election right after the
// first, on a machine loaded by the race detector: "leadership lost while
// committing log" failed a fresh-clone run so). The tests that use it are
// about what follows the write, not about the lead. It returns the node
// that applied it.
func (pc *pulseCluster) apply(t *testing.T, g uint32, data []byte) *pulseNode {
	t.Helper()
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(pulseHB / 10) {
		node := pc.leader(g, everyNode)
		if node == nil {
			continue
		}
		if err = node.rafts[g].Apply(data, time.Second).Error(); err == nil {
			return node
		}
		if !errors.Is(err, raft.ErrLeadershipLost) && !errors.Is(err, raft.ErrNotLeader) {
			t.Fatalf("apply to group %d: %v", g, err)
		}
	}
	t.Fatalf("apply to group %d: no leader took it within 10s (last: %v)", g, err)
	return nil
}

// waitLeaders waits until every group has a leader among the nodes up.
func (pc *pulseCluster) waitLeaders(t *testing.T, d time.Duration, up func(*pulseNode) bool) {
	t.Helper()
	testutil.WaitFor(t, d, "a leader in every group", func() bool {
		for _, g := range pc.groups {
			if pc.leader(g, up) == nil {
				return false
			}
		}
		return true
	})
}

// terms returns every replica's current term, by node and group.
func (pc *pulseCluster) terms() map[string]uint64 {
	out := map[string]uint64{}
	for _, node := range pc.nodes {
		for g, r := range node.rafts {
			out[fmt.Sprintf("%s/%d", node.id, g)] = r.CurrentTerm()
		}
	}
	return out
}

// TestPulseKeepsFollowersWhileLeadersLive: with every heartbeat carried by
// the pulse, idle groups elect no one while their leaders live, and each
// node sends at most about one tick per peer per period, whatever the
// number of groups.
func TestPulseKeepsFollowersWhileLeadersLive(t *testing.T) {
	groups := []uint32{0, 1, 2, 3, 4, 5, 6, 7}
	pc := newPulseCluster(t, 3, groups)
	pc.waitLeaders(t, 10*time.Second, everyNode)
	time.Sleep(2 * pulseHB) // the elections' aftermath
	before := pc.terms()
	var ticks [3]int64
	for i, node := range pc.nodes {
		ticks[i] = node.ticks.Load()
	}
	const idle = 30 * pulseHB
	time.Sleep(idle)
	if after := pc.terms(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("terms changed while every leader lived: before %v, after %v", before, after)
	}
	// Two peers, one tick each per period at most: 2*idle/period = 300;
	// raft's own heartbeats, per group and follower, would be ~16*300.
	limit := int64(2*idle/Period(pulseHB)) * 3 / 2
	for i, node := range pc.nodes {
		if n := node.ticks.Load() - ticks[i]; n > limit {
			t.Errorf("%s sent %d ticks in %v, more than %d", node.id, n, idle, limit)
		}
	}
}

// TestQuiescedGroupsElectWhenLeaderNodeDies: idle groups whose leaders'
// node loses its listener (its rafts still running, cut off) are led
// again by the others within a few heartbeat timeouts, and the cut-off
// leaders step down within a few leases.
func TestQuiescedGroupsElectWhenLeaderNodeDies(t *testing.T) {
	groups := []uint32{0, 1, 2, 3, 4, 5}
	pc := newPulseCluster(t, 3, groups)
	pc.waitLeaders(t, 10*time.Second, everyNode)
	for _, g := range groups { // a commit index to learn, then quiet
		pc.apply(t, g, []byte("x"))
	}
	time.Sleep(10 * pulseHB)
	victim := pc.leader(groups[0], everyNode)
	var led []uint32
	for _, g := range groups {
		if pc.leader(g, everyNode) == victim {
			led = append(led, g)
		}
	}
	start := time.Now()
	victim.mux.Close()
	alive := func(n *pulseNode) bool { return n != victim }
	pc.waitLeaders(t, 10*time.Second, alive)
	elected := time.Since(start)
	testutil.WaitFor(t, 10*time.Second, "the cut-off leaders to step down", func() bool {
		for _, g := range led {
			if victim.rafts[g].State() == raft.Leader {
				return false
			}
		}
		return true
	})
	steppedDown := time.Since(start)
	t.Logf("groups %v led again after %v; the cut-off leader stepped down after %v", led, elected, steppedDown)
	// Unloaded: ~2-4 heartbeat timeouts and ~2-3 leases. The bounds leave
	// room for a busy machine and the race detector.
	if elected > 20*pulseHB {
		t.Errorf("groups %v led again only after %v, want within %v", led, elected, 20*pulseHB)
	}
	if steppedDown > 20*pulseLease {
		t.Errorf("the cut-off leader stepped down only after %v, want within %v", steppedDown, 20*pulseLease)
	}
}

// TestRestartedFollowerLearnsCommitIndex: a follower replica that restarts
// in an idle group (its log kept, its commit index forgotten) is sent a
// real append, not answered for by the quiet transport, and applies the
// committed entries without a new write.
func TestRestartedFollowerLearnsCommitIndex(t *testing.T) {
	const g = 3
	pc := newPulseCluster(t, 3, []uint32{g})
	pc.waitLeaders(t, 10*time.Second, everyNode)
	var lead *pulseNode
	for i := range 5 {
		lead = pc.apply(t, g, fmt.Appendf(nil, "e%d", i))
	}
	want := lead.rafts[g].AppliedIndex()
	var follower *pulseNode
	for _, node := range pc.nodes {
		if node != lead {
			follower = node
		}
	}
	testutil.WaitFor(t, 5*time.Second, "the follower to apply the entries", func() bool {
		return follower.rafts[g].AppliedIndex() >= want
	})
	time.Sleep(10 * pulseHB) // idle: the leader's empty appends are answered locally
	if err := follower.rafts[g].Shutdown().Error(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	pc.start(t, follower, g)
	testutil.WaitFor(t, 20*pulseHB, fmt.Sprintf("the restarted follower to apply up to %d", want), func() bool {
		return follower.rafts[g].AppliedIndex() >= want
	})
}

// TestBeatsWireRoundTrip: a tick's body and answer parse back, and bodies
// cut short or with trailing bytes are refused, never half-read.
func TestBeatsWireRoundTrip(t *testing.T) {
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: 3, ID: []byte("n1"), Addr: []byte("127.0.0.1:1")},
		Term: 7, Leader: []byte("127.0.0.1:1")}
	p := New("n1", nil, time.Millisecond, time.Second, time.Now)
	var heard string
	p.Mark = func() uint64 { return 42 }
	p.Marked = func(node string, m uint64) { heard = fmt.Sprintf("%s=%d", node, m) }
	body := encodeBeats(p.appendMark(nil), []*beat{{group: 5, req: req}, {group: 0, req: req}})
	d := wire.Decoder{B: body}
	p.readMark(&d)
	got, err := decodeBeats(&d)
	if err != nil || len(got) != 2 || got[0].group != 5 || got[1].group != 0 || heard != "n1=42" {
		t.Fatalf("decoded %+v, %v, mark %q", got, err, heard)
	}
	if r := got[0].req; r.Term != 7 || string(r.ID) != "n1" || string(r.Addr) != "127.0.0.1:1" || r.ProtocolVersion != 3 || !isHeartbeat(r) {
		t.Errorf("request %+v, want %+v", r, req)
	}
	for cut := range body {
		d := wire.Decoder{B: body[:cut]}
		p.readMark(&d)
		if _, err := decodeBeats(&d); err == nil {
			t.Errorf("a body cut to %d of %d bytes parsed", cut, len(body))
		}
	}
	d = wire.Decoder{B: append(body, 0)}
	p.readMark(&d)
	if _, err := decodeBeats(&d); err == nil {
		t.Error("a body with a trailing byte parsed")
	}
}

// TestFreshHeartbeatAnsweredLocally: a heartbeat waits for its tick until
// the follower answered one; while that answer came with a tick sent
// within fresh, the next heartbeats are answered at once with it (even
// while the follower's answers are held up) and still travel with the
// next tick; once it is older than fresh, or the follower refused a
// heartbeat (a newer term), the next one waits for its tick again and gets
// the follower's own answer.
func TestFreshHeartbeatAnsweredLocally(t *testing.T) {
	const group, fresh = 4, 300 * time.Millisecond
	var now atomic.Int64 // the leader's clock, in ns; the test moves it
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	now.Store(time.Unix(1000, 0).UnixNano())

	follower := New("n2", nil, time.Millisecond, time.Second, time.Now)
	var term atomic.Uint64 // the follower's term: it refuses older heartbeats
	term.Store(5)
	follower.serve(group, func(rpc raft.RPC) {
		req := rpc.Command.(*raft.AppendEntriesRequest)
		rpc.Respond(&raft.AppendEntriesResponse{Term: term.Load(), LastLog: 9, Success: req.Term >= term.Load()}, nil)
	})
	var calls atomic.Int64
	var gate atomic.Pointer[chan struct{}] // while set, the follower's answers wait for it to close
	call := func(_ context.Context, _, _ string, body []byte) ([]byte, error) {
		if ch := gate.Load(); ch != nil {
			<-*ch
		}
		calls.Add(1)
		return follower.Answer(body)
	}
	leader := New("n1", call, time.Millisecond, time.Second, clock)
	t.Cleanup(leader.Stop)
	qt := NewQuietTransport(NoPipeline{}, group, leader, fresh)
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("n1"), Addr: []byte("n1")}, Term: 5}
	// beat sends a heartbeat while the follower's answers are held up;
	// local says whether it must be answered before they are let through.
	beat := func(step string, local bool) raft.AppendEntriesResponse {
		t.Helper()
		ch := make(chan struct{})
		gate.Store(&ch)
		release := sync.OnceFunc(func() { gate.Store(nil); close(ch) })
		defer release()
		var resp raft.AppendEntriesResponse
		done := make(chan error, 1)
		go func() { done <- qt.AppendEntries("n2", "n2", req, &resp) }()
		wait := 5 * time.Second
		if !local {
			wait = 50 * time.Millisecond
		}
		select {
		case err := <-done:
			if !local {
				t.Fatalf("%s: answered while the follower's answers were held up: %+v, %v", step, resp, err)
			}
			if err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			return resp
		case <-time.After(wait):
			if local {
				t.Fatalf("%s: not answered within %v while the follower's answers were held up", step, wait)
			}
		}
		release()
		if err := <-done; err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return resp
	}

	if resp := beat("first heartbeat", false); !resp.Success || resp.Term != 5 {
		t.Fatalf("first heartbeat: %+v, want the follower's acceptance", resp)
	}
	now.Add(int64(fresh / 2))
	before := calls.Load()
	if resp := beat("fresh heartbeat", true); !resp.Success || resp.Term != 5 || resp.LastLog != 9 {
		t.Fatalf("fresh heartbeat: %+v, want the last answer", resp)
	}
	testutil.WaitFor(t, 5*time.Second, "the fresh heartbeat to go with a tick", func() bool { return calls.Load() > before })

	now.Add(int64(2 * fresh)) // the last tick was sent longer than fresh ago
	if resp := beat("stale heartbeat", false); !resp.Success || resp.Term != 5 {
		t.Fatalf("stale heartbeat: %+v, want the follower's acceptance", resp)
	}

	term.Store(6) // the follower moved on: the next tick's answer refuses
	now.Add(int64(fresh / 3))
	if resp := beat("heartbeat before the refusal is known", true); !resp.Success || resp.Term != 5 {
		t.Fatalf("heartbeat before the refusal is known: %+v, want the last answer", resp)
	}
	testutil.WaitFor(t, 5*time.Second, "the posted heartbeat's refusal", func() bool {
		_, ok := leader.seen("n2", group)
		return !ok
	})
	if resp := beat("heartbeat after a refusal", false); resp.Success || resp.Term != 6 {
		t.Fatalf("heartbeat after a refusal: %+v, want the follower's refusal", resp)
	}
}
