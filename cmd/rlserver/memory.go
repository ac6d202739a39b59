package main

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/raftlog"
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

// memoryBudget is how a node bounded by --maxmemory shares out its
// memory. The live heap stays under --maxmemory: the key state and the
// connections take what the rest of the heap leaves (the stores count the
// rest as held, heapMeter, and evict to stay under the bound), Pebble's
// memtables are sized to a thirty-second of it and its block cache to the
// same (durable nodes only), and the Go runtime's soft limit (GOMEMLIMIT's
// semantics) leaves the collector the room above what is live, so that
// the process's resident memory stays under 1.25 × --maxmemory + 32 MB
// (see README, "Memory").
type memoryBudget struct {
	memTable, cache int64 // Pebble's, for raftlog.Options; 0: defaults
	goLimit         int64 // the runtime's soft limit; 0: none
}

// heapMeter measures the live heap that the key state and the connections
// do not account for: Pebble's memtables and buffers, the journal on its
// way to the log, the libraries' tables, the metrics. The stores count it
// as held (shards.Options.Held), INFO as used_memory_overhead, so that
// --maxmemory bounds the whole live heap, as Redis's bounds all it
// allocates. It is measured once after each collection: the live heap the
// collection found, less what the state and connections account for just
// after it. (Measured at other times, the live heap would be stale: while
// the state shrinks under eviction its bytes would turn into overhead, the
// stores would evict more, and the state would swing by megabytes.)
type heapMeter struct {
	overhead atomic.Int64 // the live heap less the state and connections
	peak     atomic.Int64 // the largest live heap seen
	sample   []metrics.Sample
	cycles   uint64 // the collections seen
}

// newHeapMeter returns a meter that starts at the heap in use now (after
// a collection): what the process holds before its state opens.
func newHeapMeter() *heapMeter {
	m := &heapMeter{sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}}
	runtime.GC()
	live, cycles := m.read()
	m.overhead.Store(live)
	m.cycles = cycles
	return m
}

// read returns the heap that the last collection found live, and the
// collections so far.
func (m *heapMeter) read() (live int64, cycles uint64) {
	metrics.Read(m.sample)
	if m.sample[0].Value.Kind() == metrics.KindUint64 {
		live = int64(m.sample[0].Value.Uint64())
	}
	if m.sample[1].Value.Kind() == metrics.KindUint64 {
		cycles = m.sample[1].Value.Uint64()
	}
	return live, cycles
}

// held returns the overhead last measured, for shards.Options.Held.
func (m *heapMeter) held() int64 { return m.overhead.Load() }

// Memory returns the overhead and the peak, for server.Config.HeapMemory.
func (m *heapMeter) Memory() (overhead, peak int64) { return m.overhead.Load(), m.peak.Load() }

// measure brings the overhead up to date if a collection ran since the
// last call: the live heap it found less accounted(), the bytes of the key
// state and connections now. It reports whether one had.
func (m *heapMeter) measure(accounted func() int64) bool {
	live, cycles := m.read()
	if cycles == m.cycles {
		return false
	}
	m.cycles = cycles
	m.overhead.Store(max(live-accounted(), 0))
	if live > m.peak.Load() {
		m.peak.Store(live)
	}
	return true
}

// run measures after each collection until ctx ends. It is called by the
// collector, not by a timer: a finalizer on a sentinel, armed anew each
// time it runs, runs once after every cycle that found the last one
// unreachable, so an idle node that collects nothing is never woken.
func (m *heapMeter) run(ctx context.Context, accounted func() int64) {
	runtime.SetFinalizer(new(gcSentinel), func(*gcSentinel) {
		if ctx.Err() == nil {
			m.measure(accounted)
			m.run(ctx, accounted)
		}
	})
}

// gcSentinel is heapMeter's sentinel: a pointer makes it an object of its
// own (the tiny allocator groups small pointer-free ones, whose finalizers
// may then never run).
type gcSentinel struct{ _ *byte }

// heapSlackMin is the least the soft limit leaves the runtime above
// --maxmemory; it leaves a quarter of --maxmemory above it otherwise. The
// executable's pages (some 27 MB of a running node's resident memory) take
// the 32 MB the bound adds. (A quarter less 4 MiB kept the resident memory
// 4 MB lower, and made the collector run half again as often: a
// bystander's worst wait under a key flood in memory was 150-210 ms,
// against 100-110 ms with a quarter and 56 ms without a budget.)
const heapSlackMin = 8 << 20

// budgetFor returns the budget for --maxmemory (0: no bound, no budget) on
// a durable node or an in-memory one.
func budgetFor(maxMemory int64, durable bool) memoryBudget {
	if maxMemory <= 0 {
		return memoryBudget{}
	}
	b := memoryBudget{goLimit: maxMemory + max(maxMemory/4, heapSlackMin)}
	if durable {
		b.memTable = raftlog.MemTableFor(maxMemory)
		b.cache = raftlog.CacheFor(maxMemory)
	}
	return b
}

// limitHeap sets the Go runtime's soft memory limit to the budget's,
// unless GOMEMLIMIT already sets one.
func limitHeap(b memoryBudget, maxMemory int64, log *slog.Logger) {
	if b.goLimit <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetMemoryLimit(b.goLimit)
	log.Info("memory budgeted for --maxmemory", "maxmemory", maxMemory, "go_memory_limit", b.goLimit,
		"memtable", b.memTable, "block_cache", b.cache)
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
