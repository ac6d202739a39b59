// Package testserver starts a real rlserver node inside a test: a
// shards.Store served over RESP by server.Server on a 127.0.0.1:0 listener
// and over HTTP by httpapi on another, wired as cmd/rlserver wires them,
// and stopped when the test ends. Tests across packages share it.
package testserver

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/httpapi"
	"github.com/rlserver/rlserver/internal/clientid"
	"github.com/rlserver/rlserver/server"
	"github.com/rlserver/rlserver/shards"
)

// Options configure a Node. Zero values take rlserver's defaults.
type Options struct {
	Clock          func() int64 // ns since the epoch; nil is the real clock
	RequirePass    string
	AdminToken     string
	MaxLogLimit    int64
	DisableMetrics bool
	Shards         int
	Logger         *slog.Logger // nil discards the log
	MaxMemory      int64        // bytes; 0 is unbounded
	Policy         shards.Policy
	MetricsAuth    bool            // GET /metrics needs a bearer token (--metrics-auth)
	Cluster        httpapi.Cluster // serves GET /cluster and DELETE /cluster/nodes/{id}; nil: none
	// Status, when set, makes the status page (GET /status, /v1/stats)
	// of the node once its server exists.
	Status func(n *Node) httpapi.StatusPage
	// TrustedProxies are the gateways whose X-Forwarded-For
	// /v1/forward-auth honours; nil is rlserver's default, loopback.
	TrustedProxies []netip.Prefix
	// IPv6Prefix groups IPv6 callers of /v1/forward-auth (rlserver's
	// --ipv6-prefix); 0 is rlserver's default, 64.
	IPv6Prefix int
	// LuaTimeLimit is the server's --lua-time-limit; 0 is its default.
	LuaTimeLimit time.Duration
	// Addr and HTTPAddr are the RESP and HTTP addresses to listen on;
	// "" picks a free port of 127.0.0.1. A test that stops a Node can
	// start another on the same addresses, as a restarted server.
	Addr, HTTPAddr string
}

// Node is a running single-node rlserver.
type Node struct {
	Store    *shards.Store
	Server   *server.Server
	Registry *prometheus.Registry
	Addr     string // RESP address, host:port
	URL      string // HTTP base URL, http://host:port

	stopOnce sync.Once
	stop     func()
}

// Start runs a Node for opt and stops it when t ends.
func Start(t testing.TB, opt Options) *Node {
	t.Helper()
	n := &Node{Store: shards.NewStore(shards.Options{Shards: opt.Shards, MaxMemory: opt.MaxMemory, Policy: opt.Policy}),
		Registry: prometheus.NewRegistry()}
	n.Server = server.New(server.Config{
		Limiter: n.Store, RequirePass: opt.RequirePass, AdminToken: opt.AdminToken,
		MaxLogLimit: opt.MaxLogLimit, Clock: opt.Clock, Registerer: n.Registry,
		DisableMetrics: opt.DisableMetrics, Logger: opt.Logger, LuaTimeLimit: opt.LuaTimeLimit,
	})
	ln, err := net.Listen("tcp", orFree(opt.Addr))
	if err != nil {
		t.Fatal(err)
	}
	hln, err := net.Listen("tcp", orFree(opt.HTTPAddr))
	if err != nil {
		t.Fatal(err)
	}
	if opt.TrustedProxies == nil {
		opt.TrustedProxies = clientid.Loopback
	}
	var status httpapi.StatusPage
	if opt.Status != nil {
		status = opt.Status(n)
	}
	hs := &http.Server{Handler: httpapi.New(httpapi.Config{
		Gatherer: n.Registry, Checker: n.Store, Rules: n.Store, AdminToken: opt.AdminToken,
		CheckToken: opt.RequirePass, Clock: opt.Clock, MaxLogLimit: opt.MaxLogLimit, Registerer: n.Registry,
		Metrics: n.Server, Logger: opt.Logger, MetricsAuth: opt.MetricsAuth, Cluster: opt.Cluster,
		TrustedProxies: opt.TrustedProxies, IPv6Prefix: opt.IPv6Prefix, Status: status,
	})}
	n.Addr, n.URL = ln.Addr().String(), "http://"+hln.Addr().String()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); n.Server.Serve(ln) }()
	go func() { defer wg.Done(); hs.Serve(hln) }()
	n.stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		n.Server.Shutdown(ctx)
		wg.Wait()
	}
	t.Cleanup(n.Stop)
	return n
}

func orFree(addr string) string {
	if addr == "" {
		return "127.0.0.1:0"
	}
	return addr
}

// Stop closes both listeners and every connection; later calls do nothing.
// After Stop the addresses refuse connections.
func (n *Node) Stop() { n.stopOnce.Do(n.stop) }

// Clock is a fake clock for Options.Clock, safe for concurrent use.
type Clock struct{ ns atomic.Int64 }

// NewClock returns a Clock reading t.
func NewClock(t time.Time) *Clock {
	c := &Clock{}
	c.ns.Store(t.UnixNano())
	return c
}

// Now returns the current reading in ns since the epoch.
func (c *Clock) Now() int64 { return c.ns.Load() }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
