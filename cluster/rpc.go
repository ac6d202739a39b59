package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/cluster/meta"
	"github.com/rlserver/rlserver/cluster/pulse"
	"github.com/rlserver/rlserver/cluster/transport"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/shards"
)

// The nodes' internal calls, carried by the Raft listener (package
// transport). Every call's name is one of the constants below, the only
// place they are spelled; rpcClient (rpc_client.go) has one method per
// call, and handleRPC answers them. Bodies are JSON but for callPulse's:
//
//	status      statusReq (or no body) → nodeStatus: the groups this node
//	            hosts, who leads them, their applied index (and, asked
//	            with a digest time, the digest of their state then)
//	key         keyReq → keyReply: a keyed command forwarded to the node
//	            that serves its slot (proxy.go)
//	expect      readyReq: a hand-over of the group's lead to the callee is
//	            coming; refused if it cannot take it now (expectLead)
//	ready       readyReq: returns once the callee serves the group
//	            (awaitReady), or ErrMoving at the caller's deadline
//	hotkeys     hotKeysReq → []hotKeyWire: the node's own hot keys
//	            (see HotKeys)
//	meta.apply  a meta.Cmd → metaReply, applied by the meta leader
//	meta.join   joinReq → metaReply: add a node (Join), on the meta leader
//	meta.leave  leaveReq → metaReply: remove a node (Leave), on the meta
//	            leader
//	charge      chargeReq → chargeReply: a group's part of RL.CHECKRULES
//	refund      chargeReq: give a charge back (see CheckRules)
//	raft.hb     a tick of the sender's raft heartbeats to this node
//	            (binary, see package pulse), answered whatever the node's
//	            lifecycle: its rafts run from start to stop
//
// A handler's refusal that the caller should pass to a client is an error
// whose text is Redis's (MOVED, TRYAGAIN, CLUSTERDOWN).
const (
	callStatus    = "status"
	callKey       = "key"
	callExpect    = "expect"
	callReady     = "ready"
	callHotKeys   = "hotkeys"
	callMetaApply = "meta.apply"
	callMetaJoin  = "meta.join"
	callMetaLeave = "meta.leave"
	callCharge    = "charge"
	callRefund    = "refund"
	callPulse     = pulse.Method // "raft.hb", named by package pulse
)

// rpcTimeout bounds one internal call.
const rpcTimeout = 2 * time.Second

// handleRPC answers another node's internal call. Calls are admitted only
// while the node is open (lifecycle): never while its groups are being
// made or stopped.
func (c *Cluster) handleRPC(ctx context.Context, method string, body []byte) ([]byte, error) {
	if method == callPulse { // raft's, served whenever a raft runs here
		return c.pulse.Answer(body)
	}
	if err := c.life.enter(); err != nil {
		return nil, err
	}
	defer c.life.leave()
	switch method {
	case callStatus:
		var req statusReq
		if len(body) > 0 {
			if err := json.Unmarshal(body, &req); err != nil {
				return nil, err
			}
		}
		return json.Marshal(c.status(req.Digest))
	case callKey:
		var req keyReq
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, err
		}
		rep, err := c.runKey(ctx, req)
		if err != nil {
			return nil, err
		}
		return json.Marshal(rep)
	case callExpect: // a hand-over of the group to this node is coming
		var req readyReq
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, err
		}
		return nil, c.expectLead(req)
	case callReady:
		var req readyReq
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, err
		}
		return nil, c.awaitReady(ctx, req)
	case callHotKeys:
		return c.hotKeysRPC(body)
	case callMetaJoin, callMetaLeave:
		return c.handleMembership(ctx, method, body)
	case callMetaApply:
		res, err := c.metaApply(ctx, body)
		if err != nil {
			return nil, err
		}
		if hook := c.metaAnswered.Load(); hook != nil {
			(*hook)()
		}
		return json.Marshal(metaReply{Result: res, Index: c.meta.Applied()})
	case callCharge, callRefund:
		var req chargeReq
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, err
		}
		var rep chargeReply
		var err error
		if method == callRefund {
			err = c.refundLocal(req)
		} else {
			rep, err = c.chargeLocal(ctx, req)
		}
		if errors.Is(err, errNotServedHere) {
			err = ErrTryAgain
		}
		if err != nil || method == callRefund {
			return nil, err
		}
		return json.Marshal(rep)
	}
	return nil, fmt.Errorf("ERR unknown internal call %q", method)
}

type statusReq struct {
	Digest int64 `json:"digest,omitempty"` // 0: no digests; else the time to compute them at
}

