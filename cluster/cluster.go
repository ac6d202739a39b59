package cluster

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/cluster/datadir"
	"github.com/rlserver/rlserver/cluster/meta"
	"github.com/rlserver/rlserver/cluster/pulse"
	"github.com/rlserver/rlserver/cluster/transport"
	"github.com/rlserver/rlserver/shards"
	"github.com/rlserver/rlserver/slots"
)

// ClusterConfig configures one node of a cluster. Storage, NodeID,
// RaftAddr, RESPAddr and NewStore are required; Peers and Groups are
// needed only the first time the node starts (bootstrap); zero values of
// the rest take the documented defaults.
type ClusterConfig struct {
	// Storage is the node's data directory (OpenStorage).
	Storage *Storage
	// NodeID names the node; it must be one of Peers' ids at bootstrap.
	NodeID string
	// RaftAddr is where the node's Raft listener listens (--raft-addr);
	// RaftAdvertise is the address the other nodes dial, by default
	// RaftAddr (which must then be dialable: not 0.0.0.0).
	RaftAddr, RaftAdvertise string
	// Secret, if set, is shared by every node (rlserver passes
	// --admin-token): every connection to or from the Raft listener
	// proves knowledge of it first, so that no one without it can speak
	// raft or make internal calls (package transport, auth.go).
	Secret string
	// RESPAddr and HTTPAddr are the addresses clients reach this node at,
	// reported in CLUSTER SLOTS, MOVED and GET /cluster.
	RESPAddr, HTTPAddr string
	// Peers are the initial members (--peers), this node included. The
	// same list on every node bootstraps one cluster.
	Peers []Peer
	// Groups is the number of data groups at bootstrap (default 16).
	Groups int
	// Join, for a node that joins a running cluster (--join), asks a
	// member to add this node, described by me, and returns the number of
	// data groups. OpenCluster calls it, retrying, on a new data directory
	// when Peers is empty.
	Join func(ctx context.Context, me NodeInfo) (groups int, err error)
	// NewStore makes the store of one data group, given how many groups
	// this node hosts (among which to share shards and memory).
	NewStore func(hosted int) *shards.Store

	// Durability tunes the logs and the snapshots of every group.
	Durability
	// Raft timeouts, tuned for a LAN (defaults 300ms, 300ms, 250ms): a
	// follower that hears nothing from its leader for HeartbeatTimeout
	// (randomized up to twice that) starts an election.
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout time.Duration
	// Proxy makes the node forward the commands of slots it does not serve
	// to the nodes that do, instead of answering MOVED (--proxy).
	Proxy bool
	// DownAfter is how long a slot whose group has no leader is answered
	// TRYAGAIN before CLUSTERDOWN (default 2s).
	DownAfter time.Duration
	// DiskErr reports why the node's disk refuses state changes now (nil
	// when it has room); default Storage.Space.Refusal (the last reading:
	// the status mark and the pacer ask every tick, and a fresh reading
	// each time would keep the disk guard's poller at its busy pace on an
	// idle node). A node whose disk refuses hands its leads to nodes whose
	// disks do not, and takes none.
	DiskErr func() error
	// MaxBlocks bounds the blocks the meta group holds (--max-blocks; 0:
	// no bound). It travels in each block this node proposes, so that every
	// node drops the same blocks (those nearest to their end) when a block
	// goes beyond it.
	MaxBlocks int
	// BlockBytes, if not nil, is kept at the memory the meta group's
	// blocks take (rules.BlockBytes), which the data groups' stores count
	// against --maxmemory (shards.Options.Held).
	BlockBytes *atomic.Int64
}

// Defaults of ClusterConfig.
const (
	DefaultGroups             = 16
	DefaultHeartbeatTimeout   = 300 * time.Millisecond
	DefaultElectionTimeout    = 300 * time.Millisecond
	DefaultLeaderLeaseTimeout = 250 * time.Millisecond
	DefaultDownAfter          = 2 * time.Second
)

