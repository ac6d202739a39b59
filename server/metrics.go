package server

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/engine"
)

// metrics are the server's Prometheus collectors. Checks are counted in
// plain atomics, one per algorithm and result, read by counter functions at
// scrape time, so counting a check is one atomic add.
type metrics struct {
	checks      [engine.NumAlgos][2]atomic.Int64
	commands    *prometheus.CounterVec
	errors      *prometheus.CounterVec
	errByCode   map[string]prometheus.Counter
	connections prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, s *Server) *metrics {
	m := &metrics{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rlserver_commands_total", Help: "Commands processed, by command name.",
		}, []string{"command"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rlserver_errors_total", Help: "Error replies, by error code (ERR, WRONGTYPE, NOAUTH, protocol, ...).",
		}, []string{"code"}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rlserver_connected_clients", Help: "Open client connections.",
		}),
		errByCode: make(map[string]prometheus.Counter),
	}
	for a := engine.Fixed; a <= engine.GCRA; a++ {
		for res, name := range []string{"denied", "allowed"} {
			v := &m.checks[a][res]
			reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name:        "rlserver_checks_total",
				Help:        "Limiter checks, by algorithm and result (allowed or denied).",
				ConstLabels: prometheus.Labels{"algo": a.String(), "result": name},
			}, func() float64 { return float64(v.Load()) }))
		}
	}
	for _, code := range []string{"ERR", "WRONGTYPE", "NOAUTH", "WRONGPASS", "NOPERM", "NOPROTO", "Cell"} {
		m.errByCode[code] = m.errors.WithLabelValues(code)
	}
	keys := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rlserver_keys", Help: "Keys holding limiter state.",
	}, func() float64 { return float64(s.cfg.Limiter.Len()) })
	mem := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rlserver_state_bytes", Help: "Estimated memory of the limiter state.",
	}, func() float64 { return float64(s.cfg.Limiter.MemoryBytes()) })
	reg.MustRegister(m.commands, m.errors, m.connections, keys, mem)
	return m
}

// check counts one check of algorithm a.
func (m *metrics) check(a engine.Algo, allowed bool) {
	m.checks[a][b2i(allowed)].Add(1)
}

// checkFields returns the check counts as INFO fields.
func (m *metrics) checkFields() []string {
	var out []string
	for a := engine.Fixed; a <= engine.GCRA; a++ {
		out = append(out, "checks_"+a.String()+"_allowed", strconv.FormatInt(m.checks[a][1].Load(), 10),
			"checks_"+a.String()+"_denied", strconv.FormatInt(m.checks[a][0].Load(), 10))
	}
	return out
}

// errorCount counts one error reply by its code.
func (m *metrics) errorCount(code string) {
	if c, ok := m.errByCode[code]; ok {
		c.Inc()
		return
	}
	m.errors.WithLabelValues("other").Inc()
}
