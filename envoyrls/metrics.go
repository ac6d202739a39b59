package envoyrls

import (
	"math"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// otherKey is the metric key of the hits counted beyond MaxMetricKeys.
const otherKey = "_other_"

// metrics are envoyproxy/ratelimit's per-descriptor counters, by domain
// and descriptor key. Each is exported twice: under the name and labels
// the reference's Prometheus exposition gives it (its statsd mapping:
// ratelimit_service_rate_limit_<stat>{domain, key1} for a one-level key,
// {domain, key1, key2} for a deeper one, with the key's first two
// dot-separated parts), so that dashboards and alerts carry over, and as
// rlserver_rls_rate_limit_<stat>{domain, key} with the whole key. A nil
// *metrics counts nothing.
type metrics struct {
	totalHits, overLimit, nearLimit, withinLimit, shadowMode stat
	notFound                                                 *prometheus.CounterVec
	loads                                                    *prometheus.CounterVec
	loadOK, loadErr                                          prometheus.Counter

	mu          sync.Mutex
	keys        map[[2]string]bool // the (domain, key) pairs seen, up to max
	max         int
	notFoundRef map[string]float64 // by domain (bounded as keys are), for refCollector
}

// stat is one per-descriptor counter in its three forms.
type stat struct {
	whole    *prometheus.CounterVec // {domain, key}
	one, two *prometheus.CounterVec // the reference's {domain, key1} and {domain, key1, key2}
}

// add counts v for key of domain.
func (s stat) add(domain, key string, v float64) {
	s.whole.WithLabelValues(domain, key).Add(v)
	// The reference's statsd name is ratelimit.service.rate_limit.<domain>.<key>.<stat>,
	// and its mapping reads the domain and the key's first parts between dots.
	parts := strings.SplitN(domain+"."+key, ".", 4)
	switch len(parts) {
	case 2:
		s.one.WithLabelValues(parts[0], parts[1]).Add(v)
	case 3, 4:
		s.two.WithLabelValues(parts[0], parts[1], parts[2]).Add(v)
	}
}

// refCollector exports the reference's series: one name with two label
// sets, as its exporter does, so it is an unchecked collector (no Desc).
// It also exports the reference's per-domain
// ratelimit_service_rate_limit_<domain>_domain_not_found, a name its
// statsd mapping leaves as the statsd name with '.' made '_'.
type refCollector struct {
	vecs []*prometheus.CounterVec
	m    *metrics
}

func (refCollector) Describe(chan<- *prometheus.Desc) {}

func (c refCollector) Collect(ch chan<- prometheus.Metric) {
	for _, v := range c.vecs {
		v.Collect(ch)
	}
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	for domain, n := range c.m.notFoundRef {
		d := prometheus.NewDesc("ratelimit_service_rate_limit_"+metricNamePart(domain)+"_domain_not_found",
			"Requests for a domain the configuration does not have (envoyproxy/ratelimit's name).", nil, nil)
		if m, err := prometheus.NewConstMetric(d, prometheus.CounterValue, n); err == nil {
			ch <- m
		}
	}
}

// metricNamePart makes s a part of a metric name as the statsd exporter
// does: every byte that is not a letter, a digit or '_' becomes '_'.
func metricNamePart(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

func newMetrics(reg prometheus.Registerer, maxKeys int) *metrics {
	if reg == nil {
		return nil
	}
	var ref refCollector
	mk := func(name, help string) stat {
		refHelp := "envoyproxy/ratelimit's " + name + " (its Prometheus name and labels)."
		s := stat{
			whole: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rlserver_rls_rate_limit_" + name, Help: help}, []string{"domain", "key"}),
			one:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_service_rate_limit_" + name, Help: refHelp}, []string{"domain", "key1"}),
			two:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_service_rate_limit_" + name, Help: refHelp}, []string{"domain", "key1", "key2"}),
		}
		ref.vecs = append(ref.vecs, s.one, s.two)
		return s
	}
	m := &metrics{
		totalHits:   mk("total_hits", "Hits of the descriptors that matched a limit (Envoy rate limit service), by the whole descriptor key."),
		overLimit:   mk("over_limit", "Hits over the limit."),
		nearLimit:   mk("near_limit", "Hits within the limit but above its near-limit share (80%)."),
		withinLimit: mk("within_limit", "Hits within the limit."),
		shadowMode:  mk("shadow_mode", "Hits over the limit of a descriptor in shadow mode, which were allowed."),
		notFound: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_service_rate_limit_domain_not_found",
			Help: "Requests for a domain the configuration does not have."}, []string{"domain"}),
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_service_config_load_total",
			Help: "Loads of --envoy-config, by result (success, error); a failed load keeps the last good configuration."}, []string{"result"}),
		loadOK: prometheus.NewCounter(prometheus.CounterOpts{Name: "ratelimit_service_config_load_success",
			Help: "Loads of --envoy-config that succeeded (envoyproxy/ratelimit's name)."}),
		loadErr: prometheus.NewCounter(prometheus.CounterOpts{Name: "ratelimit_service_config_load_error",
			Help: "Loads of --envoy-config that failed (envoyproxy/ratelimit's name)."}),
		keys: map[[2]string]bool{}, max: maxKeys, notFoundRef: map[string]float64{},
	}
	ref.m = m
	reg.MustRegister(m.totalHits.whole, m.overLimit.whole, m.nearLimit.whole, m.withinLimit.whole, m.shadowMode.whole,
		m.notFound, m.loads, m.loadOK, m.loadErr, ref)
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
	d := m.label("", domain)
	m.notFound.WithLabelValues(d).Inc()
	m.mu.Lock()
	m.notFoundRef[d]++
	m.mu.Unlock()
}

// loaded counts a configuration load.
func (m *metrics) loaded(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.loads.WithLabelValues("success").Inc()
		m.loadOK.Inc()
	} else {
		m.loads.WithLabelValues("error").Inc()
		m.loadErr.Inc()
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
	m.totalHits.add(domain, key, hits)
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
			m.nearLimit.add(domain, key, limit-math.Max(near, before))
		}
		m.overLimit.add(domain, key, over)
		if shadow {
			m.shadowMode.add(domain, key, over)
		}
		return
	}
	if after > near {
		if before >= near {
			m.nearLimit.add(domain, key, hits)
		} else {
			m.nearLimit.add(domain, key, after-near)
		}
	}
	m.withinLimit.add(domain, key, hits)
}
