package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/raftlog"
	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/shards"
)

// Consistency says when a reply may be sent.
type Consistency int

const (
	// Fast: the node decides in memory and replies at once; the journal
	// is flushed into the log every flush interval. A crash forgets at
	// most the changes of the last interval (and of the entry being
	// written); a clean stop forgets nothing.
	Fast Consistency = iota
	// Strong: a reply that depends on state is sent only after every
	// change made before it is committed in the log.
	Strong
)

// String returns "fast" or "strong".
func (c Consistency) String() string {
	if c == Strong {
		return "strong"
	}
	return "fast"
}

// Errors of a Node. Their first word is a Redis error code, so the server
// passes them on as they are.
var (
	// ErrPersistence: the log refuses writes (a full or failing disk);
	// state-changing commands are refused until it takes them again, as
	// Redis refuses writes when it cannot write its AOF.
	ErrPersistence = errors.New("MISCONF the log refuses writes, so state changes are refused")
	// ErrBroken: an entry of the log could not be applied; the node no
	// longer serves (its state would not follow its log).
	ErrBroken = errors.New("ERR the node stopped serving: its log could not be applied")
	// ErrClosed: the node is stopping.
	ErrClosed = errors.New("ERR the node is shutting down")
)

// Durability is what a node's log and snapshots are tuned with,
// standalone or in a cluster. Zero values take the documented defaults.
type Durability struct {
	// Consistency is Fast or Strong.
	Consistency Consistency
	// FlushInterval is how often the journal becomes a log entry (fast
	// mode's bound on what a crash forgets); default 10ms.
	FlushInterval time.Duration
	// SnapshotEntries, SnapshotBytes: a snapshot is taken once this many
	// log entries (raft's SnapshotThreshold; default 4096) or bytes of
	// entries (default 64 MiB) were applied since the last, checked every
	// SnapshotInterval (default 10s). TrailingLogs entries are kept after
	// a snapshot (default 64).
	SnapshotEntries  uint64
	SnapshotBytes    int64
	SnapshotInterval time.Duration
	TrailingLogs     uint64
	// Clock is the node's clock, in ns since the epoch: it stamps log
	// entries and times what the node decides itself; default the wall
	// clock. rlserver gives the decision clock (internal/clock), which
	// does not step.
	Clock func() int64
	// RaiseClock raises Clock to at least the given time, if it is behind
	// it. The node calls it with the time of the latest entry it applied,
	// when it starts to lead a group (a standalone node: once it has
	// replayed its log), so that it never decides at a time earlier than
	// one its group has committed: a shard never runs a check earlier than
	// one it has run, so a leader whose clock was behind the group's
	// entries would leave every key frozen for the difference. Nil does
	// nothing.
	RaiseClock func(ns int64)
	// Logger receives the node's and raft's logs; default discards.
	Logger *slog.Logger
	// Registerer receives the node's metrics; default a private registry.
	Registerer prometheus.Registerer
}