// Cluster is one node of a cluster: a member of the meta group and a
// voter of some data groups, each a Raft group whose FSM is the limiter
// state of a range of the 16384 slots. It satisfies the server's Limiter,
// RuleStore, Committer and (through an adapter in cmd/rlserver) Cluster
// interfaces: a key is checked here if this node leads its slot's group,
// else the caller is told where to go (MOVED), to retry (TRYAGAIN) or that
// the slot cannot be served (CLUSTERDOWN). All methods are safe for
// concurrent use.
type Cluster struct {
	commits
	cfg   ClusterConfig
	id    string // the node's cluster id: 40 hex characters
	log   *slog.Logger
	clock func() int64
	mux   *transport.Mux
	rpc   rpcClient    // this node's internal calls to the others, over mux
	pulse *pulse.Pulse // this node's raft heartbeats, coalesced per peer node
	// relaxed (fast mode): the pulse ticks every pulse.RelaxedPeriod, and
	// replicas wait longer while they lead or hear their leader
	// (paceReplica). tick is the pulse's period, timing the raft timeouts
	// this node gives its replicas (raftTimeouts).
	relaxed bool
	tick    time.Duration
	timing  raftTimeouts
	// metaWaitLong: the meta group's raft has the long heartbeat timeout
	// (paceRaft).
	metaWaitLong atomic.Bool
	// lastMark is the status mark last computed (statusMark).
	lastMark atomic.Pointer[heardMark]
	meta     *meta.FSM
	metaR    *raft.Raft
	// blockDenied counts the rules checks this node denied by a block.
	blockDenied atomic.Uint64
	// blockProposals bounds the blocks a rule check proposes at once;
	// blocksShed counts those not proposed for it.
	blockProposals chan struct{}
	blocksShed     atomic.Uint64
	// reqPrefix (random, drawn at start) and reqSeq name this node's meta
	// requests (nextReq).
	reqPrefix string
	reqSeq    atomic.Uint64
	// metaAnswered, a test's hook, is called by the meta leader after it
	// applied another node's meta command and before it answers: a test
	// stalls it there, as a SIGSTOP of the leader after the commit does.
	// It is set while the node runs, so it is loaded atomically.
	metaAnswered atomic.Pointer[func()]
	// groups holds this node's replica of each data group, by id (nil for
	// a group it does not host; [0] is unused). Replicas come and go as
	// groups move between nodes, so readers load them atomically.
	groups  []atomic.Pointer[group]
	ngroups atomic.Int32 // data groups; 0 until a joining node learns it
	app     *applier
	metrics *metrics
	peers   peerTable
	exec    atomic.Pointer[Executor] // runs forwarded commands of values and scripts (SetExecutor)
	initial []Peer                   // the members the data directory was bootstrapped with
	// layoutMu orders the writes of the data directory's Layout.
	layoutMu sync.Mutex

	// leaderless[g] is when group g was first seen without a leader (Unix
	// ns), 0 while it has one.
	leaderless []atomic.Int64

	// life admits other nodes' internal calls only while every group is
	// open.
	life lifecycle
	// topo is closed and replaced whenever the node's picture of who
	// serves what changes (topoChanged), waking held commands (Await);
	// observations carries raft's leader changes to watchLeaders.
	topo         atomic.Pointer[chan struct{}]
	observations chan raft.Observation
	// stopping: the node hands over every lead and takes none (StepDown);
	// accepting: clients can reach it (Listening). Both are reported in
	// its status, so that other nodes hand leads only to a node that
	// accepts clients and is not stopping.
	stopping  atomic.Bool
	accepting atomic.Bool
	// peerLog throttles raft's lines about an unreachable peer, node-wide.
	peerLog *peerLog
	// wasMember: this process saw the node a member of the cluster (see
	// noteLeft; reconcileLoop alone uses it).
	wasMember bool
	// takeovers counts the groups this node took over from lost leaders,
	// the last at takeoverAt (Unix ns; see Takeover).
	takeovers  atomic.Uint64
	takeoverAt atomic.Int64

	shutdownCh chan struct{}
	closeOnce  sync.Once
	wg         sync.WaitGroup
}

