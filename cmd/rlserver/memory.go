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