// nodeStatus is what a node tells of itself.
type nodeStatus struct {
	ID     string        `json:"id"`
	Groups []groupStatus `json:"groups"`
	// Accepting: clients can reach the node (Listening); Stopping: it
	// hands its leads over and takes none (StepDown). Leads are handed
	// only to a node that accepts and is not stopping.
	Accepting bool `json:"accepting"`
	Stopping  bool `json:"stopping,omitempty"`
	// DiskLow: its disk refuses state changes; it takes no lead.
	DiskLow bool `json:"disk_low,omitempty"`
	// Mark: the node's status mark when it made this report (0 from a
	// node without marks); see statusMark.
	Mark uint64 `json:"mark,omitempty"`
}

// groupStatus is one hosted group as this node sees it.
type groupStatus struct {
	ID      int    `json:"id"`
	State   string `json:"state"`  // Leader, Follower, Candidate
	Leader  string `json:"leader"` // node id, "" if unknown
	Ready   bool   `json:"ready"`  // serving its slots here
	Term    uint64 `json:"term"`
	Applied uint64 `json:"applied"`
	LastNow int64  `json:"last_now"` // time of the last entry applied
	Keys    int    `json:"keys"`
	Digest  string `json:"digest,omitempty"`
	// Servers: the group's servers in its latest configuration, reported
	// by its leader (nil from a follower).
	Servers []string `json:"servers,omitempty"`
}

// status returns this node's groups; with at > 0, each with its state's
// digest at that time.
func (c *Cluster) status(at int64) nodeStatus {
	s := nodeStatus{ID: c.cfg.NodeID, Mark: c.computeMark(), Accepting: c.accepting.Load(), Stopping: c.stopping.Load(), DiskLow: c.diskLow()}
	for _, g := range c.hostedGroups() {
		if g == nil {
			continue
		}
		_, leader := g.raft.LeaderWithID()
		gs := groupStatus{ID: int(g.id), State: g.raft.State().String(), Leader: string(leader), Ready: g.phase.serving(),
			Term: g.raft.CurrentTerm(), Applied: g.fsm.applied.Load(), LastNow: g.fsm.lastNow.Load(), Keys: g.store.Len()}
		if at > 0 {
			gs.Digest = fmt.Sprintf("%016x", g.store.Digest(at))
		}
		if g.leader() {
			gs.Servers = configServers(g)
		}
		s.Groups = append(s.Groups, gs)
	}
	return s
}

// metaReply is the answer of meta.apply: the result and the meta index
// after it, which the caller waits for before it reads its own write.
type metaReply struct {
	Result meta.Result `json:"result"`
	Index  uint64      `json:"index"`
}

// metaApply applies a meta command through the meta group's leader, this
// node or another, and returns once this node has applied it too.
func (c *Cluster) metaApply(ctx context.Context, cmd []byte) (meta.Result, error) {
	if c.metaR.State() == raft.Leader {
		f := c.metaR.Apply(cmd, rpcTimeout)
		if err := f.Error(); err != nil {
			return meta.Result{}, fmt.Errorf("TRYAGAIN the rule store is changing leaders: %v", err)
		}
		res, _ := f.Response().(meta.Result)
		// The followers learn the new commit index with the next append,
		// which raft sends only after CommitTimeout (1 s in fast mode): a
		// barrier is one, so every node applies the change within a round
		// trip. Strong mode keeps its 50 ms and needs none.
		if c.relaxed {
			c.metaR.Barrier(rpcTimeout)
		}
		return res, nil
	}
	addr, _ := c.metaR.LeaderWithID()
	if addr == "" {
		return meta.Result{}, errors.New("TRYAGAIN the rule store has no leader yet")
	}
	cctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	rep, err := c.rpc.metaApply(cctx, string(addr), cmd)
	var bad *badReply
	if errors.As(err, &bad) {
		return meta.Result{}, bad
	}
	if err != nil {
		return meta.Result{}, remoteErr(err)
	}
	for c.meta.Applied() < rep.Index { // read our own write
		select {
		case <-cctx.Done():
			return rep.Result, nil
		case <-time.After(time.Millisecond):
		}
	}
	return rep.Result, nil
}

// remoteErr passes a remote handler's Redis-style refusal on as it is
// (a transient one stays Transient, ErrLostLead stays ErrLostLead) and
// turns an unreachable node into TRYAGAIN.
func remoteErr(err error) error {
	var re *transport.RemoteError
	if errors.As(err, &re) {
		for _, t := range transientErrors {
			if re.Msg == t.Error() {
				return t
			}
		}
		if re.Msg == ErrLostLead.Error() {
			return ErrLostLead
		}
		return errors.New(re.Msg)
	}
	return fmt.Errorf("TRYAGAIN a node of the cluster cannot be reached: %v", err)
}