// OpenCluster starts the node: its Raft listener, the meta group and the
// data groups it hosts (bootstrapped from Peers and Groups on a new data
// directory, else as the directory records them), and returns once they
// run. Slots are served as soon as their groups have leaders; Ready says
// when every slot is.
func OpenCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	cfg = clusterDefaults(cfg)
	c := &Cluster{cfg: cfg, id: clusterID(cfg.NodeID), log: cfg.Logger, clock: cfg.Clock, shutdownCh: make(chan struct{}),
		reqPrefix: randomHex(8), blockProposals: make(chan struct{}, maxBlockProposals)}
	layout, err := c.layout()
	if err == nil && layout.Version == datadir.LayoutVersion && !layout.Bootstrapped && layout.Groups > 0 {
		err = cfg.Storage.SaveLayout(*layout) // before anything is bootstrapped: see Layout
	}
	if err != nil {
		return nil, err
	}
	c.ngroups.Store(int32(layout.Groups))
	c.initial = layout.Peers
	c.meta = meta.New(cfg.BlockBytes)
	c.metrics = newMetrics(cfg.Registerer, c.appliedSum, func() bool { return false }, cfg.Storage.LogStats)
	cfg.Registerer.MustRegister(newGroupApplied(c), prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "rlserver_cluster_leads_lost_total",
		Help: "Group leads this node lost without handing them over (a missed heartbeat, a partition); each may answer TRYAGAIN to changes in flight."},
		func() float64 { return float64(c.app.leadsLost.Load()) }))
	c.app = newApplier(cfg.FlushInterval, cfg.Clock, c.metrics, cfg.Logger, c.shutdownCh, true)
	c.app.strong = cfg.Consistency == Strong
	c.commits = commits{c.app}
	c.leaderless = make([]atomic.Int64, maxGroups+1)
	topo := make(chan struct{})
	c.topo.Store(&topo)
	c.observations = make(chan raft.Observation, 64)
	c.peerLog = newPeerLog()
	c.mux, err = transport.Listen(cfg.RaftAddr, transport.Options{Logger: cfg.Logger, Advertise: cfg.RaftAdvertise, Secret: secretBytes(cfg.Secret)})
	if err != nil {
		return nil, fmt.Errorf("raft listener on %s: %w", cfg.RaftAddr, err)
	}
	c.relaxed = cfg.Consistency != Strong
	c.tick, c.timing = timeouts(cfg, c.relaxed)
	c.pulse = pulse.New(cfg.NodeID, c.mux.Call, c.tick, cfg.HeartbeatTimeout, time.Now)
	c.pulse.Mark, c.pulse.Marked = c.statusMark, c.heardMark
	c.rpc = rpcClient{mux: c.mux}
	c.mux.Handle(c.handleRPC)
	err = c.startGroups(layout)
	layout.Bootstrapped = err == nil
	if err == nil && layout.Groups == 0 {
		layout.Groups, err = c.join(ctx)
		c.ngroups.Store(int32(layout.Groups))
	}
	if err != nil {
		c.stopRafts()
		c.pulse.Stop()
		c.mux.Close()
		return nil, err
	}
	if err := cfg.Storage.SaveLayout(*layout); err != nil {
		c.stopRafts()
		c.pulse.Stop()
		c.mux.Close()
		return nil, err
	}
	go c.app.run()
	c.startBackground()
	c.life.open()
	return c, nil
}

