package server

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/rules"
)

// Commands whose latency is observed, indexes of metrics.latency.
const (
	timedCheck = iota
	timedCheckRules
	timedThrottle
	numTimed
)

var timedNames = [numTimed]string{"rl.check", "rl.checkrules", "cl.throttle"}

// Striping of the per-command counters: a connection counts into stripe
// id & stripeMask, so that connections on different cores rarely write the
// same cache line. Scrapes sum the stripes.
const (
	numStripes  = 16
	stripeMask  = numStripes - 1
	maxCommands = 160 // room in a stripe; commandTable has fewer
)

// stripe is one group of connections' share of the hot counters.
type stripe struct {
	checks [engine.NumAlgos][2]atomic.Int64 // by algorithm and allowed
	rules  [2]atomic.Int64                  // RL.CHECKRULES by allowed
	calls  [maxCommands]atomic.Int64        // by index in Server.list
	_      [64]byte                         // keep the next stripe off the last line
}

// latencySample is how often latency is measured: one command in
// latencySample+1 per connection. Reading the clock twice costs about as
// much as 5% of a pipelined check, so the histogram is a uniform sample;
// rlserver_checks_total has the exact counts.
const latencySample = 15

// metrics are the server's Prometheus collectors. The hot counters
// (commands, checks) are plain striped atomics read by counter functions at
// scrape time, so counting is one uncontended atomic add; observers are
// resolved once, so the check path never looks up a label. With off set
// (Config.DisableMetrics) the per-command updates are skipped.
type metrics struct {
	off          bool
	stripes      [numStripes]stripe
	latency      [numTimed]prometheus.Observer
	shadow       *prometheus.CounterVec
	shadowByID   sync.Map // rule id → prometheus.Counter
	perRule      ruleCounters
	errors       *prometheus.CounterVec
	errByCode    map[string]prometheus.Counter
	connections  prometheus.Gauge
	rejected     prometheus.Counter // connections refused beyond MaxClients
	acceptErrors prometheus.Counter
	// held counts batches whose replies waited for the log, by why (see
	// mustWait): strong, lagging (fast mode, the log behind), change.
	held [3]prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, s *Server) *metrics {
	m := &metrics{
		off: s.cfg.DisableMetrics,
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rlserver_errors_total", Help: "Error replies, by error code (ERR, WRONGTYPE, NOAUTH, protocol, ...); crossprotocol counts connections closed for sending HTTP.",
		}, []string{"code"}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rlserver_connected_clients", Help: "Open client connections.",
		}),
		errByCode: make(map[string]prometheus.Counter),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rlserver_rejected_connections_total", Help: "Connections refused because --maxclients were connected.",
		}),
		acceptErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rlserver_accept_errors_total", Help: "Failed accepts (such as out of file descriptors), after each of which the server backs off.",
		}),
	}
	for _, code := range []string{"ERR", "WRONGTYPE", "NOAUTH", "WRONGPASS", "NOPERM", "NOPROTO", "Cell", "OOM", "crossprotocol"} {
		m.errByCode[code] = m.errors.WithLabelValues(code)
	}
	keys := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rlserver_keys", Help: "Keys holding limiter state.",
	}, func() float64 { return float64(s.cfg.Limiter.Len()) })
	mem := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rlserver_state_bytes", Help: "Estimated memory of the limiter state.",
	}, func() float64 { return float64(s.cfg.Limiter.MemoryBytes()) })
	clients := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rlserver_client_memory_bytes", Help: "Estimated memory of client connections (buffers and structures); --maxmemory counts it.",
	}, func() float64 { return float64(s.ConnMemory()) })
	evicted := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "rlserver_evicted_keys_total", Help: "Keys evicted to stay within --maxmemory.",
	}, func() float64 { _, _, n := s.memoryBound(); return float64(n) })
	heldVec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rlserver_replies_held_total", Help: "Batches of replies that waited for their changes to be committed in the log, by reason: strong (--consistency strong), lagging (fast mode, the log fell behind), change (rule changes, FLUSHALL).",
	}, []string{"reason"})
	for i, r := range []string{"strong", "lagging", "change"} {
		m.held[i] = heldVec.WithLabelValues(r)
	}
	reg.MustRegister(m.errors, m.connections, m.rejected, m.acceptErrors, keys, mem, clients, evicted, heldVec)
	m.registerCounts(reg, s.list)
	m.registerLatency(reg)
	m.registerRules(reg, s.cfg.Rules)
	if bs, ok := s.cfg.Rules.(BlockStore); ok {
		reg.MustRegister(newBlockCollector(bs, s.cfg.Clock))
	}
	return m
}

