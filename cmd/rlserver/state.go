package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/server"
	"github.com/rlserver/rlserver/shards"
)

// limiter is what the server and the HTTP API check against: the key state
// in memory (*shards.Store), or a durable node (*cluster.Node) over it.
type limiter interface {
	server.Limiter
	server.RuleStore
	CreateRule(r rules.Rule) error
	ChangeRules(ch rules.Change) (rules.ChangeResult, error)
}

// only returns a state's stores function for a node with one store.
func only(store *shards.Store) func() []*shards.Store {
	stores := []*shards.Store{store}
	return func() []*shards.Store { return stores }
}

// state is the node's key state and how to stop it.
type state struct {
	store *shards.Store // nil in a cluster, whose groups have a store each
	// stores returns every store the node has now, for the background
	// sweep: a cluster node's change as replicas are added and dropped.
	stores  func() []*shards.Store
	lim     limiter
	node    *cluster.Node    // a durable standalone node, else nil
	cl      *cluster.Cluster // a cluster node, else nil
	disk    *cluster.Storage // the data directory, else nil
	release func()
	// now is the node's decision clock (nodeClock.Now), ns since the
	// epoch: the time of every check, log entry, block and sweep.
	now func() int64
}

// openState opens the key state: in memory with --data-dir "", else a
// durable node on the data directory (locked while it runs), restored from
// its snapshot and log before it returns.
//
// A cluster node's directory remembers the node's settings (see
// recallSettings): those cfg was not given are set in *cfg from it. The
// directory also carries the decision clock clk across restarts
// (nodeClock.resume), and clk is raised to the time of the latest entry
// of each group the node leads.
func openState(ctx context.Context, cfg *Config, clk *nodeClock, opts shards.Options, reg prometheus.Registerer, log *slog.Logger) (*state, error) {
	if cfg.DataDir == "" {
		log.Warn("--data-dir is empty: state is kept in memory only and a restart forgets it")
		store := shards.NewStore(opts)
		return &state{store: store, stores: only(store), lim: store, release: func() {}, now: clk.Now}, nil
	}
	dirLock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	unlock := func() {
		clk.save() // the decisions have stopped: the time they ended at (if persisting)
		dirLock()
	}
	recalled, err := recallSettings(cfg, cfg.DataDir)
	if err != nil {
		unlock()
		return nil, err
	}
	if len(recalled) > 0 {
		sort.Strings(recalled)
		log.Info("settings recalled from the data directory (give them again to change them)", "settings", strings.Join(recalled, ","),
			"listen", cfg.Listen, "http", cfg.HTTP, "raft_addr", cfg.RaftAddr)
	}
	start := time.Now()
	budget := budgetFor(cfg.MaxMemory, true)
	disk, err := cluster.OpenStorage(cfg.DataDir, cluster.StorageOptions{NodeID: cfg.NodeID, Logger: log,
		MinFreeDisk: cfg.MinFreeDisk, DiskBallast: cfg.DiskBallast, Registerer: reg, AcceptDataLoss: cfg.AcceptDataLoss,
		MemTableSize: budget.memTable, CacheSize: budget.cache})
	if err != nil {
		unlock()
		if errors.Is(err, cluster.ErrDamaged) && !errors.Is(err, cluster.ErrUnrepairable) {
			err = fmt.Errorf("%w (--accept-data-loss starts on what is left)", err)
		}
		return nil, err
	}
	clk.resume(cfg.DataDir)      // the directory passed its checks
	opts.Refuse = disk.Space.Err // state changes wait for disk space
	layout, err := disk.LoadLayout()
	if err == nil && layout == nil && cfg.Peers == "" && disk.HasState() {
		err = nil // a standalone node's directory
	}
	if err == nil && (layout != nil || cfg.Peers != "" || cfg.Join != "") {
		return openCluster(ctx, *cfg, clk, opts, disk, unlock, reg, log)
	}
	if err != nil {
		disk.Close()
		unlock()
		return nil, err
	}
	dur := durability(*cfg, clk, reg, log)
	store := shards.NewStore(opts)
	node, err := cluster.Open(ctx, cluster.Config{
		Store: store, Logs: disk.Logs, Stable: disk.Logs, Snapshots: disk.Snaps, NodeID: disk.NodeID,
		Durability: dur, LogStats: disk.LogStats, ReuseEntries: true, Disk: disk.Space,
	})
	if err == nil {
		err = disk.MarkInitialised()
	}
	if err != nil {
		disk.Close()
		unlock()
		return nil, fmt.Errorf("data directory %s: %w", cfg.DataDir, err)
	}
	log.Info("state loaded", "data_dir", cfg.DataDir, "node_id", disk.NodeID, "keys", store.Len(),
		"rules", store.RuleCount(), "consistency", dur.Consistency, "took", time.Since(start).Round(time.Millisecond))
	if disk.Space.Err() != nil {
		log.Warn("started read-only: the disk is below --min-free-disk, so state changes are refused until space is freed",
			"data_dir", cfg.DataDir, "min_free_disk", cfg.MinFreeDisk)
	}
	return &state{store: store, stores: only(store), lim: node, node: node, disk: disk, now: clk.Now, release: func() {
		disk.Close()
		unlock()
	}}, nil
}

