package cluster

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/raftlog"
)

// metrics are the node's Prometheus series and the counters INFO
// persistence reports.
type metrics struct {
	entries      prometheus.Counter
	entryBytes   prometheus.Counter
	batchRecords prometheus.Histogram
	appendTime   prometheus.Histogram
	snapTime     prometheus.Histogram
	snapFailures prometheus.Counter

	nEntries      atomic.Uint64
	nRecords      atomic.Uint64
	lastRecords   atomic.Int64
	lastBytes     atomic.Int64
	lastAppendDur atomic.Int64 // ns
}

// newMetrics registers the node's series with reg: applied reads the
// applied index, refusing whether the log refuses writes, and logStats
// (if not nil) the log store's counters.
func newMetrics(reg prometheus.Registerer, applied func() uint64, refusing func() bool, logStats func() LogStats) *metrics {
	m := &metrics{
		entries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rlserver_log_entries_total", Help: "Log entries appended by this node (each a batch of changed keys)."}),
		entryBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rlserver_log_bytes_total", Help: "Bytes of log entries appended by this node."}),
		batchRecords: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rlserver_log_batch_records", Help: "State records (changed keys, rule changes) per log entry.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10)}),
		appendTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rlserver_log_append_seconds", Help: "Time from collecting a batch of changes to its commit in the log.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 14)}),
		snapTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rlserver_snapshot_seconds", Help: "Time to write a snapshot of the whole state.",
			Buckets: prometheus.ExponentialBuckets(1e-3, 2, 16)}),
		snapFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rlserver_snapshot_failures_total", Help: "Snapshots that failed."}),
	}
	reg.MustRegister(m.entries, m.entryBytes, m.batchRecords, m.appendTime, m.snapTime, m.snapFailures,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rlserver_raft_applied_index", Help: "Index of the last log entry applied to the state."},
			func() float64 { return float64(applied()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rlserver_log_refusing", Help: "1 while the log refuses writes (state changes are refused), else 0."},
			func() float64 {
				if refusing() {
					return 1
				}
				return 0
			}),
	)
	if logStats != nil {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "rlserver_log_fsyncs_total", Help: "Synced writes of the log store (fsyncs)."},
			func() float64 { return float64(logStats().Fsyncs) }))
	}
	return m
}

// committed records an entry that committed.
func (m *metrics) committed(records, bytes int, d time.Duration) {
	m.entries.Inc()
	m.entryBytes.Add(float64(bytes))
	m.batchRecords.Observe(float64(records))
	m.appendTime.Observe(d.Seconds())
	m.nEntries.Add(1)
	m.nRecords.Add(uint64(records))
	m.lastRecords.Store(int64(records))
	m.lastBytes.Store(int64(bytes))
	m.lastAppendDur.Store(int64(d))
}

func (m *metrics) snapshot(d time.Duration, err error) {
	if err != nil {
		m.snapFailures.Inc()
		return
	}
	m.snapTime.Observe(d.Seconds())
}

