package snapshot

import (
	"sync/atomic"
	"time"
)

// Stats are a Store's storeCounters since NewStore, for metrics.
type Stats struct {
	// Snapshots counts the snapshots committed by a sink's Close.
	Snapshots uint64
	// LastDuration is the time from Create to the committed Close of the
	// latest snapshot; LastSize is its data size in bytes. Both are 0
	// before the first.
	LastDuration time.Duration
	LastSize     int64
}

// storeCounters are the atomics behind Stats.
type storeCounters struct {
	snapshots    atomic.Uint64
	lastDuration atomic.Int64
	lastSize     atomic.Int64
}

func (c *storeCounters) written(took time.Duration, size int64) {
	c.lastDuration.Store(int64(took))
	c.lastSize.Store(size)
	c.snapshots.Add(1)
}

// Stats returns the Store's storeCounters. It is safe to call at any time;
// the fields are read one by one.
func (s *Store) Stats() Stats {
	return Stats{
		Snapshots:    s.stats.snapshots.Load(),
		LastDuration: time.Duration(s.stats.lastDuration.Load()),
		LastSize:     s.stats.lastSize.Load(),
	}
}
