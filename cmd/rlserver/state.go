package main

import (
	"context"
	"fmt"
	"log/slog"
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
}

// state is the node's key state and how to stop it.
type state struct {
	store   *shards.Store
	lim     limiter
	node    *cluster.Node // nil in memory
	release func()
}

// openState opens the key state: in memory with --data-dir "", else a
// durable node on the data directory (locked while it runs), restored from
// its snapshot and log before it returns.
func openState(ctx context.Context, cfg Config, opts shards.Options, reg prometheus.Registerer, log *slog.Logger) (*state, error) {
	store := shards.NewStore(opts)
	if cfg.DataDir == "" {
		log.Warn("--data-dir is empty: state is kept in memory only and a restart forgets it")
		return &state{store: store, lim: store, release: func() {}}, nil
	}
	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	disk, err := cluster.OpenStorage(cfg.DataDir, cluster.StorageOptions{NodeID: cfg.NodeID, Logger: log})
	if err != nil {
		unlock()
		return nil, err
	}
	consistency := cluster.Fast
	if cfg.Consistency == "strong" {
		consistency = cluster.Strong
	}
	node, err := cluster.Open(ctx, cluster.Config{
		Store: store, Logs: disk.Logs, Stable: disk.Logs, Snapshots: disk.Snaps, NodeID: disk.NodeID,
		Consistency: consistency, FlushInterval: cfg.FlushInterval,
		SnapshotEntries: cfg.SnapshotEntries, SnapshotBytes: cfg.SnapshotBytes,
		SnapshotInterval: cfg.SnapshotInterval, TrailingLogs: cfg.TrailingLogs,
		Logger: log, Registerer: reg, LogStats: disk.LogStats, ReuseEntries: true,
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
		"rules", store.RuleCount(), "consistency", consistency, "took", time.Since(start).Round(time.Millisecond))
	return &state{store: store, lim: node, node: node, release: func() {
		disk.Close()
		unlock()
	}}, nil
}

// close flushes a durable node's last changes into its log and closes the
// data directory.
func (st *state) close(ctx context.Context, log *slog.Logger) {
	if st.node != nil {
		if err := st.node.Close(ctx); err != nil {
			log.Error("the last changes may not be in the log", "err", err)
		} else {
			log.Info("state flushed to the log")
		}
	}
	st.release()
}
