package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rlserver/rlserver/cluster/meta"
)

// startBackground starts the node's goroutines: a watcher per hosted
// group, the meta group's registration of this node, the status poller,
// the leader balancer and the snapshot checker.
func (c *Cluster) startBackground() {
	for _, g := range c.hostedGroups() {
		c.startWatch(g)
	}
	c.goLoop(c.watchLeaders)
	c.goLoop(c.register)
	c.goLoop(c.reconcileLoop)
	c.goLoop(c.poll)
	c.goLoop(c.balance)
	c.goLoop(c.snapshots)
	c.goLoop(c.pace)
}

// every runs fn every d until the cluster shuts down.
func (c *Cluster) every(d time.Duration, fn func()) { every(c.shutdownCh, d, fn) }

// every runs fn every d until stop is closed.
func every(stop <-chan struct{}, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		fn()
	}
}

func (c *Cluster) goLoop(fn func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
}

// watch follows the leadership of group g: when this node becomes its
// leader, it applies every entry committed before (catchUp), then serves
// the group's slots (phase: serving) and flushes its journal (applier.activate);
// when it stops leading, or one of its entries failed, it stops serving
// them, gives up the entries not committed (applier.deactivate) and
// rebuilds the state from the log, which its memory may have run ahead
// of.
func (c *Cluster) watch(g *group) {
	every := c.cfg.HeartbeatTimeout
	if c.relaxed {
		every = watchEvery * c.cfg.HeartbeatTimeout // the pacer wakes it when it must look
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		dirty := false
		select {
		case <-c.shutdownCh:
			return
		case <-g.stop:
			return
		case <-g.notify:
		case <-g.dirty:
			dirty = true
		case <-g.poke:
		case <-t.C:
		}
		c.reconcile(g, dirty)
	}
}

// watchEvery is, in heartbeat timeouts, how often a fast-mode watcher
// looks without being woken (pace wakes it when it must).
const watchEvery = 20

// startWatch starts g's watcher; dropReplica waits for it to end
// (g.watched) before it deletes the replica's data.
func (c *Cluster) startWatch(g *group) {
	g.watched = make(chan struct{})
	c.goLoop(func() {
		defer close(g.watched)
		c.watch(g)
	})
}

// reconcile brings g's serving state in line with raft's. A node that is
// stopping serves nothing more: a lead it still holds, or wins, is handed
// over; so does a node whose disk refuses state changes (it could only
// answer MISCONF), if a node whose disk does not can take the lead.
func (c *Cluster) reconcile(g *group, dirty bool) {
	if g.phase.handingOff() {
		return // handOff decides
	}
	leading := g.leader()
	if abandoned := g.phase.takeAbandoned(); g.phase.serving() && (!leading || dirty) || abandoned {
		c.stepDown(g)
	}
	switch {
	case leading && (c.stopping.Load() || c.diskLow()):
		c.handOff(g, "", "")
	case leading && !g.phase.serving():
		c.stepUp(g)
	}
	c.noteLeader(g)
}

// serve makes g serve its slots here (phase.serve) and wakes the held
// commands to route again.
func (c *Cluster) serve(g *group) {
	g.phase.serve()
	c.topoChanged()
}

// stopServing stops g serving its slots here once the checks under way
// have ended (phase.stopServing): from its return no check changes g's
// store. Held commands are woken to route again.
func (c *Cluster) stopServing(g *group) {
	g.phase.stopServing()
	c.topoChanged()
}

// stepDown stops serving g and rebuilds its state from the log.
func (c *Cluster) stepDown(g *group) {
	c.stopServing(g)
	c.app.deactivate(g, false)
	start := time.Now()
	if err := g.fsm.rebuild(g.logs, g.snaps); err != nil {
		c.log.Error("rebuilding a group's state from its log failed", "group", g.id, "err", err)
		return
	}
	c.log.Info("no longer leading; state rebuilt from the log", "group", g.id, "keys", g.store.Len(),
		"took", time.Since(start).Round(time.Millisecond))
}

// stepUp makes g serve once its log is applied.
func (c *Cluster) stepUp(g *group) {
	if err := g.catchUp(10 * c.cfg.ElectionTimeout); err != nil {
		if !errors.Is(err, raft.ErrNotLeader) && !errors.Is(err, errNotLeading) && !errors.Is(err, raft.ErrLeadershipLost) {
			c.log.Warn("catching up before leading failed", "group", g.id, "err", err)
		}
		return
	}
	c.cfg.RaiseClock(g.fsm.lastNow.Load()) // never decide before what the group committed
	c.app.activate(g)
	c.serve(g)
	c.log.Debug("leading", "group", g.id)
	c.noteTakeover(g)
}

