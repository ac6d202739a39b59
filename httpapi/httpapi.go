package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/shards"
)

// Config configures the HTTP handler. Zero values disable what they serve.
type Config struct {
	// Gatherer is scraped by /metrics; nil disables the endpoint.
	Gatherer prometheus.Gatherer
	// Ready reports whether the node can serve checks; nil means always.
	Ready func() error
	// OnCheck, if set, is called as each check begins (POST /v1/check,
	// /v1/checkrules and forward auth): rlserver's rest.Governor.Touch,
	// which gives a resting process its cores back. It must be cheap and
	// must not block.
	OnCheck func()
	// Checker serves POST /v1/check and /v1/checkrules; nil disables them.
	Checker Checker
	// Rules serves /rules; nil disables it.
	Rules RuleStore
	// AdminToken, when set, must be sent as "Authorization: Bearer <token>"
	// to create, replace or delete rules, to remove a cluster node and to
	// read GET /cluster, and is accepted wherever CheckToken is.
	AdminToken string
	// CheckToken, when set (rlserver passes --requirepass), must be sent as
	// a bearer token to read rules and to check; when AdminToken is not
	// set, it also stands for the admin token.
	CheckToken string
	// MetricsAuth makes GET /metrics need a bearer token (CheckToken or
	// AdminToken, whichever are set); without it /metrics is open, as
	// Prometheus scrapers expect. /healthz and /readyz are always open.
	MetricsAuth bool
	// Clock returns the time of a check in ns since the epoch; nil means
	// time.Now.
	Clock func() int64
	// MaxKeyBytes bounds check keys (default shards.DefaultMaxKeyBytes);
	// MaxLogLimit bounds the limit of the log algorithm in checks and rules
	// (default engine.DefaultMaxLogLimit).
	MaxKeyBytes int
	MaxLogLimit int64
	// Registerer, when set, receives rlserver_http_requests_total.
	Registerer prometheus.Registerer
	// Metrics, when set, counts the checks decided over HTTP where the
	// RESP server counts its own (*server.Server satisfies it), so that
	// rlserver_checks_total, the rule metrics and INFO cover both.
	Metrics Metrics
	// Logger receives a line for every rule change; nil discards them.
	Logger *slog.Logger
	// Durable, when set, is waited on before an answer that reports a
	// change: always after a rule change, after a check in strong mode.
	Durable Durable
	// Cluster, when set (a cluster node), serves GET /cluster.
	Cluster Cluster
	// Status, when set, serves the live status page: GET /status and
	// GET /v1/stats.
	Status StatusPage
	// HotKeys serves GET /v1/hotkeys; nil means Checker if it implements
	// HotKeySource, else the endpoint is not served.
	HotKeys HotKeySource
	// TrustedProxies are the networks of the gateways whose headers
	// /v1/forward-auth believes (rlserver's --trusted-proxies): the
	// caller's X-Forwarded-For, the target, user, API key and tier; from
	// any other peer the peer's address is the caller's and those headers
	// are refused (see forwarded.go). nil trusts none.
	TrustedProxies []netip.Prefix
	// IPv6Prefix is the network length, 1 to 128, by which forward auth
	// counts IPv6 callers (rlserver's --ipv6-prefix): every address of a
	// /64 is one "ip" identifier, "2001:db8:1:2::/64"; 128 counts each
	// address apart. 0 means clientid.DefaultIPv6Prefix (64).
	IPv6Prefix int
}

// Cluster reports a cluster's state for GET /cluster.
type Cluster interface {
	// ClusterReport returns a JSON-encodable description of the nodes,
	// groups, leaders and slots, and every replica's applied index; with
	// digestAt > 0, each replica's state digest at that time (Unix ns).
	ClusterReport(ctx context.Context, digestAt int64) any
	// LeaveNode makes node id leave the cluster: its groups move to the
	// other nodes, then it is forgotten.
	LeaveNode(ctx context.Context, id string) error
}

// leave answers DELETE /cluster/nodes/{id} (admin): 202 once the leave is
// recorded (the groups move afterwards: watch GET /cluster), 404 for a
// node the cluster does not know.
func (a *api) leave(w http.ResponseWriter, r *http.Request) {
	if err := a.authorize(r, accessAdmin, "removing a cluster node"); err != nil {
		writeError(w, err)
		return
	}
	id := r.PathValue("id")
	if err := a.cfg.Cluster.LeaveNode(r.Context(), id); err != nil {
		status := http.StatusServiceUnavailable
		if strings.Contains(err.Error(), "no node") {
			status = http.StatusNotFound
		} else if strings.Contains(err.Error(), "last node") {
			status = http.StatusConflict
		}
		writeJSON(w, status, errorBody{err.Error()})
		return
	}
	a.cfg.Logger.Info("a node leaves the cluster", "node", id, "client", r.RemoteAddr, "via", "http")
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "leaving", "node": id})
}

// cluster answers GET /cluster[?digest_at=<unix ns>|now] (admin: it
// names every node's addresses, the Raft ones included, and a digest
// costs the nodes a pass over their state).
func (a *api) cluster(w http.ResponseWriter, r *http.Request) {
	if err := a.authorize(r, accessAdmin, "reading the cluster's state"); err != nil {
		writeError(w, err)
		return
	}
	var at int64
	switch v := r.URL.Query().Get("digest_at"); v {
	case "":
	case "now":
		at = a.cfg.Clock()
	default:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			writeJSON(w, http.StatusBadRequest, errorBody{"digest_at: want a time in Unix nanoseconds, or now"})
			return
		}
		at = n
	}
	writeJSON(w, http.StatusOK, a.cfg.Cluster.ClusterReport(r.Context(), at))
}