// withDefaults returns d with its zero values replaced by the defaults.
func (d Durability) withDefaults() Durability {
	if d.FlushInterval <= 0 {
		d.FlushInterval = DefaultFlushInterval
	}
	if d.SnapshotEntries == 0 {
		d.SnapshotEntries = DefaultSnapshotEntries
	}
	if d.SnapshotBytes <= 0 {
		d.SnapshotBytes = DefaultSnapshotBytes
	}
	if d.SnapshotInterval <= 0 {
		d.SnapshotInterval = DefaultSnapshotInterval
	}
	if d.TrailingLogs == 0 {
		d.TrailingLogs = DefaultTrailingLogs
	}
	if d.Clock == nil {
		d.Clock = func() int64 { return time.Now().UnixNano() }
	}
	if d.RaiseClock == nil {
		d.RaiseClock = func(int64) {}
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Registerer == nil {
		d.Registerer = prometheus.NewRegistry()
	}
	return d
}

// Config configures a Node. Store, Logs, Stable and Snapshots are
// required; zero values of the rest take the documented defaults.
type Config struct {
	// Store is the shard state; Open enables its journal.
	Store *shards.Store
	// The Raft group's storage (raftlog and snapshot on Pebble, or
	// raft's in-memory stores in tests).
	Logs      raft.LogStore
	Stable    raft.StableStore
	Snapshots raft.SnapshotStore
	// NodeID names this node in the Raft configuration; default "node1".
	NodeID string
	// Durability tunes the log and the snapshots.
	Durability
	// LogStats, when set, adds the log store's counters (fsyncs, bytes)
	// to INFO persistence and the metrics.
	LogStats func() LogStats
	// ReuseEntries says that Logs keeps no reference to the entries'
	// data once StoreLogs returns (raftlog.Store encodes a copy; raft's
	// in-memory store keeps the slices), so the applier may reuse an
	// entry's buffer once it is committed.
	ReuseEntries bool
	// Disk, when set (Storage.Space), is the data directory's free-space
	// guard: INFO persistence and rlserver_log_refusing report it, and a
	// log entry it refused is tried again only once it allows writes.
	// (Store's Options.Refuse is what refuses the state changes.)
	Disk *raftlog.Space
}

// Defaults of Config.
const (
	DefaultFlushInterval    = 10 * time.Millisecond
	DefaultSnapshotEntries  = 4096
	DefaultSnapshotBytes    = 64 << 20
	DefaultSnapshotInterval = 10 * time.Second
	DefaultTrailingLogs     = 64
)

// Node is one durable node: the shard state as the FSM of a one-voter
// Raft group. It satisfies the server's Limiter, RuleStore and Committer
// interfaces. All methods are safe for concurrent use.
type Node struct {
	commits
	cfg     Config
	store   *shards.Store
	g       *group
	raft    *raft.Raft
	fsm     *fsm
	app     *applier
	log     *slog.Logger
	clock   func() int64
	metrics *metrics

	broken     atomic.Pointer[error]
	shutdownCh chan struct{}
	closeOnce  sync.Once
	snapMu     sync.Mutex // one user snapshot at a time
	lastSnap   atomic.Pointer[snapInfo]
}

// snapInfo describes the last snapshot taken.
type snapInfo struct {
	at       time.Time
	records  int64
	bytes    int64
	duration time.Duration
}

// Open starts the node: it restores the latest snapshot, replays the log
// after it, becomes leader of its one-voter group and returns once every
// committed entry is applied, so the state is complete before the first
// check. It bootstraps the group on empty storage.
func Open(ctx context.Context, cfg Config) (*Node, error) {
	cfg = withDefaults(cfg)
	n := &Node{cfg: cfg, store: cfg.Store, log: cfg.Logger, clock: cfg.Clock, shutdownCh: make(chan struct{})}
	logs := &syncedLogs{LogStore: cfg.Logs}
	g := newGroup(groupID, cfg.Store, logs, cfg.Snapshots, cfg.Logger)
	g.standalone = true
	g.fsm.fail, g.fsm.onSnapshot = n.fail, n.snapshotDone
	n.g, n.fsm = g, g.fsm
	n.metrics = newMetrics(cfg.Registerer, n.fsm.applied.Load, n.refusing, cfg.LogStats)
	n.app = newApplier(cfg.FlushInterval, cfg.Clock, n.metrics, cfg.Logger, n.shutdownCh, cfg.ReuseEntries)
	n.app.strong = cfg.Consistency == Strong
	logs.stored = func(ls []*raft.Log) { n.app.stored(g, ls) }
	if cfg.Disk != nil {
		n.app.space = cfg.Disk.Room
	}
	n.commits = commits{n.app}
	_, trans := raft.NewInmemTransport(raft.ServerAddress(cfg.NodeID))
	if err := g.startRaft(raftConfig(cfg), cfg.Stable, trans); err != nil {
		return nil, err
	}
	n.raft = g.raft
	if err := n.bootstrap(); err != nil {
		n.raft.Shutdown()
		return nil, err
	}
	if err := n.waitReady(ctx); err != nil {
		n.raft.Shutdown()
		return nil, err
	}
	cfg.RaiseClock(n.fsm.lastNow.Load())
	n.app.activate(g)
	g.phase.serve()
	go n.app.run()
	go n.snapshotLoop()
	return n, nil
}

func withDefaults(cfg Config) Config {
	if cfg.NodeID == "" {
		cfg.NodeID = "node1"
	}
	cfg.Durability = cfg.Durability.withDefaults()
	return cfg
}

// raftConfig tunes raft for a group whose only voter is this node: there
// is no network, so the timeouts only delay an election, and elections
// are not waited for (nudge). They are long because the leader checks its
// lease every LeaderLeaseTimeout (at most HeartbeatTimeout), which an idle
// node would otherwise wake up for twenty times a second at 50ms.
func raftConfig(cfg Config) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.HeartbeatTimeout = standaloneTimeout
	rc.ElectionTimeout = standaloneTimeout
	rc.LeaderLeaseTimeout = standaloneTimeout / 2
	rc.CommitTimeout = 5 * time.Millisecond
	rc.MaxAppendEntries = 256
	rc.BatchApplyCh = true
	rc.SnapshotThreshold = cfg.SnapshotEntries
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.Logger = newRaftLogger(cfg.Logger, nil)
	return rc
}