// noteTakeover records that this node took g's lead from a leader it lost
// (one that did not announce a hand-over), so that clients are told to
// reload their slot maps (Takeover).
func (c *Cluster) noteTakeover(g *group) {
	prev := g.lastLeader.Swap(nil)
	planned := time.Since(time.Unix(0, g.expected.Load())) < expectFor
	if prev == nil || *prev == c.cfg.NodeID || planned {
		return
	}
	c.takeoverAt.Store(time.Now().UnixNano())
	c.takeovers.Add(1)
	c.log.Info("took over a group whose leader was lost", "group", g.id, "from", *prev)
}

// expectFor is how long an announced hand-over (callExpect) makes the lead
// this node takes a planned one.
const expectFor = 5 * time.Second

// takeoverNudge is how long after a takeover clients are told of it.
const takeoverNudge = 10 * time.Second

// noteLeader records since when g has had no known leader; once it has
// one, a replica that deferred to the group's preferred leader at start
// (see deferTo) takes the usual timeouts.
func (c *Cluster) noteLeader(g *group) {
	_, id := g.raft.LeaderWithID()
	c.markLeader(int(g.id), c.leaderOf(int(g.id)) != "")
	if leader := string(id); leader != "" && leader != c.cfg.NodeID {
		g.lastLeader.Store(&leader)
	}
	if id != "" && g.phase.endDeferral() {
		rc := g.raft.ReloadableConfig()
		rc.HeartbeatTimeout, rc.ElectionTimeout = c.timing.heartbeat, c.timing.election
		if err := g.raft.ReloadConfig(rc); err != nil {
			c.log.Warn("restoring a group's election timeouts failed", "group", g.id, "err", err)
		}
		g.waitLong.Store(false)
	}
	c.paceReplica(g)
}

// paceReplica gives g's replica, in fast mode, the long heartbeat
// timeout while it leads, or follows leader and has heard it within
// staleAfter ticks, and the usual one (raftTimeouts) otherwise.
//
// A leader's heartbeats go once per tick (every 200 ms at the defaults),
// so a follower waiting the usual timeout (500 ms) would start an election
// after two late ticks; it waits long (1.5 s) while it hears its leader.
// The pacer (pace) checks every tick, and once the leader has been silent for
// staleAfter ticks the usual timeout comes back, which raft checks at once
// (a shorter HeartbeatTimeout resets a follower's timer): the follower
// starts an election then, at most one tick later than it would with the
// usual timeout. A leader with the long timeout heartbeats every 150 to 300
// ms, answered locally while the ticks come back (pulse.QuietTransport),
// well within its lease (500 ms). A replica deferring to its group's
// preferred leader keeps its deferred timeouts (noteLeader).
func (c *Cluster) paceReplica(g *group) {
	if g.standalone || g.phase.deferring() {
		return
	}
	c.paceRaft(g.raft, &g.waitLong, g.id)
}

// paceRaft is paceReplica for any of this node's rafts (the meta group's
// too); waitLong says whether it has the long timeout now.
func (c *Cluster) paceRaft(r *raft.Raft, waitLong *atomic.Bool, id uint32) {
	if !c.relaxed {
		return
	}
	long := false
	switch r.State() {
	case raft.Leader:
		long = true
	case raft.Follower:
		_, leader := r.LeaderWithID()
		long = leader != "" && time.Since(r.LastContact()) < staleAfter*c.tick
	}
	if waitLong.Load() == long {
		return
	}
	rc := r.ReloadableConfig()
	rc.HeartbeatTimeout, rc.ElectionTimeout = c.timing.heartbeat, c.timing.election
	if long { // raft wants an election timeout no shorter
		rc.HeartbeatTimeout = c.timing.long
		rc.ElectionTimeout = max(rc.ElectionTimeout, rc.HeartbeatTimeout)
	}
	if err := r.ReloadConfig(rc); err != nil {
		c.log.Warn("changing a replica's heartbeat timeout failed", "group", id, "err", err)
		return
	}
	waitLong.Store(long)
}

// staleAfter is how many ticks without its leader's heartbeat a follower
// waits before it takes the usual heartbeat timeout again.
const staleAfter = 3

