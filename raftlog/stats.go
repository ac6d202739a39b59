package raftlog

import (
	"sync/atomic"
	"time"
)

// Stats are a Store's counters since New, for metrics and INFO
// persistence. They only grow, except LastAppend.
type Stats struct {
	// Syncs counts the commits made with pebble.Sync: appends, range
	// deletions and stable-store writes. Commits of several groups that
	// land together share one fsync of the WAL, so the disk may see fewer.
	Syncs uint64
	// Appends counts the StoreLog and StoreLogs calls that committed.
	Appends uint64
	// Entries and Bytes count the log entries appended and their encoded
	// size (values only, without keys).
	Entries, Bytes uint64
	// AppendTime is the total time spent in the committed appends, from
	// the call to the end of the synced commit; AppendTime / Appends is
	// the mean append latency.
	AppendTime time.Duration
	// LastAppend is the latency of the latest committed append.
	LastAppend time.Duration
}

// counters are the atomics behind Stats.
type counters struct {
	syncs, appends, entries, bytes atomic.Uint64
	appendTime, lastAppend         atomic.Int64
}

func (c *counters) appended(entries, bytes int, took time.Duration) {
	c.syncs.Add(1)
	c.appends.Add(1)
	c.entries.Add(uint64(entries))
	c.bytes.Add(uint64(bytes))
	c.appendTime.Add(int64(took))
	c.lastAppend.Store(int64(took))
}

// Stats returns the Store's counters. It is safe to call at any time; the
// fields are read one by one, so a Stats taken during a write may count
// part of it.
func (s *Store) Stats() Stats {
	c := &s.stats
	return Stats{
		Syncs:      c.syncs.Load(),
		Appends:    c.appends.Load(),
		Entries:    c.entries.Load(),
		Bytes:      c.bytes.Load(),
		AppendTime: time.Duration(c.appendTime.Load()),
		LastAppend: time.Duration(c.lastAppend.Load()),
	}
}
