package server

import (
	"github.com/prometheus/client_golang/prometheus"
)

// blockCollector exports a BlockStore's counts: rlserver_blocks_made_total
// by source (the rule that made a block, or "manual"), rlserver_blocks_active,
// rlserver_block_denials_total, rlserver_blocks_dropped_total (the cap,
// --max-blocks) and rlserver_blocks_memory_bytes. It reads them at each
// scrape.
type blockCollector struct {
	bs      BlockStore
	clock   func() int64
	made    *prometheus.Desc
	active  *prometheus.Desc
	denied  *prometheus.Desc
	dropped *prometheus.Desc
	bytes   *prometheus.Desc
}

func newBlockCollector(bs BlockStore, clock func() int64) *blockCollector {
	return &blockCollector{bs: bs, clock: clock,
		made: prometheus.NewDesc("rlserver_blocks_made_total",
			"Blocks made, by source: the id of the rule that blocked an identifier after repeated denials, or manual (RL.BLOCK, PUT /v1/blocks). In a cluster, the blocks this node applied.",
			[]string{"source"}, nil),
		active: prometheus.NewDesc("rlserver_blocks_active", "Identifiers blocked now.", nil, nil),
		denied: prometheus.NewDesc("rlserver_block_denials_total",
			"Rules checks (RL.CHECKRULES, /v1/checkrules, forward auth) denied by a block, without charging any counter.", nil, nil),
		dropped: prometheus.NewDesc("rlserver_blocks_dropped_total",
			"Blocks dropped, those nearest to their end first, to keep within --max-blocks (in a cluster, also blocks not proposed while as many as the meta group takes were on their way).", nil, nil),
		bytes: prometheus.NewDesc("rlserver_blocks_memory_bytes",
			"Memory the blocks held take; it counts against --maxmemory.", nil, nil),
	}
}

// Describe sends the descriptors (prometheus.Collector).
func (b *blockCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- b.made
	ch <- b.active
	ch <- b.denied
	ch <- b.dropped
	ch <- b.bytes
}

// Collect sends the current counts (prometheus.Collector).
func (b *blockCollector) Collect(ch chan<- prometheus.Metric) {
	st := b.bs.BlockStats(b.clock())
	for src, n := range st.Made {
		ch <- prometheus.MustNewConstMetric(b.made, prometheus.CounterValue, float64(n), src)
	}
	ch <- prometheus.MustNewConstMetric(b.active, prometheus.GaugeValue, float64(st.Active))
	ch <- prometheus.MustNewConstMetric(b.denied, prometheus.CounterValue, float64(st.Denied))
	ch <- prometheus.MustNewConstMetric(b.dropped, prometheus.CounterValue, float64(st.Dropped))
	ch <- prometheus.MustNewConstMetric(b.bytes, prometheus.GaugeValue, float64(st.Bytes))
}
