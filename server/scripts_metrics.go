package server

import (
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/script"
)

// The runs of scripts by path, for INFO's Scripts section and the
// rlserver_script_runs_total metric: the interpreter, and each native
// handler (package script/native) by library and script. An operator sees
// from them what the traffic's scripts run on.

// scriptRunsDesc describes rlserver_script_runs_total.
var scriptRunsDesc = prometheus.NewDesc("rlserver_script_runs_total",
	"Script runs (EVAL, EVALSHA and their _RO forms) by path: interpreted (the Lua interpreter), or native (a handler for a "+
		"limiter library's script recognised by its sha1), with the library and script names of native runs.",
	[]string{"path", "library", "script"}, nil)

// scriptTakeoversDesc describes rlserver_script_loop_takeovers_total.
var scriptTakeoversDesc = prometheus.NewDesc("rlserver_script_loop_takeovers_total",
	"Interpreted script runs that went on for long on an event loop: another goroutine took the loop over, "+
		"and the run's connection went on with a goroutine of its own.", nil, nil)

// scriptCollector reads the engine's counts, and the server's takeovers,
// at scrape time.
type scriptCollector struct {
	e         *script.Engine
	takeovers *atomic.Uint64
}

func (c scriptCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- scriptRunsDesc
	ch <- scriptTakeoversDesc
}

func (c scriptCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.e.Stats()
	ch <- prometheus.MustNewConstMetric(scriptRunsDesc, prometheus.CounterValue, float64(st.Interpreted), "interpreted", "", "")
	for name, n := range st.Native {
		lib, scr, _ := strings.Cut(name, ".")
		ch <- prometheus.MustNewConstMetric(scriptRunsDesc, prometheus.CounterValue, float64(n), "native", lib, scr)
	}
	ch <- prometheus.MustNewConstMetric(scriptTakeoversDesc, prometheus.CounterValue, float64(c.takeovers.Load()))
}

// registerScripts registers the script runs' collector.
func (m *metrics) registerScripts(reg prometheus.Registerer, e *script.Engine, takeovers *atomic.Uint64) {
	reg.MustRegister(scriptCollector{e, takeovers})
}

// scriptsInfo is INFO's Scripts section: runs interpreted, runs native in
// all, then the runs of each native handler ("scripts_native_<library>.<script>"),
// and the event loops taken over from long runs (scripts_loop_takeovers).
func (s *Server) scriptsInfo() []string {
	st := s.scripts.Stats()
	names := make([]string, 0, len(st.Native))
	var native uint64
	for name, n := range st.Native {
		names = append(names, name)
		native += n
	}
	sort.Strings(names)
	out := []string{"scripts_interpreted", strconv.FormatUint(st.Interpreted, 10), "scripts_native", strconv.FormatUint(native, 10)}
	for _, name := range names {
		out = append(out, "scripts_native_"+name, strconv.FormatUint(st.Native[name], 10))
	}
	return append(out, "scripts_loop_takeovers", strconv.FormatUint(s.takeovers.Load(), 10))
}