// syncedLogs is a standalone node's log store: it reports the entries
// StoreLogs stored (synced) to the applier (applier.stored) before it
// returns to raft.
type syncedLogs struct {
	raft.LogStore
	stored func([]*raft.Log)
}

// StoreLog stores l as StoreLogs does.
func (s *syncedLogs) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores logs and, if they are, reports them.
func (s *syncedLogs) StoreLogs(logs []*raft.Log) error {
	if err := s.LogStore.StoreLogs(logs); err != nil {
		return err
	}
	if s.stored != nil {
		s.stored(logs)
	}
	return nil
}

// standaloneTimeout is a standalone node's raft timeouts (raftConfig).
const standaloneTimeout = time.Second

// nudge has a follower look for its leader now rather than when its
// heartbeat timer fires: raft resets a follower's timer to fire at once
// when ReloadConfig shortens HeartbeatTimeout, so nudge shortens it by a
// millisecond and sets it back. A standalone node that is not leading (at
// start, or after its log refused a write) then elects itself at once.
func nudge(r *raft.Raft) {
	if r.State() != raft.Follower {
		return
	}
	rc := r.ReloadableConfig()
	hb := rc.HeartbeatTimeout
	rc.HeartbeatTimeout = hb - time.Millisecond
	if r.ReloadConfig(rc) == nil { // an error leaves the timer as it was
		rc.HeartbeatTimeout = hb
		r.ReloadConfig(rc)
	}
}

// bootstrap makes this node the only voter of a group with no state.
func (n *Node) bootstrap() error {
	has, err := raft.HasExistingState(n.cfg.Logs, n.cfg.Stable, n.cfg.Snapshots)
	if err != nil {
		return fmt.Errorf("read raft state: %w", err)
	}
	if has {
		return nil
	}
	conf := raft.Configuration{Servers: []raft.Server{{
		ID: raft.ServerID(n.cfg.NodeID), Address: raft.ServerAddress(n.cfg.NodeID), Suffrage: raft.Voter,
	}}}
	if err := n.raft.BootstrapCluster(conf).Error(); err != nil {
		return fmt.Errorf("bootstrap raft group: %w", err)
	}
	return nil
}

