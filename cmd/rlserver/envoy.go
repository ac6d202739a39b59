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
	tokens   []string
	stopOnce sync.Once
	cancel   context.CancelFunc
}

// startRLS loads --envoy-config (a bad file refuses the start) and serves
// the rate limit service on --grpc, counting its connections with the
// RESP and HTTP ones against --maxclients, over TLS when tc is not nil;
// the service requires --requirepass or --admin-token as a bearer token
// when either is set. The watcher reloads the configuration when its
// files change; SIGHUP reloads it through the reloader (reload.go).
func startRLS(ctx context.Context, cfg Config, st *state, reg prometheus.Registerer, tc *tls.Config, maxConns int, open *atomic.Int64, log *slog.Logger) (*rlsFront, error) {
	f := &rlsFront{}
	if cfg.GRPC == "" && cfg.EnvoyConfig == "" {
		return f, nil
	}
	ec := envoyrls.Config{Limiter: st.store, Registerer: reg, Logger: log, MaxKeyBytes: cfg.MaxKeyBytes}
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
	f.gs = envoyrls.NewGRPCServer(f.svc, envoyrls.ServerOptions{TLS: tc, Tokens: f.tokens})
	go f.gs.Serve(newLimitListener(ln, maxConns, open))
	log.Info("envoy rate limit service listening", "grpc", ln.Addr().String(), "envoy_config", cfg.EnvoyConfig)
	return f, nil
}

// withJSON adds POST /json (the service as JSON) in front of h.
func (f *rlsFront) withJSON(h http.Handler) http.Handler {
	if f.svc == nil {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle("/json", envoyrls.JSONHandler(f.svc, f.tokens))
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
