package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/rlserver/rlserver/envoyrls"
	"github.com/rlserver/rlserver/envoyrls/config"
)

// envoyPoll is how often --envoy-config's files are checked for changes.
const envoyPoll = time.Second

// rlsFront is Envoy's rate limit service: the gRPC server on --grpc, POST
// /json on the HTTP port, and the watcher of --envoy-config. Its zero
// value (no --grpc) serves nothing.
type rlsFront struct {
	svc      *envoyrls.Service
	watcher  *envoyrls.Watcher // nil without --envoy-config
	gs       *grpc.Server
	grpcAddr string // the address gs serves on, for /readyz's GRPCHeader
	grpcTLS  bool
	tokens   []string
	open     atomic.Int64 // gRPC connections open, at most --grpc-maxclients
	stopOnce sync.Once
	cancel   context.CancelFunc
}

// startRLS loads --envoy-config (a bad file refuses the start) and serves
// the rate limit service on --grpc, at most maxConns connections at once
// (--grpc-maxclients, a budget apart from RESP's and HTTP's), over TLS
// when tc is not nil;
// the service requires --requirepass or --admin-token as a bearer token
// when either is set. The watcher reloads the configuration when its
// files change; SIGHUP reloads it through the reloader (reload.go).
func startRLS(ctx context.Context, cfg Config, st *state, reg prometheus.Registerer, tc *tls.Config, maxConns int, onCall func(), log *slog.Logger) (*rlsFront, error) {
	f := &rlsFront{}
	if cfg.GRPC == "" && cfg.EnvoyConfig == "" {
		return f, nil
	}
	charging, _ := envoyrls.ParseCharging(cfg.EnvoyCharging) // validated
	ec := envoyrls.Config{Limiter: st.store, Registerer: reg, Logger: log, MaxKeyBytes: cfg.MaxKeyBytes, Clock: st.now,
		Charging: charging}
	switch {
	case st.cl != nil:
		ec.Limiter, ec.Durable = st.cl, st.cl
	case st.node != nil:
		ec.Limiter, ec.Durable = st.node, st.node
	}
	f.svc = envoyrls.New(ec)
	for _, t := range []string{cfg.RequirePass, cfg.AdminToken} {
		if t != "" {
			f.tokens = append(f.tokens, t)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	f.cancel = cancel
	if cfg.EnvoyConfig != "" {
		w, err := envoyrls.NewWatcher(f.svc, cfg.EnvoyConfig, config.Options{MaxLogLimit: cfg.MaxLogLimit, MaxBytes: cfg.MaxConfigBytes})
		if err != nil {
			cancel()
			return nil, fmt.Errorf("--envoy-config: %w", err)
		}
		f.watcher = w
		go w.Run(wctx, envoyPoll)
	}
	if cfg.GRPC == "" {
		return f, nil
	}
	ln, err := net.Listen("tcp", cfg.GRPC)
	if err != nil && !cfg.given["grpc"] {
		// The default address is busy (another rlserver, or
		// envoyproxy/ratelimit, on this machine): serve without it rather
		// than refuse to start; a --grpc given explicitly must listen.
		log.Warn("the rate limit service is off: its default address is in use (give --grpc to choose one)", "grpc", cfg.GRPC, "err", err)
		return f, nil
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("listen on %s (--grpc): %w", cfg.GRPC, err)
	}
	f.gs = envoyrls.NewGRPCServer(f.svc, envoyrls.ServerOptions{TLS: tc, Tokens: f.tokens, Registerer: reg, OnCall: onCall})
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "rlserver_grpc_connections",
		Help: "Connections to --grpc open, at most --grpc-maxclients (one more is closed at once)."},
		func() float64 { return float64(f.open.Load()) }))
	f.grpcAddr, f.grpcTLS = ln.Addr().String(), tc != nil
	go f.gs.Serve(newLimitListener(ln, maxConns, &f.open))
	log.Info("envoy rate limit service listening", "grpc", ln.Addr().String(), "envoy_config", cfg.EnvoyConfig, "grpc_maxclients", maxConns)
	return f, nil
}

// GRPCHeader is the header of /readyz's answers that names the address
// the rate limit service's gRPC server listens on, when it is on:
// `rlserver health` (the image's HEALTHCHECK) then asks that server's
// grpc.health.v1 too.
const GRPCHeader = "Rlserver-Grpc"

// withJSON adds POST /json (the service as JSON) in front of h, and
// GRPCHeader to /readyz.
func (f *rlsFront) withJSON(h http.Handler) http.Handler {
	if f.svc == nil {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle("/json", envoyrls.JSONHandler(f.svc, f.tokens))
	if f.gs != nil {
		v := f.grpcAddr
		if f.grpcTLS {
			v += "; tls"
		}
		mux.Handle("/readyz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(GRPCHeader, v)
			h.ServeHTTP(w, r)
		}))
	}
	mux.Handle("/", h)
	return mux
}

// stop ends the gRPC server, letting calls in flight finish for a few
// seconds, and the watcher. Later calls do nothing.
func (f *rlsFront) stop() {
	f.stopOnce.Do(func() {
		if f.cancel != nil {
			f.cancel()
		}
		if f.gs == nil {
			return
		}
		done := make(chan struct{})
		go func() { f.gs.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			f.gs.Stop()
		}
	})
}