// waitReady waits for leadership, then for every committed entry to be
// applied (a barrier).
func (n *Node) waitReady(ctx context.Context) error {
	for n.raft.State() != raft.Leader {
		if err := n.brokenErr(); err != nil {
			return err
		}
		nudge(n.raft)
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting to lead the raft group: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := n.g.catchUp(0); err != nil {
		return fmt.Errorf("replay the log: %w", err)
	}
	return n.brokenErr()
}

// fail is called by the FSM for an entry it cannot apply.
func (n *Node) fail(index uint64, err error) {
	werr := fmt.Errorf("%w: entry %d: %v", ErrBroken, index, err)
	if n.broken.CompareAndSwap(nil, &werr) {
		n.log.Error("a log entry cannot be applied; the node stops serving", "index", index, "err", err)
	}
}

func (n *Node) brokenErr() error {
	if err := n.broken.Load(); err != nil {
		return *err
	}
	return nil
}

// refusing reports whether the log refuses writes, or the disk guard
// state changes.
func (n *Node) refusing() bool {
	return n.app.failed.Load() != nil || (n.cfg.Disk != nil && n.cfg.Disk.Err() != nil)
}

// refuse returns the error that stops a state change now, or nil.
func (n *Node) refuse() error {
	if err := n.app.failed.Load(); err != nil {
		return *err
	}
	return n.brokenErr()
}

// Close flushes the journal, waits for it to commit and stops raft. Its
// caller has stopped sending commands. It does not close the storage.
func (n *Node) Close(ctx context.Context) error {
	var err error
	n.closeOnce.Do(func() {
		close(n.app.stop)
		select {
		case <-n.app.done:
		case <-ctx.Done():
			err = fmt.Errorf("flush before stop: %w", ctx.Err())
		}
		if f := n.app.failed.Load(); f != nil && err == nil {
			err = *f
		}
		close(n.shutdownCh)
		if serr := n.raft.Shutdown().Error(); serr != nil && err == nil {
			err = serr
		}
	})
	return err
}

// Check is shards.Store.Check, refused while the log refuses writes.
func (n *Node) Check(key []byte, a engine.Algo, p engine.Params, cost, now int64) (engine.Result, error) {
	if err := n.refuse(); err != nil {
		return engine.Result{}, err
	}
	return n.store.Check(key, a, p, cost, now)
}

// Throttle is shards.Store.Throttle, refused while the log refuses writes.
func (n *Node) Throttle(key []byte, maxBurst, count, period, quantity, now int64) (engine.CellResult, error) {
	if err := n.refuse(); err != nil {
		return engine.CellResult{}, err
	}
	return n.store.Throttle(key, maxBurst, count, period, quantity, now)
}

// Reset is shards.Store.Reset, refused while the log refuses writes.
func (n *Node) Reset(key []byte, now int64) (bool, error) {
	if err := n.refuse(); err != nil {
		return false, err
	}
	return n.store.Reset(key, now)
}

// Flush is shards.Store.Flush, refused while the log refuses writes.
func (n *Node) Flush() error {
	if err := n.refuse(); err != nil {
		return err
	}
	return n.store.Flush()
}

// CheckRules is shards.Store.CheckRules, refused while the log refuses
// writes.
func (n *Node) CheckRules(q *rules.Query, now int64) error {
	if err := n.refuse(); err != nil {
		return err
	}
	return n.store.CheckRules(q, now)
}

// CheckAll is shards.Store.CheckAll, refused while the log refuses
// writes.
func (n *Node) CheckAll(ops []shards.Op, cost, now int64) (bool, error) {
	if err := n.refuse(); err != nil {
		return false, err
	}
	return n.store.CheckAll(ops, cost, now)
}

// SetRule is shards.Store.SetRule, refused while the log refuses writes.
func (n *Node) SetRule(r rules.Rule) (bool, error) {
	if err := n.refuse(); err != nil {
		return false, err
	}
	return n.store.SetRule(r)
}

// CreateRule is shards.Store.CreateRule, refused while the log refuses
// writes.
func (n *Node) CreateRule(r rules.Rule) error {
	if err := n.refuse(); err != nil {
		return err
	}
	return n.store.CreateRule(r)
}

// ChangeRules is shards.Store.ChangeRules (the change's records reach the
// log in one entry), refused while the log refuses writes.
func (n *Node) ChangeRules(ch rules.Change) (rules.ChangeResult, error) {
	if err := n.refuse(); err != nil {
		return rules.ChangeResult{}, err
	}
	return n.store.ChangeRules(ch)
}

// DeleteRule is shards.Store.DeleteRule, refused while the log refuses
// writes.
func (n *Node) DeleteRule(id string) (bool, error) {
	if err := n.refuse(); err != nil {
		return false, err
	}
	return n.store.DeleteRule(id)
}

// Transact is shards.Store.Transact (MULTI/EXEC): the commands run on
// the store's locked shards, and their changes are journaled like any
// other. While the log refuses writes, their replies, which wait for a
// commit in strong mode, become the error; in fast mode they are kept in
// memory and logged once the log takes writes again.
func (n *Node) Transact(plan shards.TxPlan, run func(tx *shards.Tx)) error {
	return n.store.Transact(plan, run)
}

// SetBlock is shards.Store.SetBlock, refused while the log refuses
// writes.
func (n *Node) SetBlock(b rules.Block, now int64) error {
	if err := n.refuse(); err != nil {
		return err
	}
	return n.store.SetBlock(b, now)
}

// Unblock is shards.Store.Unblock, refused while the log refuses writes.
func (n *Node) Unblock(identifier string, now int64) (bool, error) {
	if err := n.refuse(); err != nil {
		return false, err
	}
	return n.store.Unblock(identifier, now)
}

// ActiveBlocks returns the blocks live at now (shards.Store.ActiveBlocks).
func (n *Node) ActiveBlocks(now int64) []rules.Block { return n.store.ActiveBlocks(now) }

// BlockStats returns the store's counts of blocks.
func (n *Node) BlockStats(now int64) shards.BlockStats { return n.store.BlockStats(now) }

// NewestBlocks is shards.Store.NewestBlocks.
func (n *Node) NewestBlocks(count int, now int64) ([]rules.Block, int) {
	return n.store.NewestBlocks(count, now)
}

// Rule returns the rule with the given id.
func (n *Node) Rule(id string) (rules.Rule, bool) { return n.store.Rule(id) }

// Rules returns every rule in id order.
func (n *Node) Rules() []rules.Rule { return n.store.Rules() }

// RuleCount returns the number of rules.
func (n *Node) RuleCount() int { return n.store.RuleCount() }

// Len returns the number of keys held.
func (n *Node) Len() int { return n.store.Len() }

// Persistent is shards.Store.Persistent (INFO keyspace).
func (n *Node) Persistent() int { return n.store.Persistent() }

// MemoryBytes returns the memory the keys take.
func (n *Node) MemoryBytes() int64 { return n.store.MemoryBytes() }

// MaxMemory returns the store's memory bound (shards.Store.MaxMemory).
func (n *Node) MaxMemory() int64 { return n.store.MaxMemory() }

// MaxMemoryPolicy returns the store's policy at its memory bound.
func (n *Node) MaxMemoryPolicy() string { return n.store.MaxMemoryPolicy() }

// Evicted returns the keys evicted under the memory bound so far.
func (n *Node) Evicted() int64 { return n.store.Evicted() }

// Prefetch is shards.Store.Prefetch.
func (n *Node) Prefetch(keys [][]byte) uint64 { return n.store.Prefetch(keys) }

// Digest returns the state digest at now (shards.Store.Digest).
func (n *Node) Digest(now int64) uint64 { return n.store.Digest(now) }

// Snapshot takes a snapshot now and compacts the log.
func (n *Node) Snapshot() error {
	n.snapMu.Lock()
	defer n.snapMu.Unlock()
	err := n.raft.Snapshot().Error()
	if errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil
	}
	return err
}