// sum adds up one counter over the stripes.
func (m *metrics) sum(counter func(*stripe) *atomic.Int64) int64 {
	var n int64
	for i := range m.stripes {
		n += counter(&m.stripes[i]).Load()
	}
	return n
}

// counterFunc returns a counter read at scrape time from the stripes.
func (m *metrics) counterFunc(opts prometheus.CounterOpts, counter func(*stripe) *atomic.Int64) prometheus.CounterFunc {
	return prometheus.NewCounterFunc(opts, func() float64 { return float64(m.sum(counter)) })
}

// registerCounts registers the striped counters: commands by name and
// checks by algorithm and result.
func (m *metrics) registerCounts(reg prometheus.Registerer, list []*command) {
	if len(list) > maxCommands {
		panic("server: more commands than maxCommands")
	}
	for _, cmd := range list {
		i := cmd.idx
		reg.MustRegister(m.counterFunc(prometheus.CounterOpts{
			Name: "rlserver_commands_total", Help: "Commands processed, by command name.",
			ConstLabels: prometheus.Labels{"command": cmd.name},
		}, func(s *stripe) *atomic.Int64 { return &s.calls[i] }))
	}
	for a := engine.Fixed; a <= engine.GCRA; a++ {
		for res, name := range []string{"denied", "allowed"} {
			reg.MustRegister(m.counterFunc(prometheus.CounterOpts{
				Name:        "rlserver_checks_total",
				Help:        "Limiter checks, by algorithm and result (allowed or denied).",
				ConstLabels: prometheus.Labels{"algo": a.String(), "result": name},
			}, func(s *stripe) *atomic.Int64 { return &s.checks[a][res] }))
		}
	}
}

// registerLatency registers the check latency histogram and resolves one
// observer per timed command.
func (m *metrics) registerLatency(reg prometheus.Registerer) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "rlserver_check_duration_seconds",
		Help: "Time the server takes to decide one check, from parsed command to buffered reply, by command; " +
			"measured on one check in 16 per connection.",
		Buckets: []float64{250e-9, 500e-9, 1e-6, 2.5e-6, 5e-6, 10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 1e-3, 10e-3},
	}, []string{"command"})
	for i, name := range timedNames {
		m.latency[i] = h.WithLabelValues(name)
	}
	reg.MustRegister(h)
}

// registerRules registers the rule metrics: RL.CHECKRULES by result,
// would-have-denied counts of shadow rules, and the number of rules.
func (m *metrics) registerRules(reg prometheus.Registerer, rs RuleStore) {
	for res, name := range []string{"denied", "allowed"} {
		reg.MustRegister(m.counterFunc(prometheus.CounterOpts{
			Name: "rlserver_rule_checks_total", Help: "RL.CHECKRULES checks, by result (allowed or denied).",
			ConstLabels: prometheus.Labels{"result": name},
		}, func(s *stripe) *atomic.Int64 { return &s.rules[res] }))
	}
	m.shadow = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rlserver_rule_shadow_denials_total",
		Help: "Checks that a shadow-mode rule would have denied had it been enforced, by rule id.",
	}, []string{"rule"})
	reg.MustRegister(m.shadow)
	if rs != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rlserver_rules", Help: "Rules in the rule table.",
		}, func() float64 { return float64(rs.RuleCount()) }))
	}
}

