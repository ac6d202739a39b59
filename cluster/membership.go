package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/cluster/datadir"
	"github.com/rlserver/rlserver/cluster/meta"
)

// Membership: a node joins a running cluster (Join, called on any member
// for the node that runs --join) or leaves it (Leave). Both change the
// meta group's record of the members, which places the data groups anew
// over the members that are not leaving (placement). Then every node's
// reconciler moves the groups to match, one change at a time per group and
// tick, without stopping service:
//
//   - a node that a group is placed on and that has no replica of it
//     starts one, empty, which waits to be added;
//   - the group's leader adds a missing node as a non-voter (raft sends it
//     a snapshot and the log), promotes it to voter once it has applied the
//     log to within a few entries, then removes the voters no longer placed
//     on it; a leader that is itself to be removed first hands its lead
//     to a node that stays (handOff: nothing acknowledged is forgotten);
//   - a node that a group is no longer placed on, and that the group's
//     leader no longer counts among its servers, drops its replica and the
//     replica's data;
//   - the meta leader forgets a leaving node once no group counts it among
//     its servers, and removes it from the meta group.
//
// Rules and counters are never lost: a group changes its voters one at a
// time, each change committed by a majority of the voters before it.

// maxMetaVoters bounds the meta group's voters; further members follow it
// as non-voters.
const maxMetaVoters = 5

// joinReq and leaveReq are the bodies of callMetaJoin and callMetaLeave.
type joinReq struct {
	Node NodeInfo `json:"node"`
}

type leaveReq struct {
	ID string `json:"id"`
}