func clusterDefaults(cfg ClusterConfig) ClusterConfig {
	if cfg.Groups <= 0 {
		cfg.Groups = DefaultGroups
	}
	cfg.Durability = cfg.Durability.withDefaults()
	if cfg.HeartbeatTimeout <= 0 {
		cfg.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if cfg.ElectionTimeout <= 0 {
		cfg.ElectionTimeout = DefaultElectionTimeout
	}
	if cfg.LeaderLeaseTimeout <= 0 {
		cfg.LeaderLeaseTimeout = min(DefaultLeaderLeaseTimeout, cfg.HeartbeatTimeout)
	}
	if cfg.DownAfter <= 0 {
		cfg.DownAfter = DefaultDownAfter
	}
	if cfg.RaftAdvertise == "" {
		cfg.RaftAdvertise = cfg.RaftAddr
	}
	if cfg.DiskErr == nil && cfg.Storage != nil && cfg.Storage.Space != nil {
		cfg.DiskErr = cfg.Storage.Space.Refusal
	}
	return cfg
}

// diskLow reports whether the node's disk refuses state changes now.
func (c *Cluster) diskLow() bool { return c.cfg.DiskErr != nil && c.cfg.DiskErr() != nil }

// clusterID is the 40-hex-character id Redis Cluster clients expect,
// derived from the node's name so that it is stable across restarts.
func clusterID(name string) string {
	sum := sha1.Sum([]byte("rlserver-node:" + name))
	return hex.EncodeToString(sum[:])
}

// Errors of OpenCluster.
var (
	ErrNotAPeer = errors.New("--node-id is not one of --peers")
	ErrNoPeers  = errors.New("a new cluster node needs --peers")
)

// layout returns what the data directory records, or, for a new one, the
// layout --peers and --groups describe.
func (c *Cluster) layout() (*Layout, error) {
	st := c.cfg.Storage
	l, err := st.LoadLayout()
	if err != nil {
		return nil, err
	}
	if l != nil {
		return l, nil
	}
	if st.HasState() {
		return nil, fmt.Errorf("%w: %s holds a standalone node's state; start it without --peers", ErrMode, st.Dir())
	}
	if len(c.cfg.Peers) == 0 && c.cfg.Join != nil {
		return &Layout{Version: datadir.LayoutVersion}, nil // Groups learned from the cluster (join)
	}
	if len(c.cfg.Peers) == 0 {
		return nil, ErrNoPeers
	}
	ids := make([]string, 0, len(c.cfg.Peers))
	self := false
	for _, p := range c.cfg.Peers {
		ids = append(ids, p.ID)
		self = self || p.ID == c.cfg.NodeID
	}
	if !self {
		return nil, fmt.Errorf("%w: %q", ErrNotAPeer, c.cfg.NodeID)
	}
	l = &Layout{Version: datadir.LayoutVersion, Groups: c.cfg.Groups, Peers: c.cfg.Peers}
	for g, voters := range meta.Placement(ids, c.cfg.Groups) {
		for _, v := range voters {
			if v == c.cfg.NodeID {
				l.Hosted = append(l.Hosted, uint32(g))
			}
		}
	}
	sort.Slice(l.Hosted, func(i, j int) bool { return l.Hosted[i] < l.Hosted[j] })
	return l, nil
}

// join asks the cluster to add this node (cfg.Join), retrying until ctx
// ends, and returns the number of data groups. The meta group's leader
// then replicates the meta state to this node, whose reconciler starts the
// replicas of the groups placed on it.
func (c *Cluster) join(ctx context.Context) (int, error) {
	me := NodeInfo{ID: c.cfg.NodeID, Raft: c.cfg.RaftAdvertise, RESP: c.cfg.RESPAddr, HTTP: c.cfg.HTTPAddr}
	for {
		n, err := c.cfg.Join(ctx, me)
		if err == nil && n > 0 {
			c.log.Info("joined the cluster", "groups", n)
			return n, nil
		}
		c.log.Warn("joining the cluster failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("join the cluster: %w (last: %v)", ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// startGroups starts raft for the meta group and every hosted data group,
// bootstrapping them on a new directory (unless the node joins a running
// cluster: then the meta leader adds it).
func (c *Cluster) startGroups(l *Layout) error {
	st := c.cfg.Storage
	fresh := l.NeedsBootstrap()
	metaConf := raft.Configuration{}
	ids := make([]string, 0, len(l.Peers))
	for _, p := range l.Peers {
		metaConf.Servers = append(metaConf.Servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Raft), Suffrage: raft.Voter})
		ids = append(ids, p.ID)
	}
	addrs := map[string]string{}
	for _, p := range l.Peers {
		addrs[p.ID] = p.Raft
	}
	// The meta leader's replication reads its last entry every
	// CommitTimeout (50 ms) to send an idle append, answered locally while
	// nothing changed: a few entries kept in memory spare it the read.
	metaLogs, err := raft.NewLogCache(metaLogCache, st.Logs)
	if err != nil {
		return fmt.Errorf("meta group: log cache: %w", err)
	}
	r, err := raft.NewRaft(c.raftConfig(metaGroup), c.meta, metaLogs, st.Logs, st.Snaps, c.transport(metaGroup))
	if err != nil {
		return fmt.Errorf("meta group: start raft: %w", err)
	}
	c.metaR = r
	c.observe(r)
	if fresh && len(metaConf.Servers) > 0 {
		if err := r.BootstrapCluster(metaConf).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			return fmt.Errorf("meta group: bootstrap: %w", err)
		}
	}
	place := meta.Placement(ids, l.Groups)
	c.groups = make([]atomic.Pointer[group], maxGroups+1)
	for _, id := range l.Hosted {
		logs, snaps, err := st.GroupStorage(id, 1, c.log)
		if err != nil {
			return fmt.Errorf("group %d: %w", id, err)
		}
		g := c.newDataGroup(id, logs, snaps)
		rc := c.raftConfig(id)
		if voters := place[int(id)]; len(voters) > 0 && voters[0] != c.cfg.NodeID {
			deferTo(rc)
			g.phase.deferElection()
		}
		if err := g.startRaft(rc, logs, c.transport(id)); err != nil {
			return err
		}
		c.observe(g.raft)
		c.groups[id].Store(g) // published with its raft: readers never see it half made
		if fresh {
			conf := raft.Configuration{}
			for _, v := range place[int(id)] {
				conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(v), Address: raft.ServerAddress(addrs[v]), Suffrage: raft.Voter})
			}
			if err := g.raft.BootstrapCluster(conf).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
				return fmt.Errorf("group %d: bootstrap: %w", id, err)
			}
		}
	}
	return nil
}