// transientErrors are the refusals another node may answer that say its
// call ran nothing and may be made again.
var transientErrors = []error{ErrTryAgain, ErrMoving, ErrStarting, ErrStopping}

// chargeReq is one group's part of a rule check: its counters, charged
// all or nothing (CheckAll), or given back (RefundAll).
type chargeReq struct {
	Group int        `json:"group"`
	Cost  int64      `json:"cost"`
	Now   int64      `json:"now"` // charge: the coordinator's clock (the leader charges at its own); refund: when the charge was made
	Ops   []chargeOp `json:"ops"`
}

type chargeOp struct {
	Key     []byte `json:"key"`
	Algo    int    `json:"algo"`
	Limit   int64  `json:"limit"`
	Window  int64  `json:"window"`
	Burst   int64  `json:"burst"`
	Shadow  bool   `json:"shadow,omitempty"`
	Replace bool   `json:"replace,omitempty"`
	// Cost, when set, is what this op charges instead of the request's
	// Cost (shards.Op.OwnCost).
	Cost *int64 `json:"cost,omitempty"`
	// Charged: in a refund, the op was charged (its Result allowed).
	Charged bool `json:"charged,omitempty"`
}

// chargeReply says whether the group's counters were charged, each op's
// result, and when (the time the charge was made at, for a refund).
type chargeReply struct {
	Allowed bool            `json:"allowed"`
	At      int64           `json:"at"`
	Results []engine.Result `json:"results"`
}

// toOps turns the request's ops into shards.Ops.
func (r chargeReq) toOps() []shards.Op {
	ops := make([]shards.Op, len(r.Ops))
	for i, o := range r.Ops {
		ops[i] = shards.Op{Key: o.Key, Algo: engine.Algo(o.Algo), Shadow: o.Shadow, Replace: o.Replace,
			Params: engine.Params{Limit: o.Limit, Window: o.Window, Burst: o.Burst}}
		if o.Cost != nil {
			ops[i].OwnCost, ops[i].Cost = true, *o.Cost
		}
		if o.Charged {
			ops[i].Result.Allowed = true
		}
	}
	return ops
}

// peerTable is the last status each other node reported, and the status
// mark each last sent with a heartbeat tick.
type peerTable struct {
	mu    sync.Mutex
	byID  map[string]*peerInfo
	marks map[string]heardMark
	addrs map[string]string // id → raft address
}

type peerInfo struct {
	status nodeStatus
	seen   time.Time // of the last answer, or of a tick whose mark is the status's
	polled time.Time // of the last answer
}

// heardMark is a node's status mark as its last tick told it.
type heardMark struct {
	mark uint64
	at   time.Time
}

// connected reports whether the node answered within the last two
// seconds.
func (p *peerInfo) connected() bool { return p != nil && time.Since(p.seen) < 2*time.Second }

// poll asks the other nodes for their status, each when its status may
// have changed: every heartbeat timeout, unless its heartbeat ticks tell
// that its status mark is still the one of the status it last reported
// (then every slowPoll heartbeat timeouts).
func (c *Cluster) poll() {
	c.every(c.cfg.HeartbeatTimeout, func() {
		var wg sync.WaitGroup
		now := time.Now()
		for id, addr := range c.peerAddrs() {
			if id == c.cfg.NodeID || !c.mayHaveChanged(id, now) {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.pollOne(id, addr)
			}()
		}
		wg.Wait()
		c.noteRemoteLeaders()
	})
}

// slowPoll is how many heartbeat timeouts a node whose status did not
// change goes unasked (for what marks leave out: its key counts).
const slowPoll = 10

// mayHaveChanged reports whether node id's status may differ from the one
// it last reported: it never reported one, or one without a mark, or its
// ticks brought no mark lately, or another mark, or its report is older
// than slowPoll heartbeat timeouts.
func (c *Cluster) mayHaveChanged(id string, now time.Time) bool {
	c.peers.mu.Lock()
	defer c.peers.mu.Unlock()
	p, m := c.peers.byID[id], c.peers.marks[id]
	hb := c.cfg.HeartbeatTimeout
	return p == nil || p.status.Mark == 0 || m.mark != p.status.Mark || now.Sub(m.at) > 2*hb ||
		now.Sub(p.polled) > slowPoll*hb
}