// onMetaLeader runs a membership change on the meta group's leader (see
// onMetaLeaderOnce), trying again while the meta group changes leaders
// (its refusals all begin with TRYAGAIN; a join or a leave made twice
// changes nothing more) until ctx ends or membershipRetry passes.
func (c *Cluster) onMetaLeader(ctx context.Context, local func() error,
	remote func(ctx context.Context, addr string) (metaReply, error)) error {
	deadline := time.Now().Add(membershipRetry)
	for {
		err := c.onMetaLeaderOnce(ctx, local, remote)
		if err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN") || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// membershipRetry bounds how long a join or a leave is tried again while
// the meta group changes leaders.
const membershipRetry = 5 * time.Second

// onMetaLeaderOnce runs a membership change on the meta group's leader:
// here (local) if this node leads it, else over the transport (remote);
// then waits until this node has applied the meta index the leader
// reached.
func (c *Cluster) onMetaLeaderOnce(ctx context.Context, local func() error,
	remote func(ctx context.Context, addr string) (metaReply, error)) error {
	if c.metaR.State() == raft.Leader {
		return local()
	}
	addr, _ := c.metaR.LeaderWithID()
	if addr == "" {
		return errors.New("TRYAGAIN the cluster's meta group has no leader yet")
	}
	cctx, cancel := context.WithTimeout(ctx, 2*rpcTimeout)
	defer cancel()
	rep, err := remote(cctx, string(addr))
	var bad *badReply
	if errors.As(err, &bad) {
		return nil // the change was made; its answer says nothing to wait for
	}
	if err != nil {
		return remoteErr(err)
	}
	for c.meta.Applied() < rep.Index && cctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	return nil
}

// handleMembership answers callMetaJoin and callMetaLeave on the meta
// leader.
func (c *Cluster) handleMembership(ctx context.Context, method string, body []byte) ([]byte, error) {
	if c.metaR.State() != raft.Leader {
		return nil, errNotMetaLeader
	}
	var rep metaReply
	var err error
	switch method {
	case callMetaJoin:
		var req joinReq
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, err
		}
		rep, err = c.joinMeta(ctx, req)
	case callMetaLeave:
		var req leaveReq
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, err
		}
		rep, err = c.leaveMeta(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(rep)
}

// errNotMetaLeader refuses a membership change on a node that no longer
// leads the meta group.
var errNotMetaLeader = errors.New("TRYAGAIN this node no longer leads the meta group")

// joinMeta adds req.Node to the meta group and records it, on the meta leader.
func (c *Cluster) joinMeta(ctx context.Context, req joinReq) (metaReply, error) {
	if c.metaR.State() != raft.Leader {
		return metaReply{}, errNotMetaLeader
	}
	if err := c.addMetaServer(req.Node); err != nil {
		return metaReply{}, err
	}
	return c.applyMembership(ctx, meta.Cmd{Op: "join", Node: &req.Node})
}

// leaveMeta records that node req.ID leaves, on the meta leader.
func (c *Cluster) leaveMeta(ctx context.Context, req leaveReq) (metaReply, error) {
	if c.metaR.State() != raft.Leader {
		return metaReply{}, errNotMetaLeader
	}
	return c.applyMembership(ctx, meta.Cmd{Op: "leave", ID: req.ID})
}

// applyMembership applies a membership command through the meta group
// and returns its result and the meta index after it.
func (c *Cluster) applyMembership(ctx context.Context, cmd meta.Cmd) (metaReply, error) {
	b, _ := json.Marshal(cmd)
	res, err := c.metaApply(ctx, b)
	if err == nil && res.Err != "" {
		err = errors.New(res.Err)
	}
	if err != nil {
		return metaReply{}, err
	}
	return metaReply{Result: res, Index: c.meta.Applied()}, nil
}

// addMetaServer adds n to the meta group: as a voter while it has fewer
// than maxMetaVoters, else as a non-voter. A member already there stays as
// it is (a node that joins again after a restart).
func (c *Cluster) addMetaServer(n NodeInfo) error {
	f := c.metaR.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	voters := 0
	for _, s := range f.Configuration().Servers {
		if s.ID == raft.ServerID(n.ID) {
			return nil
		}
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	var fut raft.IndexFuture
	if voters < maxMetaVoters {
		fut = c.metaR.AddVoter(raft.ServerID(n.ID), raft.ServerAddress(n.Raft), 0, rpcTimeout)
	} else {
		fut = c.metaR.AddNonvoter(raft.ServerID(n.ID), raft.ServerAddress(n.Raft), 0, rpcTimeout)
	}
	if err := fut.Error(); err != nil {
		return fmt.Errorf("TRYAGAIN adding %s to the meta group: %v", n.ID, err)
	}
	return nil
}

// reconcile moves this node's groups toward the meta group's placement,
// every half second.
func (c *Cluster) reconcileLoop() {
	c.every(500*time.Millisecond, func() {
		m := c.meta.Current()
		if m.Groups == 0 || len(m.Placement) == 0 {
			return
		}
		for g := 1; g <= m.Groups; g++ {
			placed := slices.Contains(m.Placement[g], c.cfg.NodeID)
			grp := c.replica(g)
			switch {
			case grp == nil && placed:
				if err := c.addReplica(g); err != nil {
					c.log.Warn("starting a replica of a group placed here failed", "group", g, "err", err)
				}
			case grp == nil:
			case grp.phase.serving():
				c.adjustVoters(grp, m)
			case !placed:
				c.maybeDropReplica(grp)
			}
		}
		if c.metaR.State() == raft.Leader {
			c.forgetLeft(m)
		}
		c.noteLeft(m)
	})
}

// noteLeft (run by reconcileLoop alone) says once, when this node has left the cluster (it is leaving
// or forgotten in the meta state it knows, and hosts no group any more),
// what it is and what to do, and from then on silences raft's chatter:
// a node removed from the meta group never hears a leader again, so its
// raft times out and calls an election every heartbeat timeout, for as
// long as it runs. A node that joins again is heard from again.
func (c *Cluster) noteLeft(m *meta.State) {
	me, member := m.Nodes[c.cfg.NodeID]
	if member && !me.Leaving {
		c.wasMember = true
	}
	// Not a member: a node that joins is added to the meta group (and
	// learns its state) before its join is applied; only a node that was
	// one has left.
	left := (member && me.Leaving || !member && c.wasMember) && !c.hostsAny(m.Groups)
	if c.peerLog.left.Swap(left) || !left {
		return
	}
	c.log.Warn("this node has left the cluster: it holds no group, serves no key and no group will be placed on it; "+
		"stop it (to join a cluster again, start it on an empty --data-dir with --join). "+
		"Raft's election messages are no longer logged", "node_id", c.cfg.NodeID)
}

// hostsAny reports whether this node runs a replica of any of groups 1..n.
func (c *Cluster) hostsAny(n int) bool {
	for g := 1; g <= n; g++ {
		if c.replica(g) != nil {
			return true
		}
	}
	return false
}

// adjustVoters makes one change to the servers of group g, which this node
// leads, toward the voters placed on it: add a missing node as a
// non-voter, promote a non-voter that caught up, hand the lead away if this
// node is to leave the group, or remove a server that is not placed.
func (c *Cluster) adjustVoters(g *group, m *meta.State) {
	want := m.Placement[int(g.id)]
	f := g.raft.GetConfiguration()
	if f.Error() != nil || len(want) == 0 {
		return
	}
	servers := f.Configuration().Servers
	has := map[string]raft.ServerSuffrage{}
	for _, s := range servers {
		has[string(s.ID)] = s.Suffrage
	}
	for _, id := range want {
		if _, ok := has[id]; !ok {
			c.configChange(g, "add a non-voter", id, g.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(m.Nodes[id].Raft), 0, rpcTimeout))
			return
		}
	}
	for _, id := range want {
		if has[id] == raft.Nonvoter && c.caughtUp(id, g) {
			c.configChange(g, "promote to voter", id, g.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(m.Nodes[id].Raft), 0, rpcTimeout))
			return
		}
	}
	for _, s := range servers {
		id := string(s.ID)
		if slices.Contains(want, id) {
			continue
		}
		if s.Suffrage == raft.Voter && !c.allVoters(want, has) {
			return // remove voters only once every placed node votes
		}
		if id == c.cfg.NodeID {
			c.handOff(g, want[0], m.Nodes[want[0]].Raft)
			return
		}
		c.configChange(g, "remove", id, g.raft.RemoveServer(raft.ServerID(id), 0, rpcTimeout))
		return
	}
}

func (c *Cluster) allVoters(want []string, has map[string]raft.ServerSuffrage) bool {
	for _, id := range want {
		if s, ok := has[id]; !ok || s != raft.Voter {
			return false
		}
	}
	return true
}

// configChange waits for a change of g's servers and logs it.
func (c *Cluster) configChange(g *group, what, id string, f raft.IndexFuture) {
	if err := f.Error(); err != nil {
		c.log.Warn("changing a group's servers failed", "group", g.id, "change", what, "node", id, "err", err)
		return
	}
	c.log.Info("group servers changed", "group", g.id, "change", what, "node", id)
}

// maybeDropReplica drops this node's replica of g, which is no longer
// placed here, once a node that leads g no longer counts this node among
// g's servers (this node's own raft may not know who leads g any more: a
// removed server hears from no leader).
func (c *Cluster) maybeDropReplica(g *group) {
	c.peers.mu.Lock()
	drop := false
	for _, p := range c.peers.byID {
		if !p.connected() {
			continue
		}
		for _, gs := range p.status.Groups {
			if gs.ID == int(g.id) && gs.State == "Leader" && gs.Servers != nil && !slices.Contains(gs.Servers, c.cfg.NodeID) {
				drop = true
			}
		}
	}
	c.peers.mu.Unlock()
	if drop {
		c.dropReplica(g)
	}
}

// forgetLeft removes from the meta group the leaving nodes that no group
// counts among its servers any more (the meta leader runs it).
func (c *Cluster) forgetLeft(m *meta.State) {
	for id, n := range m.Nodes {
		if !n.Leaving || c.inSomeGroup(id, m.Groups) {
			continue
		}
		if err := c.metaR.RemoveServer(raft.ServerID(id), 0, rpcTimeout).Error(); err != nil {
			c.log.Warn("removing a node that left from the meta group failed", "node", id, "err", err)
			continue
		}
		b, _ := json.Marshal(meta.Cmd{Op: "forget", ID: id})
		ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		c.metaApply(ctx, b)
		cancel()
		c.log.Info("a node left the cluster", "node", id)
	}
}

// inSomeGroup reports whether any group's leader counts node id among its
// servers, or whether that is unknown for some group.
func (c *Cluster) inSomeGroup(id string, groups int) bool {
	for g := 1; g <= groups; g++ {
		servers, ok := c.groupServers(g)
		if !ok || slices.Contains(servers, id) {
			return true
		}
	}
	return false
}

// groupServers returns the servers of group g as its leader reports them.
func (c *Cluster) groupServers(g int) ([]string, bool) {
	if grp := c.replica(g); grp != nil && grp.leader() {
		return configServers(grp), true
	}
	leader := c.leaderOf(g)
	p := c.peer(leader)
	if leader == "" || !p.connected() {
		return nil, false
	}
	for _, gs := range p.status.Groups {
		if gs.ID == g && gs.State == "Leader" && gs.Servers != nil {
			return gs.Servers, true
		}
	}
	return nil, false
}

// configServers returns the ids of g's servers in its latest configuration.
func configServers(g *group) []string {
	f := g.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	out := []string{}
	for _, s := range f.Configuration().Servers {
		out = append(out, string(s.ID))
	}
	return out
}

// addReplica starts this node's replica of group id, empty: the group's
// leader adds it as a non-voter and sends it a snapshot and the log.
func (c *Cluster) addReplica(id int) error {
	st := c.cfg.Storage
	if err := st.DropGroup(uint32(id)); err != nil { // leftovers of an earlier replica
		return err
	}
	logs, snaps, err := st.GroupStorage(uint32(id), 1, c.log)
	if err != nil {
		return err
	}
	g := c.newDataGroup(uint32(id), logs, snaps)
	if err := g.startRaft(c.raftConfig(uint32(id)), logs, c.transport(uint32(id))); err != nil {
		return err
	}
	c.observe(g.raft)
	c.groups[id].Store(g)
	c.startWatch(g)
	c.log.Info("replica started; waiting for the group's leader to add it", "group", id)
	return c.saveHosted()
}

// dropReplica stops this node's replica of g and deletes its data, once
// its watcher has ended (it may be rebuilding the state from that data).
func (c *Cluster) dropReplica(g *group) {
	close(g.stop)
	c.groups[g.id].Store(nil)
	<-g.watched
	g.raft.Shutdown().Error()
	if err := c.cfg.Storage.DropGroup(g.id); err != nil {
		c.log.Warn("deleting a dropped replica's data failed", "group", g.id, "err", err)
	}
	c.log.Info("replica dropped: the group moved to other nodes", "group", g.id)
	if err := c.saveHosted(); err != nil {
		c.log.Warn("recording the groups hosted here failed", "err", err)
	}
}

// saveHosted records the groups this node hosts in its data directory.
func (c *Cluster) saveHosted() error {
	c.layoutMu.Lock()
	defer c.layoutMu.Unlock()
	l := Layout{Version: datadir.LayoutVersion, Groups: c.numGroups(), Peers: c.initial, Bootstrapped: true}
	for _, g := range c.hostedGroups() {
		l.Hosted = append(l.Hosted, g.id)
	}
	return c.cfg.Storage.SaveLayout(l)
}

// handOff hands the lead of g to node id at addr (any voter if id is
// ""): it stops serving g, waits until every change it made is committed,
// asks raft to transfer the lead (which first brings the target up to
// date), and waits until the new leader serves g. Meanwhile the commands
// of g's slots are held here (ErrMoving), so a client is sent to the new
// leader (MOVED) only once it serves: a planned move shows no error.
// Nothing acknowledged is forgotten, in fast mode too. If the transfer
// fails, the node serves g again while it still leads.
func (c *Cluster) handOff(g *group, id, addr string) {
	if !g.phase.beginHandOff() {
		return
	}
	defer func() {
		g.phase.endHandOff()
		if g.phase.abandoned() {
			g.markDirty() // the watcher left the group to handOff meanwhile
		}
		c.topoChanged()
	}()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), handOffTimeout)
	defer cancel()
	if id == "" {
		if id, addr = c.successor(g); id == "" {
			// No voter answers that takes clients and is not stopping
			// (the others are stopping too, or down): a transfer would
			// only make a node that cannot serve lead.
			c.log.Info("no node to hand the group's lead to; it stays here until this node stops", "group", g.id)
			return
		}
	}
	// Ask the target first: it must be up, take clients, not be stopping,
	// and have applied the log to within a few entries. A status a peer
	// sent before it died is no reason to stop serving a group.
	if err := c.rpc.expect(ctx, addr, readyReq{Group: int(g.id), Index: g.fsm.applied.Load()}); err != nil {
		c.log.Info("not handing the group's lead over: the target cannot take it now", "group", g.id, "to", id, "err", err)
		return
	}
	c.stopServing(g)
	if c.app.isActive(g) {
		err := c.app.drain(g, ctx.Done())
		c.app.deactivate(g, err == nil)
		if err != nil {
			c.log.Warn("the changes of a group could not be committed before handing over its lead", "group", g.id, "err", err)
			g.giveUp() // the watcher rebuilds the state once handOff is done (see the deferred call)
			return
		}
	}
	g.fsm.resetOrigin()
	f := g.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(addr))
	if err := f.Error(); err != nil {
		c.log.Warn("leadership transfer failed; serving the group again", "group", g.id, "to", id, "err", err)
		if g.leader() && !c.stopping.Load() {
			c.stepUp(g)
		}
		return
	}
	to, err := c.awaitServed(ctx, g, id)
	if err != nil {
		c.log.Warn("the group's new leader did not say it serves the group in time", "group", g.id, "to", to, "err", err)
	}
	c.log.Info("lead handed over", "group", g.id, "to", to, "took", time.Since(start).Round(time.Millisecond))
}