// newDataGroup returns this node's replica of data group id over its
// storage, with a new store.
func (c *Cluster) newDataGroup(id uint32, logs raft.LogStore, snaps raft.SnapshotStore) *group {
	hosted := max(len(c.hostedGroups()), len(c.placedHere()), 1)
	g := newGroup(id, c.cfg.NewStore(hosted), logs, snaps, c.log)
	g.fsm.fail = func(index uint64, err error) {
		c.log.Error("a log entry cannot be applied", "group", id, "index", index, "err", err)
	}
	g.fsm.onSnapshot = func(d time.Duration, records, bytes int64, err error) {
		c.metrics.snapshot(d, err)
		if err == nil {
			g.snapBytes.Store(bytes)
		}
	}
	return g
}

// placedHere returns the groups the meta group places on this node.
func (c *Cluster) placedHere() []int {
	var out []int
	for g, voters := range c.meta.Current().Placement {
		for _, v := range voters {
			if v == c.cfg.NodeID {
				out = append(out, g)
			}
		}
	}
	return out
}

// transport returns a raft transport for group id over the node's
// listener, its heartbeats carried by the node's pulse.
func (c *Cluster) transport(id uint32) raft.Transport {
	return pulse.NewQuietTransport(pulse.NoPipeline{NetworkTransport: raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: c.mux.Stream(id), MaxPool: 3, Timeout: 10 * time.Second,
		Logger: newRaftLogger(c.log.With("group", id), c.peerLog),
	})}, id, c.pulse, pulse.Fresh(c.tick))
}

// raftConfig returns the raft configuration of group id.
func (c *Cluster) raftConfig(id uint32) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.cfg.NodeID)
	rc.HeartbeatTimeout = c.timing.heartbeat
	rc.ElectionTimeout = c.timing.election
	rc.LeaderLeaseTimeout = c.timing.lease
	// A leader with nothing new to send tells its followers the commit
	// index every CommitTimeout (a new entry is sent at once, with the
	// commit index so far). At 5ms, 16 groups' leaders kept an idle
	// three-node cluster at half of two cores; raft's default, 50ms, made
	// the leaders' replication loops (a log read and a local answer each,
	// see pulse/quiet.go) a quarter of an idle node's CPU. A data group's
	// followers need the last commit index only to apply the last entries
	// before a lead comes to them, which a planned move's transfer and an
	// election's first entry commit anyway: 200ms cut an idle cluster
	// node's CPU by 10-18% (DESIGN.md, "Idle cost"). The meta group keeps 50ms, so that a rule
	// changed on one node applies on the others within about that.
	rc.CommitTimeout = dataCommitTimeout
	if id == metaGroup {
		rc.CommitTimeout = metaCommitTimeout
	}
	if c.relaxed { // the meta leader sends a barrier after each change (metaApply)
		rc.CommitTimeout = relaxedCommitTimeout
	}
	rc.MaxAppendEntries = 256
	rc.BatchApplyCh = true
	rc.SnapshotThreshold = c.cfg.SnapshotEntries
	rc.SnapshotInterval = c.cfg.SnapshotInterval
	rc.TrailingLogs = c.cfg.TrailingLogs
	rc.Logger = newRaftLogger(c.log.With("group", id), c.peerLog)
	return rc
}

