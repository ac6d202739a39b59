package datadir

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/raftlog"
)

// registerDiskMetrics registers the rlserver_disk_* series of space with
// reg.
func registerDiskMetrics(reg prometheus.Registerer, space *raftlog.Space) {
	gauge := func(name, help string, v func(s raftlog.SpaceStats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return v(space.Stats()) })
	}
	counter := func(name, help string, v func(s raftlog.SpaceStats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return v(space.Stats()) })
	}
	reg.MustRegister(
		gauge("rlserver_disk_low", "1 while the data directory's disk has less than --min-free-disk free and state changes are refused, else 0.",
			func(s raftlog.SpaceStats) float64 { return b2f(s.Low) }),
		gauge("rlserver_disk_free_bytes", "Free space of the data directory's disk (last statfs, less the writes counted since).",
			func(s raftlog.SpaceStats) float64 { return float64(s.Free) }),
		gauge("rlserver_disk_min_free_bytes", "The reserve below which state changes are refused (--min-free-disk; 0: no guard).",
			func(s raftlog.SpaceStats) float64 { return float64(s.MinFree) }),
		gauge("rlserver_disk_ballast_bytes", "Size of the ballast file present in the data directory (0 once deleted to make room).",
			func(s raftlog.SpaceStats) float64 { return b2f(s.BallastPresent) * float64(s.Ballast) }),
		counter("rlserver_disk_low_episodes_total", "Times the disk went below --min-free-disk.",
			func(s raftlog.SpaceStats) float64 { return float64(s.Episodes) }),
		counter("rlserver_disk_refused_writes_total", "Writes of log entries or snapshot chunks refused because the disk was nearly full.",
			func(s raftlog.SpaceStats) float64 { return float64(s.Refused) }),
	)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