// successor returns the voter of g to hand its lead to: one that answers,
// takes clients and is not stopping, the most caught up of them, its
// preferred leader first among equals; or "" (raft then picks).
func (c *Cluster) successor(g *group) (id, addr string) {
	f := g.raft.GetConfiguration()
	if f.Error() != nil {
		return "", ""
	}
	preferred := ""
	if voters := c.placement()[int(g.id)]; len(voters) > 0 {
		preferred = voters[0]
	}
	var best uint64
	for _, s := range f.Configuration().Servers {
		sid := string(s.ID)
		if s.Suffrage != raft.Voter || sid == c.cfg.NodeID || !c.caughtUp(sid, g) {
			continue
		}
		applied := c.appliedBy(sid, g)
		if id == "" || applied > best || applied == best && sid == preferred {
			id, addr, best = sid, string(s.Address), applied
		}
	}
	return id, addr
}

// appliedBy returns the index of group g's log that node id last said it
// has applied.
func (c *Cluster) appliedBy(id string, g *group) uint64 {
	if p := c.peer(id); p != nil {
		for _, gs := range p.status.Groups {
			if gs.ID == int(g.id) {
				return gs.Applied
			}
		}
	}
	return 0
}

// handOffTimeout bounds a hand-over, so that the commands it holds are
// answered within MaxHold.
const handOffTimeout = MaxHold - 500*time.Millisecond