// The leaders' CommitTimeout, data groups' and the meta group's (see
// raftConfig), and every group's in fast mode, where an idle append is
// answered locally while the follower answers ticks (pulse.QuietTransport)
// and the meta leader sends a barrier after each change (metaApply).
const (
	dataCommitTimeout    = 200 * time.Millisecond
	metaCommitTimeout    = 50 * time.Millisecond
	relaxedCommitTimeout = time.Second
)

// metaLogCache is how many of the meta group's last entries its raft
// keeps in memory.
const metaLogCache = 16

// raftTimeouts are the raft timeouts a node gives its replicas: heartbeat,
// election and lease as raft starts with them; long, the heartbeat timeout
// of a replica that leads, or follows and hears its leader, in fast mode
// (paceReplica).
type raftTimeouts struct {
	heartbeat, election, lease, long time.Duration
}

// timeouts returns the pulse's period and the raft timeouts for cfg. In
// strong mode they are the configured ones, with ticks every fifth of the
// heartbeat timeout. In fast mode (relaxed) the ticks go every two thirds
// of it, 200 ms at the defaults; the lease is twice the configured one,
// so that a leader that heartbeats every tenth to fifth of a long
// timeout (150 to 300 ms) keeps it with room to spare, and the heartbeat and
// election timeouts are at least the lease, as raft wants them (500 ms at
// the defaults). A cut-off fast leader then stops deciding at most the lease
// and pulse.Fresh (300 ms) after its last contact: 800 ms at the
// defaults.
func timeouts(cfg ClusterConfig, relaxed bool) (time.Duration, raftTimeouts) {
	t := raftTimeouts{heartbeat: cfg.HeartbeatTimeout, election: cfg.ElectionTimeout, lease: cfg.LeaderLeaseTimeout}
	if !relaxed {
		t.long = t.heartbeat
		return pulse.Period(cfg.HeartbeatTimeout), t
	}
	t.lease *= relaxedLease
	t.heartbeat = max(t.heartbeat, t.lease)
	t.election = max(t.election, t.heartbeat)
	t.long = max(longLeases*t.lease, t.heartbeat)
	return pulse.RelaxedPeriod(cfg.HeartbeatTimeout), t
}

// relaxedLease is how many configured leases a fast-mode leader's lease
// is; longLeases how many of those leases the heartbeat timeout of a
// replica that leads, or follows and hears its leader, is in fast mode
// (1.5 s at the defaults): a leader heartbeats every tenth to fifth of it,
// 0.3 to 0.6 of its lease.
const (
	relaxedLease = 2
	longLeases   = 3
)

// deferTo lengthens the election timeouts of a replica that is not its
// group's preferred leader (its first voter), so that when the group
// starts with no leader — a new cluster, or every node restarting — the
// preferred leader times out first and wins: leaders start where the
// balancer would put them, and no lead moves right after the cluster
// forms. The watcher restores the usual timeouts as soon as the group has
// a leader (noteLeader), so failover is not slowed.
func deferTo(rc *raft.Config) {
	rc.HeartbeatTimeout *= deferFactor
	rc.ElectionTimeout *= deferFactor
}

// deferFactor is how much longer a deferring replica waits: a preferred
// leader that starts within (deferFactor-1) heartbeat timeouts of the
// others still wins.
const deferFactor = 4

// replica returns this node's replica of group id, or nil.
func (c *Cluster) replica(id int) *group {
	if id < 1 || id >= len(c.groups) {
		return nil
	}
	return c.groups[id].Load()
}

// hostedGroups returns this node's replicas, in group order.
func (c *Cluster) hostedGroups() []*group {
	var out []*group
	for i := range c.groups {
		if g := c.groups[i].Load(); g != nil {
			out = append(out, g)
		}
	}
	return out
}

// appliedSum is the sum of the hosted groups' applied indexes, for the
// rlserver_raft_applied_index series.
func (c *Cluster) appliedSum() uint64 {
	var n uint64
	for _, g := range c.hostedGroups() {
		if g != nil {
			n += g.fsm.applied.Load()
		}
	}
	return n + c.meta.Applied()
}

