package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"
)

// reloader reloads, on SIGHUP, what the node took from files: the --rules
// file, --envoy-config and the TLS files. A part that fails to reload
// logs why and keeps its last good state; the process never stops for it.
type reloader struct {
	log   *slog.Logger
	total *prometheus.CounterVec
	parts []reloadPart
}

// reloadPart is one thing a SIGHUP reloads.
type reloadPart struct {
	what   string
	reload func() error
}

// newReloader returns a reloader counting its reloads in
// rlserver_reloads_total{what,result} on reg.
func newReloader(reg prometheus.Registerer, log *slog.Logger) *reloader {
	r := &reloader{log: log, total: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rlserver_reloads_total",
		Help: "Reloads on SIGHUP of what comes from files, by what (rules, envoy, tls) and result (ok, error).",
	}, []string{"what", "result"})}
	reg.MustRegister(r.total)
	return r
}

// add registers a part; call it before run.
func (r *reloader) add(what string, reload func() error) {
	r.parts = append(r.parts, reloadPart{what, reload})
	r.total.WithLabelValues(what, "ok")
	r.total.WithLabelValues(what, "error")
}

// reloadAll reloads every part, in the order they were added.
func (r *reloader) reloadAll() {
	if len(r.parts) == 0 {
		r.log.Info("SIGHUP: nothing to reload (no --rules, --envoy-config or --tls-cert)")
		return
	}
	for _, p := range r.parts {
		if err := p.reload(); err != nil {
			r.total.WithLabelValues(p.what, "error").Inc()
			r.log.Error("SIGHUP: reload failed; the last good state stays in use", "what", p.what, "err", err)
			continue
		}
		r.total.WithLabelValues(p.what, "ok").Inc()
		r.log.Info("SIGHUP: reloaded", "what", p.what)
	}
}

// run reloads on each signal from hup until ctx ends.
func (r *reloader) run(ctx context.Context, hup <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			r.reloadAll()
		}
	}
}