// openCluster starts this node as a member of a cluster on disk, whose
// data groups each get a store made with opts (the shards and the memory
// bound shared out among them).
func openCluster(ctx context.Context, cfg Config, clk *nodeClock, opts shards.Options, disk *cluster.Storage, unlock func(), reg prometheus.Registerer, log *slog.Logger) (*state, error) {
	fail := func(err error) (*state, error) {
		disk.Close()
		unlock()
		return nil, fmt.Errorf("data directory %s: %w", cfg.DataDir, err)
	}
	peers, err := parsePeers(cfg.Peers)
	if err != nil {
		return fail(err)
	}
	if err := rememberSettings(&cfg, cfg.DataDir); err != nil {
		return fail(fmt.Errorf("remember the node's settings: %w", err))
	}
	raftHost := cfg.RaftAddr
	if cfg.RaftAdvertise != "" {
		raftHost = cfg.RaftAdvertise
	}
	resp, err := announce(cfg.Listen, cfg.Announce, raftHost)
	if err != nil {
		return fail(err)
	}
	httpAddr := ""
	if cfg.HTTP != "" {
		if httpAddr, err = announce(cfg.HTTP, cfg.Announce, raftHost); err != nil {
			return fail(err)
		}
	}
	dur := durability(cfg, clk, reg, log)
	var blockBytes atomic.Int64 // the meta group's blocks, which every store counts its share of
	held := opts.Held
	cl, err := cluster.OpenCluster(ctx, cluster.ClusterConfig{
		Storage: disk, NodeID: disk.NodeID, RaftAddr: cfg.RaftAddr, RaftAdvertise: cfg.RaftAdvertise, Secret: cfg.AdminToken,
		RESPAddr: resp, HTTPAddr: httpAddr,
		Peers: peers, Groups: cfg.Groups, Proxy: cfg.Proxy,
		NewStore: func(hosted int) *shards.Store {
			per := opts
			per.Shards = max(16, opts.Shards/hosted)
			per.MaxMemory = opts.MaxMemory / int64(hosted)
			per.Held = func() int64 {
				n := blockBytes.Load()
				if held != nil {
					n += held() // the rest of the heap (heapMeter)
				}
				return n / int64(hosted)
			}
			return shards.NewStore(per)
		},
		MaxBlocks: opts.MaxBlocks, BlockBytes: &blockBytes,
		Durability: dur, Join: joinVia(cfg),
		HeartbeatTimeout: cfg.HeartbeatTimeout, ElectionTimeout: cfg.ElectionTimeout,
		LeaderLeaseTimeout: cfg.LeaderLeaseTimeout,
	})
	if err == nil {
		err = disk.MarkInitialised()
	}
	if err != nil {
		return fail(err)
	}
	log.Info("cluster node started", "node_id", disk.NodeID, "raft", cl.RaftAddr().String(), "announce", resp,
		"groups", cl.Groups(), "consistency", dur.Consistency)
	return &state{lim: clusterNode{cl}, cl: cl, stores: cl.Stores, disk: disk, now: clk.Now, release: func() {
		disk.Close()
		unlock()
	}}, nil
}

// durability returns the log and snapshot settings of cfg, with clk as
// the clock that stamps log entries and is raised to the groups' latest.
func durability(cfg Config, clk *nodeClock, reg prometheus.Registerer, log *slog.Logger) cluster.Durability {
	consistency := cluster.Fast
	if cfg.Consistency == "strong" {
		consistency = cluster.Strong
	}
	return cluster.Durability{Consistency: consistency, FlushInterval: cfg.FlushInterval,
		SnapshotEntries: cfg.SnapshotEntries, SnapshotBytes: cfg.SnapshotBytes,
		SnapshotInterval: cfg.SnapshotInterval, TrailingLogs: cfg.TrailingLogs,
		Clock: clk.Now, RaiseClock: clk.raise, Logger: log, Registerer: reg}
}

// announce returns the address clients reach a listener on listen at: its
// host (or announceHost, or, when listen's host is unspecified, the host of
// raftAddr) with listen's port.
func announce(listen, announceHost, raftAddr string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("%q: %w", listen, err)
	}
	switch {
	case announceHost != "":
		host = announceHost
	case host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified():
		if h, _, err := net.SplitHostPort(raftAddr); err == nil && h != "" {
			host = h
		}
	}
	return net.JoinHostPort(host, port), nil
}

// close flushes a durable node's last changes into its log and closes the
// data directory.
func (st *state) close(ctx context.Context, log *slog.Logger) {
	if st.cl != nil {
		if err := st.cl.Close(ctx); err != nil {
			log.Error("the last changes may not be in the log", "err", err)
		} else {
			log.Info("state flushed to the log; leadership handed over")
		}
	}
	if st.node != nil {
		if err := st.node.Close(ctx); err != nil {
			log.Error("the last changes may not be in the log", "err", err)
		} else {
			log.Info("state flushed to the log")
		}
	}
	st.release()
}
