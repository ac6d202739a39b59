package envoyrls

import (
	"math"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// otherKey is the metric key of the hits counted beyond MaxMetricKeys.
const otherKey = "_other_"

// metrics are envoyproxy/ratelimit's per-descriptor counters, by domain
// and descriptor key, under the names its Prometheus exporter mapping
// gives them. A nil *metrics counts nothing.
type metrics struct {
	totalHits, overLimit, nearLimit, withinLimit, shadowMode *prometheus.CounterVec
	notFound                                                 *prometheus.CounterVec
	loads                                                    *prometheus.CounterVec

	mu   sync.Mutex
	keys map[[2]string]bool // the (domain, key) pairs seen, up to max
	max  int
}

func newMetrics(reg prometheus.Registerer, maxKeys int) *metrics {
	if reg == nil {
		return nil
	}
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_service_rate_limit_" + name, Help: help},
			[]string{"domain", "key"})
	}
	m := &metrics{
		totalHits:   vec("total_hits", "Hits of the descriptors that matched a limit (Envoy rate limit service)."),
		overLimit:   vec("over_limit", "Hits over the limit."),
		nearLimit:   vec("near_limit", "Hits within the limit but above its near-limit share (80%)."),
		withinLimit: vec("within_limit", "Hits within the limit."),
		shadowMode:  vec("shadow_mode", "Hits over the limit of a descriptor in shadow mode, which were allowed."),
		notFound: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_service_rate_limit_domain_not_found",
			Help: "Requests for a domain the configuration does not have."}, []string{"domain"}),
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_service_config_load_total",
			Help: "Loads of --envoy-config, by result (success, error); a failed load keeps the last good configuration."}, []string{"result"}),
		keys: map[[2]string]bool{}, max: maxKeys,
	}
	reg.MustRegister(m.totalHits, m.overLimit, m.nearLimit, m.withinLimit, m.shadowMode, m.notFound, m.loads)
	return m
}

// label returns key, or otherKey once max distinct keys are counted.
func (m *metrics) label(domain, key string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{domain, key}
	if m.keys[k] {
		return key
	}
	if len(m.keys) >= m.max {
		return otherKey
	}
	m.keys[k] = true
	return key
}

func (m *metrics) domainNotFound(domain string) {
	if m == nil {
		return
	}
	m.notFound.WithLabelValues(m.label("", domain)).Inc()
}

// loaded counts a configuration load.
func (m *metrics) loaded(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.loads.WithLabelValues("success").Inc()
	} else {
		m.loads.WithLabelValues("error").Inc()
	}
}

// count adds one slot's hits, as envoyproxy/ratelimit splits them: hits
// past the limit are over it, hits past ratio of it (and within it) near
// it. charged says whether the request was charged.
func (m *metrics) count(domain, key string, sl *slot, shadow, charged bool, ratio float64) {
	if m == nil {
		return
	}
	key = m.label(domain, key)
	hits := float64(sl.hits)
	m.totalHits.WithLabelValues(domain, key).Add(hits)
	limit := float64(sl.limit.RequestsPerUnit)
	if sl.op >= 0 && sl.result.Limit > 0 {
		limit = float64(sl.result.Limit)
	}
	used := limit - float64(max(sl.result.Remaining, 0))
	before, after := used, used+hits
	switch {
	case sl.counted:
		limit, before, after = float64(sl.limit.RequestsPerUnit), float64(sl.before), float64(sl.after)
	case charged && sl.result.Allowed && sl.op >= 0:
		before, after = used-hits, used
	}
	near := math.Floor(limit * ratio)
	if !sl.result.Allowed {
		over := after - limit
		if before >= limit {
			over = hits
		} else {
			m.nearLimit.WithLabelValues(domain, key).Add(limit - math.Max(near, before))
		}
		m.overLimit.WithLabelValues(domain, key).Add(over)
		if shadow {
			m.shadowMode.WithLabelValues(domain, key).Add(over)
		}
		return
	}
	if after > near {
		if before >= near {
			m.nearLimit.WithLabelValues(domain, key).Add(hits)
		} else {
			m.nearLimit.WithLabelValues(domain, key).Add(after - near)
		}
	}
	m.withinLimit.WithLabelValues(domain, key).Add(hits)
}
