package cluster

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/shards"
)

// group is this node's replica of one Raft group whose state is limiter
// state: a shards.Store, the FSM over it, and the raft instance. While the
// node leads the group and has applied every entry committed before its
// term (serving: see phase), checks run on the store and the applier writes the store's
// journal into the group's log; otherwise the store follows the log.
type group struct {
	id     uint32
	store  *shards.Store
	fsm    *fsm
	raft   *raft.Raft
	logs   raft.LogStore
	snaps  raft.SnapshotStore
	notify chan bool // raft's NotifyCh
	log    *slog.Logger

	// standalone: a one-voter group (Node). It never loses the lead to
	// another node, so a log that refuses writes is retried (applier.retry)
	// rather than handled as a lost lead.
	standalone bool

	// phase: serving, abandoned, handing over, deferring, and the lock
	// each check holds while it changes the store (phase.go).
	phase     phase
	snapBytes atomic.Int64 // size of the group's last snapshot

	// The applier's state of the group (applier.go); active and the
	// activation are guarded by applier.gate.
	active    bool
	inflight  chan pending  // flushed epochs on their way to the log, in order
	committed atomic.Uint64 // the last epoch whose changes in this group are committed
	loopDone  chan struct{} // closed when the commit loop has ended
	dirty     chan struct{} // an entry failed: give up the state and take it again
	stop      chan struct{} // closed when the replica is dropped
	watched   chan struct{} // closed when the watcher has ended
	// lastLeader is the other node last seen leading the group; expected
	// is when (Unix ns) a node last said it would hand this node the lead
	// (callExpect): a lead taken otherwise was taken from a lost
	// leader (see Cluster.Takeover); expectedTerm is the group's raft
	// term then, which the transfer's election raises (see awaited).
	lastLeader   atomic.Pointer[string]
	expected     atomic.Int64
	expectedTerm atomic.Uint64
	// waitLong: the replica runs with the long heartbeat timeout of a
	// leader, or a follower that hears its leader (Cluster.paceReplica);
	// poke wakes its watcher (wake).
	waitLong atomic.Bool
	poke     chan struct{}
}

// awaited reports whether a hand-over of g's lead to this node that it
// accepted (callExpect) less than handOffTimeout ago may still land: this
// node does not lead g, and raft has held no election since, or this node
// is a candidate in one (the transfer's own election, under way). The
// node that hands it over gives up within handOffTimeout of asking.
func (g *group) awaited(now time.Time) bool {
	at := g.expected.Load()
	if at == 0 || now.Sub(time.Unix(0, at)) >= handOffTimeout {
		return false
	}
	switch g.raft.State() {
	case raft.Leader:
		return false // landed: it is led here
	case raft.Candidate:
		return true
	}
	return g.raft.CurrentTerm() == g.expectedTerm.Load()
}

// wake has g's watcher look at once.
func (g *group) wake() {
	select {
	case g.poke <- struct{}{}:
	default:
	}
}

// newGroup returns a group over store and its storage; start it with
// startRaft.
func newGroup(id uint32, store *shards.Store, logs raft.LogStore, snaps raft.SnapshotStore, log *slog.Logger) *group {
	store.EnableJournal()
	return &group{
		id: id, store: store, logs: logs, snaps: snaps, log: log,
		fsm:    &fsm{store: store},
		notify: make(chan bool, notifyDepth),
		dirty:  make(chan struct{}, 1),
		poke:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
	}
}

// notifyDepth is the buffer of a group's notify channel. Raft sends on it
// from its main loop, and waits while it is full: on leaving the lead, in
// runLeader's deferred function. The watcher, its only reader, may itself
// wait on raft meanwhile — handOff on a leadership transfer, stepUp on a
// barrier — and a transfer queued just after the leader loop ended is
// answered (ErrNotLeader) only once the main loop is past that send. With
// a buffer of one, an earlier notification not yet read made that a
// deadlock: the watcher waited on the transfer, raft on the watcher, and
// every RPC to the group waited on raft (seen twice on a loaded machine,
// TestClusterRoutesAndConverges hung in Close for 23 minutes with 20,000
// goroutines in raft's handleCommand). Raft can change the lead only a few
// times before such a wait ends; the watcher reads every notification as a
// mere wake-up, so a deeper buffer costs nothing.
const notifyDepth = 16

// startRaft creates the group's raft instance with conf over the group's
// storage and trans. A group of a cluster hears of its leadership changes
// on notify (NotifyCh, which raft sends to and waits on: its watcher must
// read it); a standalone group has no one to lose the lead to.
func (g *group) startRaft(conf *raft.Config, stable raft.StableStore, trans raft.Transport) error {
	if !g.standalone {
		conf.NotifyCh = g.notify
	}
	r, err := raft.NewRaft(conf, g.fsm, g.logs, stable, g.snaps, trans)
	if err != nil {
		return fmt.Errorf("group %d: start raft: %w", g.id, err)
	}
	g.raft = r
	return nil
}

// errNotLeading is the barrier's error when the lead moved meanwhile.
var errNotLeading = errors.New("cluster: no longer the group's leader")

// catchUp waits until every entry committed before the node's term is
// applied (a barrier), then draws the origin that marks the entries the
// node writes from now on, which the FSM skips.
func (g *group) catchUp(timeout time.Duration) error {
	if err := g.raft.Barrier(timeout).Error(); err != nil {
		return fmt.Errorf("group %d: apply the log before leading: %w", g.id, err)
	}
	if g.raft.State() != raft.Leader {
		return errNotLeading
	}
	g.fsm.origin.Store(randomOrigin())
	return nil
}

// randomOrigin draws a number that marks entries of one term of leading.
func randomOrigin() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) | 1
}

// leader reports whether raft says this node leads the group.
func (g *group) leader() bool { return g.raft.State() == raft.Leader }

// giveUp stops g serving at once, because changes it made may not reach
// the log (an entry failed, a drain did not finish): no check changes its
// store, nor is acknowledged on its behalf, from the moment it returns;
// the watcher then rebuilds the store from the log (reconcile). Without
// it, checks made between the failure and the watcher's step down would be
// acknowledged in epochs the applier no longer waits for g in, and lost.
func (g *group) giveUp() {
	g.phase.giveUp()
	g.markDirty()
}

// markDirty asks the group's watcher to give up the state it holds (an
// entry it wrote failed) and take it again from the log.
func (g *group) markDirty() {
	select {
	case g.dirty <- struct{}{}:
	default:
	}
}