// heardMark records node's status mark, heard with a heartbeat tick; one
// that is still its last report's counts as hearing from it.
func (c *Cluster) heardMark(node string, mark uint64) {
	now := time.Now()
	c.peers.mu.Lock()
	defer c.peers.mu.Unlock()
	if c.peers.marks == nil {
		c.peers.marks = map[string]heardMark{}
	}
	c.peers.marks[node] = heardMark{mark: mark, at: now}
	if p := c.peers.byID[node]; p != nil && p.status.Mark == mark && now.Sub(p.seen) > c.cfg.HeartbeatTimeout {
		c.peers.byID[node] = &peerInfo{status: p.status, seen: now, polled: p.polled}
	}
}

func (c *Cluster) pollOne(id, addr string) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.HeartbeatTimeout)
	defer cancel()
	s, err := c.rpc.status(ctx, addr, 0)
	if err != nil {
		return
	}
	now := time.Now()
	c.peers.mu.Lock()
	if c.peers.byID == nil {
		c.peers.byID = map[string]*peerInfo{}
	}
	c.peers.byID[id] = &peerInfo{status: s, seen: now, polled: now}
	c.peers.mu.Unlock()
}

// statusMark returns a fingerprint of what status reports, but for key
// counts and digests: it changes when the node's flags change, or a
// hosted group's state, leader, readiness, term, applied index or last
// log index (a change of its servers is a log entry) does. Never 0. The
// ticks ask for it several times per pulse period; it is computed at most
// every markReuse.
func (c *Cluster) statusMark() uint64 {
	now := time.Now()
	if m := c.lastMark.Load(); m != nil && now.Sub(m.at) < markReuse {
		return m.mark
	}
	m := c.computeMark()
	c.lastMark.Store(&heardMark{mark: m, at: now})
	return m
}

// markReuse is how long a computed status mark is reused.
const markReuse = 10 * time.Millisecond

// computeMark computes statusMark.
func (c *Cluster) computeMark() uint64 {
	h := mix(fnvOffset, boolBits(c.accepting.Load(), c.stopping.Load(), c.diskLow()))
	for _, g := range c.hostedGroups() {
		_, leader := g.raft.LeaderWithID()
		h = mix(h, uint64(g.id))
		h = mix(h, uint64(g.raft.State())<<1|boolBits(g.phase.serving()))
		for i := 0; i < len(leader); i++ {
			h = mix(h, uint64(leader[i]))
		}
		h = mix(mix(mix(h, g.raft.CurrentTerm()), g.fsm.applied.Load()), g.raft.LastIndex())
	}
	return h | 1
}

// FNV-1a's 64-bit parameters, applied to whole words by mix.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func mix(h, v uint64) uint64 { return (h ^ v) * fnvPrime }

// boolBits packs bs into the low bits of a word.
func boolBits(bs ...bool) uint64 {
	var v uint64
	for i, b := range bs {
		if b {
			v |= 1 << i
		}
	}
	return v
}

// peerAddrs returns every member's Raft address: the initial peers and
// the nodes the meta group knows.
func (c *Cluster) peerAddrs() map[string]string {
	out := map[string]string{}
	m := c.meta.Current()
	if m.Groups == 0 { // the meta group has not recorded the members yet
		for _, p := range c.initial {
			out[p.ID] = p.Raft
		}
	}
	for id, n := range m.Nodes {
		out[id] = n.Raft
	}
	return out
}

// raftAddrOf returns node id's Raft address, as peerAddrs would, without
// building the whole map (forwarded commands ask for it each time).
func (c *Cluster) raftAddrOf(id string) string {
	m := c.meta.Current()
	if n, ok := m.Nodes[id]; ok {
		return n.Raft
	}
	if m.Groups == 0 {
		for _, p := range c.initial {
			if p.ID == id {
				return p.Raft
			}
		}
	}
	return ""
}

// peer returns what node id last reported, or nil.
func (c *Cluster) peer(id string) *peerInfo {
	c.peers.mu.Lock()
	defer c.peers.mu.Unlock()
	return c.peers.byID[id]
}

// noteRemoteLeaders updates the leaderless times of the groups whose
// leader this node learns from the peers' reports (see leaderOf), and
// wakes held commands.
func (c *Cluster) noteRemoteLeaders() {
	for g := 1; g <= c.numGroups(); g++ {
		if grp := c.replica(g); grp == nil || unheard(grp) {
			c.markLeader(g, c.leaderOf(g) != "")
		}
	}
	c.topoChanged()
}

// remoteLeader returns the node that connected peers report as leading
// group g (the highest term wins), or "".
func (c *Cluster) remoteLeader(g int) string {
	c.peers.mu.Lock()
	defer c.peers.mu.Unlock()
	var best string
	var term uint64
	for id, p := range c.peers.byID {
		if !p.connected() {
			continue
		}
		for _, gs := range p.status.Groups {
			if gs.ID == g && gs.State == "Leader" && gs.Term >= term {
				best, term = id, gs.Term
			}
		}
	}
	return best
}