// call counts one command run on c.
func (m *metrics) call(c *conn, cmd *command) {
	if !m.off {
		m.stripes[c.id&stripeMask].calls[cmd.idx].Add(1)
	}
}

// check counts one check of algorithm a on c.
func (m *metrics) check(c *conn, a engine.Algo, allowed bool) {
	if !m.off {
		m.stripes[c.id&stripeMask].checks[a][b2i(allowed)].Add(1)
	}
}

// CountCheck counts one check of algorithm a decided outside RESP (by the
// HTTP API) where RL.CHECK is counted: rlserver_checks_total and INFO's
// check fields. It is safe for concurrent use.
func (s *Server) CountCheck(a engine.Algo, allowed bool) {
	if m := s.metrics; !m.off && int(a) < engine.NumAlgos {
		m.stripes[rand.Uint32()&stripeMask].checks[a][b2i(allowed)].Add(1)
	}
}

// CountRuleCheck counts one evaluated rule check decided outside RESP (by
// the HTTP API) where RL.CHECKRULES is counted: rlserver_rule_checks_total
// and rlserver_rule_shadow_denials_total. It is safe for concurrent use.
func (s *Server) CountRuleCheck(q *rules.Query) {
	if !s.metrics.off {
		s.metrics.ruleCheckOn(rand.Uint32(), q)
	}
}

// start returns the time a timed command on c starts, or the zero time
// when this command is not sampled or metrics are off.
func (m *metrics) start(c *conn) time.Time {
	if m.off || c.commands.Load()&latencySample != 0 {
		return time.Time{}
	}
	return time.Now()
}

// observe records the latency of a timed command that began at start, if
// it was sampled.
func (m *metrics) observe(cmd int, start time.Time) {
	if start.IsZero() {
		return
	}
	m.latency[cmd].Observe(time.Since(start).Seconds())
}

// ruleCheck counts one evaluated RL.CHECKRULES on c and the shadow rules
// in it that would have denied.
func (m *metrics) ruleCheck(c *conn, q *rules.Query) {
	if !m.off {
		m.ruleCheckOn(uint32(c.id), q)
	}
}

// ruleCheckOn counts q on stripe i (masked): the check, each rule's
// evaluation, and the shadow rules' would-be denials.
func (m *metrics) ruleCheckOn(i uint32, q *rules.Query) {
	m.stripes[i&stripeMask].rules[b2i(q.Allowed)].Add(1)
	m.perRule.countRules(i, q)
	for i := range q.Evals {
		if e := &q.Evals[i]; e.Rule.Rule.Shadow && !e.Result.Allowed {
			m.shadowCounter(e.Rule.Rule.ID).Inc()
		}
	}
}

// shadowCounter returns the would-deny counter of a rule, resolving its
// label once per rule id.
func (m *metrics) shadowCounter(id string) prometheus.Counter {
	if c, ok := m.shadowByID.Load(id); ok {
		return c.(prometheus.Counter)
	}
	c, _ := m.shadowByID.LoadOrStore(id, m.shadow.WithLabelValues(id))
	return c.(prometheus.Counter)
}

// checkFields returns the check counts as INFO fields.
func (m *metrics) checkFields() []string {
	var out []string
	for a := engine.Fixed; a <= engine.GCRA; a++ {
		allowed := m.sum(func(s *stripe) *atomic.Int64 { return &s.checks[a][1] })
		denied := m.sum(func(s *stripe) *atomic.Int64 { return &s.checks[a][0] })
		out = append(out, "checks_"+a.String()+"_allowed", strconv.FormatInt(allowed, 10),
			"checks_"+a.String()+"_denied", strconv.FormatInt(denied, 10))
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
