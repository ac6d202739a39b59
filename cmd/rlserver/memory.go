package main

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/server"
)

// maxBuffered returns the budget for requests larger than usual (see
// server.Config.MaxBuffered): the default, or a quarter of --maxmemory if
// that is smaller, but room for two of the largest requests.
func maxBuffered(maxMemory int64) int64 {
	if maxMemory <= 0 {
		return server.DefaultMaxBuffered
	}
	return max(min(server.DefaultMaxBuffered, maxMemory/4), 2*server.DefaultMaxRequest)
}

// blockCost is what --max-blocks's default takes a block to cost: a bit
// more than rules.BlockBytes of a block a rule makes (its identifier,
// rule id and reason, about 200 bytes).
const blockCost = 256

// defaultMaxBlocks is --max-blocks without a --maxmemory.
const defaultMaxBlocks = 1_000_000

// maxBlocks returns the bound on blocks: --max-blocks, or if 0, as many
// as a quarter of --maxmemory holds (at least 1000), or defaultMaxBlocks
// without one.
func maxBlocks(cfg Config) int {
	switch {
	case cfg.MaxBlocks > 0:
		return cfg.MaxBlocks
	case cfg.MaxMemory > 0:
		return int(max(1000, cfg.MaxMemory/4/blockCost))
	}
	return defaultMaxBlocks
}

// warnBlocks warns when --max-blocks lets blocks take more than half of
// --maxmemory: the keys would be evicted to make room for them.
func warnBlocks(cfg Config, log *slog.Logger) {
	if n := int64(maxBlocks(cfg)); cfg.MaxMemory > 0 && n*blockCost > cfg.MaxMemory/2 {
		log.Warn("--max-blocks lets blocks take more than half of --maxmemory; keys are evicted to make room for them",
			"max_blocks", n, "bytes_at_the_bound", n*blockCost, "maxmemory", cfg.MaxMemory)
	}
}

// limitHeap sets the Go runtime's soft memory limit a little above
// --maxmemory (an eighth more, and 32 MiB for the runtime and the rest),
// so that the garbage collector works harder rather than let the heap
// grow to twice what is live (the key state is mostly pointer-free pages,
// cheap to collect), unless GOMEMLIMIT already sets one.
func limitHeap(maxMemory int64, log *slog.Logger) {
	if maxMemory <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := maxMemory + maxMemory/8 + 32<<20
	debug.SetMemoryLimit(limit)
	log.Info("heap limited for --maxmemory", "maxmemory", maxMemory, "go_memory_limit", limit)
}

// registerMaxMemory exports --maxmemory as rlserver_maxmemory_bytes (0:
// no bound), beside the state and connection memory it bounds
// (rlserver_state_bytes, rlserver_client_memory_bytes), so that an alert
// can compare them.
func registerMaxMemory(reg prometheus.Registerer, maxMemory int64) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "rlserver_maxmemory_bytes",
		Help: "The bound on the memory of key state and client connections (--maxmemory); 0 is none."})
	g.Set(float64(maxMemory))
	reg.MustRegister(g)
}