// handOver hands the lead of every group this node serves to another
// voter (handOff: its changes committed first), the meta group's last, so
// that the others serve its slots at once. A group still led here after a
// round — its target could not take it yet (a node still starting or
// behind), its transfer failed, or a move the balancer had begun failed
// once this node was stopping — is handed over again, every handOverPause,
// for up to handOverRounds rounds or until ctx ends: a node that stops
// while leading a group shows its clients the errors of a kill.
func (c *Cluster) handOver(ctx context.Context) {
rounds:
	for round := 0; round < handOverRounds; round++ {
		led, awaited := c.unhanded()
		if len(led) == 0 && awaited == 0 {
			break
		}
		if round > 0 {
			if !c.anotherUp() {
				break // the last node up keeps its leads: nobody to take them
			}
			c.log.Info("some groups are still led here, or their lead is on its way here; handing them over again",
				"groups", len(led), "awaited", awaited, "round", round+1)
			select {
			case <-ctx.Done():
				break rounds
			case <-time.After(handOverPause):
			}
		}
		var wg sync.WaitGroup
		for _, g := range led {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.handOff(g, "", "")
			}()
		}
		wg.Wait()
	}
	if c.metaR != nil && c.metaR.State() == raft.Leader {
		c.metaR.LeadershipTransfer().Error()
	}
}

// unhanded returns the groups this node leads or serves, and counts those
// whose lead another node announced it would hand here before this node
// began stopping, and may still land (group.awaited): one that lands
// after the last round would be led by a node that is closing its
// client connections.
func (c *Cluster) unhanded() (led []*group, awaited int) {
	now := time.Now()
	for _, g := range c.hostedGroups() {
		switch {
		case g.phase.serving() || g.leader():
			led = append(led, g)
		case g.awaited(now):
			awaited++
		}
	}
	return led, awaited
}

// Unhanded reports whether this stopping node still leads or serves a
// group, or awaits a lead announced to it, while another node is up to
// take it: its client connections must stay open until it is handed over.
func (c *Cluster) Unhanded() bool {
	led, awaited := c.unhanded()
	return (len(led) > 0 || awaited > 0) && c.anotherUp()
}

// anotherUp reports whether another node is heard and not stopping.
func (c *Cluster) anotherUp() bool {
	c.peers.mu.Lock()
	defer c.peers.mu.Unlock()
	for id, p := range c.peers.byID {
		if id != c.cfg.NodeID && p.connected() && !p.status.Stopping {
			return true
		}
	}
	return false
}

// handOverRounds and handOverPause bound how long a stopping node keeps
// handing over the groups it still leads (see handOver): about two
// seconds beyond the handoffs themselves.
const (
	handOverRounds = 10
	handOverPause  = 200 * time.Millisecond
)

// stopRafts shuts every raft instance down.
func (c *Cluster) stopRafts() {
	var fs []raft.Future
	for _, g := range c.hostedGroups() {
		if g != nil && g.raft != nil {
			fs = append(fs, g.raft.Shutdown())
		}
	}
	if c.metaR != nil {
		fs = append(fs, c.metaR.Shutdown())
	}
	for _, f := range fs {
		f.Error()
	}
}

// secretBytes is s as the transport's secret: nil (none) when empty.
func secretBytes(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// MaxGroups bounds the data groups of a cluster (--groups).
const MaxGroups = 1024

// maxGroups is MaxGroups, by the name the package's files use.
const maxGroups = MaxGroups

// Every group's heartbeats travel with the pulse's ticks, which carry
// group ids up to pulse.MaxGroup: the two bounds are one (this does not
// compile otherwise).
var _ = [1]struct{}{}[pulse.MaxGroup-MaxGroups]

// numGroups returns the number of data groups (0 while a joining node has
// not learned it).
func (c *Cluster) numGroups() int { return int(c.ngroups.Load()) }

// groupOf returns the data group that owns slot: the slots are split into
// the groups' contiguous ranges of (nearly) equal size. It returns 0 (no
// group) while the number of groups is unknown.
func (c *Cluster) groupOf(slot int) int {
	n := c.numGroups()
	if n == 0 {
		return 0
	}
	return slot*n/slots.Count + 1
}

// slotRange returns the first and last slot of group g.
func (c *Cluster) slotRange(g int) (int, int) {
	n := c.numGroups()
	first := ((g-1)*slots.Count + n - 1) / n
	last := (g*slots.Count+n-1)/n - 1
	return first, last
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