// Metrics counts checks. Implementations are safe for concurrent use.
type Metrics interface {
	CountCheck(a engine.Algo, allowed bool)
	CountRuleCheck(q *rules.Query)
}

// Durable is implemented by a store whose changes reach its log after the
// call that made them returns (cluster.Node).
type Durable interface {
	// Settle waits until an answer may go out: after a rule change
	// (change true), until every change made so far is committed; after
	// a check, as the store's consistency mode asks (strong: the same;
	// fast: only while its log lags too far behind). An error is what to
	// answer instead.
	Settle(ctx context.Context, change bool) error
}

// sync waits until the answer may go out (see Durable).
func (a *api) sync(ctx context.Context, change bool) error {
	if a.cfg.Durable == nil {
		return nil
	}
	return a.cfg.Durable.Settle(ctx, change)
}

// api holds the handlers' dependencies.
type api struct {
	cfg      Config
	requests *prometheus.CounterVec // nil without a Registerer
}

// New returns the HTTP handler for cfg. It is safe for concurrent use.
func New(cfg Config) http.Handler {
	if cfg.Clock == nil {
		cfg.Clock = func() int64 { return time.Now().UnixNano() }
	}
	if cfg.MaxKeyBytes <= 0 {
		cfg.MaxKeyBytes = shards.DefaultMaxKeyBytes
	}
	if cfg.MaxLogLimit <= 0 {
		cfg.MaxLogLimit = engine.DefaultMaxLogLimit
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HotKeys == nil {
		cfg.HotKeys, _ = cfg.Checker.(HotKeySource)
	}
	a := &api{cfg: cfg}
	if cfg.Registerer != nil {
		a.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rlserver_http_requests_total", Help: "HTTP API requests, by handler and status code.",
		}, []string{"handler", "code"})
		cfg.Registerer.MustRegister(a.requests)
	}
	mux := http.NewServeMux()
	a.handle(mux, "GET /healthz", "healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	a.handle(mux, "GET /readyz", "readyz", a.readyz)
	if cfg.Cluster != nil {
		a.handle(mux, "GET /cluster", "cluster", a.cluster)
		a.handle(mux, "DELETE /cluster/nodes/{id}", "cluster_leave", a.leave)
	}
	if cfg.Gatherer != nil {
		mux.Handle("GET /metrics", a.metrics(promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{})))
	}
	if cfg.Rules != nil {
		a.routeRules(mux)
		a.routeBlocks(mux)
	}
	if cfg.Checker != nil {
		a.routeChecks(mux)
	}
	if cfg.Status != nil {
		a.routeStatus(mux)
	}
	if cfg.HotKeys != nil {
		a.handle(mux, "GET /v1/hotkeys", "hotkeys", a.hotKeys)
		mux.Handle("/v1/hotkeys", methodNotAllowed("GET"))
	}
	if cfg.Status != nil {
		// A person who opens the node's address in a browser gets the
		// status page (relative, so that a proxy's path prefix is kept).
		mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "status", http.StatusFound)
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, errorBody{"no such endpoint: " + r.Method + " " + r.URL.Path})
	})
	if cfg.Checker == nil {
		return mux
	}
	// Envoy's ext_authz appends the request's path as the client wrote
	// it: the mux would answer one it cleans ("//login", "/x/../login")
	// with a redirect, so forward auth reads every path under its own.
	envoy := a.counted("forward_auth", a.touching(a.forwardAuth))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, forwardPrefix+"/") {
			envoy.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// metrics guards h, the Prometheus handler, with a bearer token when
// MetricsAuth is set; it is open otherwise, as scrapers expect.
func (a *api) metrics(h http.Handler) http.Handler {
	if !a.cfg.MetricsAuth {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := a.authorize(r, accessMetrics, "reading metrics"); err != nil {
			writeError(w, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// touching returns h, calling Config.OnCheck first when it is set.
func (a *api) touching(h http.HandlerFunc) http.HandlerFunc {
	on := a.cfg.OnCheck
	if on == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		on()
		h(w, r)
	}
}

// handle registers h for pattern, counted under name.
func (a *api) handle(mux *http.ServeMux, pattern, name string, h http.HandlerFunc) {
	mux.Handle(pattern, a.counted(name, h))
}

// counted returns h, counted in rlserver_http_requests_total under name.
func (a *api) counted(name string, h http.HandlerFunc) http.Handler {
	if a.requests == nil {
		return h
	}
	counter := a.requests.MustCurryWith(prometheus.Labels{"handler": name})
	return promhttp.InstrumentHandlerCounter(counter, h)
}

// methodNotAllowed answers 405 for the other methods on a path.
func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeJSON(w, http.StatusMethodNotAllowed, errorBody{r.Method + " is not allowed here; use " + allow})
	}
}

func (a *api) readyz(w http.ResponseWriter, r *http.Request) {
	if a.cfg.Ready != nil {
		if err := a.cfg.Ready(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, errorBody{err.Error()})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// writeJSON writes v as the JSON body with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // bodies are JSON, not HTML: keep "<admin-token>" readable
	enc.Encode(v)
}