// appendLogInfo appends INFO persistence's log_* fields to out: the
// entries and records written so far, the last batch, the average batch
// and the last append's latency, then, if ls is not nil, the fsyncs and
// entry bytes of the node's log.
func (m *metrics) appendLogInfo(out []string, ls *LogStats) []string {
	itoa := func(v int64) string { return strconv.FormatInt(v, 10) }
	avg := "0"
	if e := m.nEntries.Load(); e > 0 {
		avg = strconv.FormatFloat(float64(m.nRecords.Load())/float64(e), 'f', 1, 64)
	}
	out = append(out,
		"log_entries", itoa(int64(m.nEntries.Load())),
		"log_records", itoa(int64(m.nRecords.Load())),
		"log_last_batch_records", itoa(m.lastRecords.Load()),
		"log_last_batch_bytes", itoa(m.lastBytes.Load()),
		"log_avg_batch_records", avg,
		"log_last_append_us", itoa(m.lastAppendDur.Load()/1e3),
	)
	if ls != nil {
		out = append(out, "log_fsyncs", strconv.FormatUint(ls.Fsyncs, 10), "log_bytes", strconv.FormatUint(ls.EntriesBytes, 10))
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// appendDiskInfo appends INFO persistence's rl_disk_* fields of space (nil
// for a node without one) to out.
func appendDiskInfo(out []string, space *raftlog.Space) []string {
	if space == nil {
		return out
	}
	s := space.Stats()
	itoa := func(v int64) string { return strconv.FormatInt(v, 10) }
	status := "ok"
	switch {
	case !s.Guarded:
		status = "unguarded"
	case s.Low:
		status = "low"
	}
	var since int64
	if s.Low {
		since = s.LowSince.Unix()
	}
	return append(out,
		"rl_disk_status", status,
		"rl_disk_free_bytes", itoa(s.Free),
		"rl_disk_total_bytes", itoa(s.Total),
		"rl_disk_min_free_bytes", itoa(s.MinFree),
		"rl_disk_ballast_bytes", itoa(int64(b2f(s.BallastPresent))*s.Ballast),
		"rl_disk_low_since", itoa(since),
		"rl_disk_low_episodes", itoa(int64(s.Episodes)),
		"rl_disk_writes_refused", itoa(int64(s.Refused)),
	)
}

// logStatus is INFO persistence's rl_log_status: "refusing" while the log
// refuses entries (failed, the standalone node's), "disk_low" while the
// disk guard refuses state changes, else "ok".
func logStatus(failed bool, space *raftlog.Space) string {
	switch {
	case failed:
		return "refusing"
	case space != nil && space.Err() != nil:
		return "disk_low"
	}
	return "ok"
}

// PersistenceInfo returns the fields of INFO persistence, as alternating
// names and values.
func (n *Node) PersistenceInfo() []string {
	st := n.raft.Stats()
	m := n.metrics
	itoa := func(v int64) string { return strconv.FormatInt(v, 10) }
	status := logStatus(n.refuse() != nil, n.cfg.Disk)
	out := []string{
		"loading", "0",
		"rdb_changes_since_last_save", itoa(int64(n.store.Pending())),
		"aof_enabled", "0",
		"rl_durable", "1",
		"rl_consistency", n.cfg.Consistency.String(),
		"rl_flush_interval_ms", itoa(n.cfg.FlushInterval.Milliseconds()),
		"rl_log_status", status,
		"raft_applied_index", itoa(int64(n.fsm.applied.Load())),
		"raft_commit_index", st["commit_index"],
		"raft_last_log_index", st["last_log_index"],
		"raft_term", st["term"],
		"last_snapshot_index", st["last_snapshot_index"],
	}
	var ls *LogStats
	if n.cfg.LogStats != nil {
		s := n.cfg.LogStats()
		ls = &s
	}
	out = m.appendLogInfo(out, ls)
	if s := n.lastSnap.Load(); s != nil {
		out = append(out, "last_snapshot_time", itoa(s.at.Unix()), "last_snapshot_records", itoa(s.records),
			"last_snapshot_bytes", itoa(s.bytes), "last_snapshot_duration_ms", itoa(s.duration.Milliseconds()))
	} else {
		out = append(out, "last_snapshot_time", "0")
	}
	return appendDiskInfo(out, n.cfg.Disk)
}

// groupApplied exports rlserver_group_applied_index{group}: the index of
// the last log entry each Raft group this node hosts has applied ("meta"
// for the meta group). Every replica of a group applies the same log, so
// the highest value of a group across the nodes less a node's own is how
// far that replica lags.
type groupApplied struct {
	c    *Cluster
	desc *prometheus.Desc
}

func newGroupApplied(c *Cluster) *groupApplied {
	return &groupApplied{c: c, desc: prometheus.NewDesc("rlserver_group_applied_index",
		"Index of the last log entry applied by this node's replica of each Raft group it hosts (group \"meta\": the meta group).",
		[]string{"group"}, nil)}
}

// Describe sends the one descriptor.
func (g *groupApplied) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect sends the applied index of every hosted group.
func (g *groupApplied) Collect(ch chan<- prometheus.Metric) {
	for _, gr := range g.c.hostedGroups() {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(gr.fsm.applied.Load()), strconv.Itoa(int(gr.id)))
	}
	ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(g.c.meta.Applied()), "meta")
}