// LastSnapshot returns the Unix time of the last snapshot this process
// wrote, or 0.
func (n *Node) LastSnapshot() int64 {
	if s := n.lastSnap.Load(); s != nil {
		return s.at.Unix()
	}
	return 0
}

// snapshotLoop takes a snapshot when fsm.snapshotDue says so (raft itself
// counts entries), checking every second.
func (n *Node) snapshotLoop() {
	every(n.shutdownCh, time.Second, func() {
		var last int64
		if s := n.lastSnap.Load(); s != nil {
			last = s.bytes
		}
		if n.fsm.snapshotDue(n.cfg.SnapshotBytes, last) {
			if err := n.Snapshot(); err != nil {
				n.log.Warn("snapshot failed", "err", err)
			}
		}
	})
}

// snapshotDone records a snapshot's outcome (called from Persist).
func (n *Node) snapshotDone(d time.Duration, records, bytes int64, err error) {
	n.metrics.snapshot(d, err)
	if err != nil {
		n.log.Warn("snapshot failed", "err", err, "duration", d)
		return
	}
	n.lastSnap.Store(&snapInfo{at: time.Now(), records: records, bytes: bytes, duration: d})
	n.log.Info("snapshot written", "records", records, "bytes", bytes, "duration", d.Round(time.Millisecond))
}