// Report is GET /cluster's answer: the members, the groups with their
// slots and leaders, and every replica's applied index (and digest, when
// asked for one at a time) as each node reports it.
type Report struct {
	Node string `json:"node"` // the node that answered
	OK   bool   `json:"ok"`   // every slot has a leader
	// Serving: every group is served by one node, and Balanced: by its
	// preferred leader (the methods' answers, for scripts that read the
	// JSON).
	Serving  bool          `json:"serving"`
	Balanced bool          `json:"balanced"`
	Nodes    []ReportNode  `json:"nodes"`
	Groups   []ReportGroup `json:"groups"`
	Rules    int           `json:"rules"`
	// MetaLeader is the name of the meta group's leader as this node
	// knows it ("" during an election): the node that applies rule,
	// block and membership changes.
	MetaLeader string            `json:"meta_leader"`
	Errors     map[string]string `json:"errors,omitempty"` // nodes that did not answer
}

// ReportNode is one member.
type ReportNode struct {
	Name      string `json:"name"`
	ID        string `json:"id"`
	RESP      string `json:"resp"`
	HTTP      string `json:"http,omitempty"`
	Raft      string `json:"raft"`
	Connected bool   `json:"connected"`
	Leads     int    `json:"leads"` // groups it serves
	// DiskLow: the node's disk is below --min-free-disk, so its log
	// refuses state changes; Stopping: it is handing its leads over. Both
	// as the node reported them (false if it did not answer).
	DiskLow  bool `json:"disk_low,omitempty"`
	Stopping bool `json:"stopping,omitempty"`
}

// ReportGroup is one data group.
type ReportGroup struct {
	ID       int             `json:"id"`
	Slots    [2]int          `json:"slots"` // first and last, inclusive
	Leader   string          `json:"leader"`
	Voters   []string        `json:"voters"`
	Replicas []ReportReplica `json:"replicas"`
}

// ReportReplica is one voter's copy of a group.
type ReportReplica struct {
	Node    string `json:"node"`
	State   string `json:"state"`
	Ready   bool   `json:"ready"`
	Term    uint64 `json:"term"`
	Applied uint64 `json:"applied"`
	Keys    int    `json:"keys"`
	Digest  string `json:"digest,omitempty"`
	// Servers: the group's servers in its latest configuration, reported
	// by its leader (nil from a follower).
	Servers []string `json:"servers,omitempty"`
}

// Balanced reports whether every slot has a leader and every group has
// exactly one ready replica, on its preferred leader (its first voter):
// the state the balancer brings a healthy cluster to.
func (r Report) IsBalanced() bool {
	if !r.OK || len(r.Groups) == 0 {
		return false
	}
	for _, g := range r.Groups {
		ready := 0
		for _, rep := range g.Replicas {
			if rep.Ready {
				ready++
				if len(g.Voters) == 0 || rep.Node != g.Voters[0] {
					return false
				}
			}
		}
		if ready != 1 {
			return false
		}
	}
	return true
}

// ServedWithout reports whether every group has a ready replica on a
// node other than the one named dead.
func (r Report) ServedWithout(dead string) bool {
	if len(r.Groups) == 0 {
		return false
	}
	for _, g := range r.Groups {
		ok := false
		for _, rep := range g.Replicas {
			ok = ok || (rep.Ready && rep.Node != dead)
		}
		if !ok {
			return false
		}
	}
	return true
}

// MostLeader returns the name of the node that leads the most groups.
func (r Report) MostLeader() (name string, leads int) {
	for _, n := range r.Nodes {
		if n.Leads > leads {
			name, leads = n.Name, n.Leads
		}
	}
	return name, leads
}

// GroupOf returns the group that holds slot, or nil.
func (r Report) GroupOf(slot int) *ReportGroup {
	for i := range r.Groups {
		if g := &r.Groups[i]; g.Slots[0] <= slot && slot <= g.Slots[1] {
			return g
		}
	}
	return nil
}

// eachPeer runs call for every member of addrs (by id) but this node,
// all at once, each with a context bounded by timeout, and returns when
// every call has.
func (c *Cluster) eachPeer(ctx context.Context, addrs map[string]string, timeout time.Duration,
	call func(ctx context.Context, id, addr string)) {
	var wg sync.WaitGroup
	for id, addr := range addrs {
		if id == c.cfg.NodeID {
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			call(cctx, id, addr)
		})
	}
	wg.Wait()
}