// awaitServed waits until node id (or, for "", whichever node raft says
// leads g now) serves g, asking it (callReady), and returns it.
func (c *Cluster) awaitServed(ctx context.Context, g *group, id string) (string, error) {
	req := readyReq{Group: int(g.id)}
	for {
		to := id
		if to == "" {
			_, l := g.raft.LeaderWithID()
			to = string(l)
		}
		var err error
		if addr := c.raftAddrOf(to); to != "" && to != c.cfg.NodeID && addr != "" {
			if err = c.rpc.ready(ctx, addr, req); err == nil {
				return to, nil
			}
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return to, err
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// readyReq is the body of callReady, which returns once the callee
// serves Group (or fails with ErrMoving at the caller's deadline), and of
// callExpect, which the callee accepts if it may take Group's lead now: it
// takes clients, is not stopping, and has applied Group's log to within
// a few entries of Index, the caller's applied index (see expectLead).
type readyReq struct {
	Group int    `json:"group"`
	Index uint64 `json:"index,omitempty"`
}

// expectLead answers callExpect: it refuses a lead this node cannot take now,
// and otherwise records that one is coming, so that taking it is not
// counted as a takeover from a lost leader (noteTakeover).
func (c *Cluster) expectLead(req readyReq) error {
	g := c.replica(req.Group)
	switch {
	case g == nil:
		return fmt.Errorf("ERR this node has no replica of group %d", req.Group)
	case !c.accepting.Load() || c.stopping.Load():
		return errors.New("ERR this node does not take leads now (starting or stopping)")
	case c.diskLow():
		return errors.New("ERR this node's disk refuses state changes: it takes no lead")
	case g.fsm.applied.Load()+64 < req.Index:
		return fmt.Errorf("ERR this node has applied group %d's log to %d, behind %d", req.Group, g.fsm.applied.Load(), req.Index)
	}
	g.expectedTerm.Store(g.raft.CurrentTerm())
	g.expected.Store(time.Now().UnixNano())
	return nil
}

// awaitReady answers callReady.
func (c *Cluster) awaitReady(ctx context.Context, req readyReq) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(handOffTimeout)
	}
	for {
		if g := c.replica(req.Group); g != nil && g.phase.serving() {
			return nil
		}
		if !c.Await(deadline) {
			return ErrMoving
		}
	}
}