// pace runs, in fast mode, every tick: it notes each replica's leader
// (noteLeader: since when a group has none, for CLUSTERDOWN, and the
// pace of its timeouts, paceReplica) and wakes the watcher of one whose
// serving state is not raft's, or which leads on a node that must hand
// its leads over, so that the watchers themselves need to look only every
// watchEvery.
func (c *Cluster) pace() {
	if !c.relaxed {
		return
	}
	c.every(c.tick, func() {
		handOver := c.stopping.Load() || c.diskLow()
		if c.metaR != nil {
			c.paceRaft(c.metaR, &c.metaWaitLong, metaGroup)
		}
		for _, g := range c.hostedGroups() {
			c.noteLeader(g) // the leader as raft knows it, and the pace
			leading := g.raft.State() == raft.Leader
			if leading != g.phase.serving() || leading && handOver || g.phase.abandoned() {
				g.wake()
			}
		}
	})
}

func (c *Cluster) markLeader(g int, has bool) {
	if has {
		c.leaderless[g].Store(0)
	} else {
		c.leaderless[g].CompareAndSwap(0, c.clock())
	}
}

// register records this node's addresses in the meta group (and, if it
// has none yet, the number of groups and their voters), retrying until it
// is done; a restart with other addresses records them again.
func (c *Cluster) register() {
	me := NodeInfo{ID: c.cfg.NodeID, Raft: c.cfg.RaftAdvertise, RESP: c.cfg.RESPAddr, HTTP: c.cfg.HTTPAddr}
	ids := make([]string, 0, len(c.initial))
	var peers []NodeInfo
	for _, p := range c.initial {
		ids = append(ids, p.ID)
		peers = append(peers, NodeInfo{ID: p.ID, Raft: p.Raft})
	}
	for {
		m := c.meta.Current()
		var cmd meta.Cmd
		switch {
		case m.Groups == 0 && len(ids) > 0:
			cmd = meta.Cmd{Op: "init", Groups: c.numGroups(), Placement: meta.Placement(ids, c.numGroups()), Peers: peers}
		case m.Groups == 0:
			cmd = meta.Cmd{} // a joining node: its join registers it
		case m.Nodes[me.ID].ID == "" || m.Nodes[me.ID].Leaving:
			return // not a member (any more), or leaving
		case m.Nodes[me.ID] != me:
			cmd = meta.Cmd{Op: "hello", Node: &me}
		default:
			return
		}
		if cmd.Op == "" {
			select {
			case <-c.shutdownCh:
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		b, _ := json.Marshal(cmd)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.metaApply(ctx, b)
		cancel()
		if err == nil {
			continue
		}
		select {
		case <-c.shutdownCh:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// snapshots takes a snapshot of each hosted group when fsm.snapshotDue
// says so (raft itself counts entries), checking every second.
func (c *Cluster) snapshots() {
	c.every(time.Second, func() {
		for _, g := range c.hostedGroups() {
			if g == nil {
				continue
			}
			if g.fsm.snapshotDue(c.cfg.SnapshotBytes, g.snapBytes.Load()) {
				if err := g.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
					c.log.Warn("snapshot failed", "group", g.id, "err", err)
				}
			}
		}
	})
}

// balance hands the lead of each group this node leads to the group's
// preferred leader (the first of its voters) when that node is connected
// and has applied the group's log up to within a few entries, so that
// leaders spread evenly over the nodes and come back to a node that
// returns after a failure. A group is moved at most every few seconds.
func (c *Cluster) balance() {
	last := map[uint32]time.Time{}
	c.every(2*time.Second, func() {
		place := c.placement()
		addrs := c.peerAddrs()
		for _, g := range c.hostedGroups() {
			if g == nil || !g.phase.serving() || time.Since(last[g.id]) < 5*time.Second {
				continue
			}
			voters := place[int(g.id)]
			if len(voters) == 0 || voters[0] == c.cfg.NodeID || !c.caughtUp(voters[0], g) {
				continue
			}
			last[g.id] = time.Now()
			c.log.Info("handing the lead to the group's preferred leader", "group", g.id, "to", voters[0])
			c.handOff(g, voters[0], addrs[voters[0]])
		}
	})
}

// caughtUp reports whether node id is connected, takes clients (its
// listener is open and it is not stopping), and has applied group g's log
// to within a few entries of this node: whether a lead may be handed to
// it.
func (c *Cluster) caughtUp(id string, g *group) bool {
	p := c.peer(id)
	if !p.connected() || !p.status.Accepting || p.status.Stopping || p.status.DiskLow {
		return false
	}
	for _, gs := range p.status.Groups {
		if gs.ID == int(g.id) {
			return gs.Applied+64 >= g.fsm.applied.Load()
		}
	}
	return false
}
