package envoyrls

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/rlserver/rlserver/envoyrls/config"
)

// Watcher keeps a Service's configuration in step with its files: it
// loads them at start, and again whenever their names, sizes or
// modification times change (polled) and when Reload is called (SIGHUP).
// A load that fails keeps the last good configuration, is logged, and is
// counted in ratelimit_service_config_load_total{result="error"}.
type Watcher struct {
	svc  *Service
	path string
	opt  config.Options
	log  *slog.Logger

	mu    sync.Mutex // serialises loads
	stamp string
}

// NewWatcher loads path into svc and returns a Watcher of it. A first load
// that fails is returned as the error (the caller refuses to start).
func NewWatcher(svc *Service, path string, opt config.Options) (*Watcher, error) {
	w := &Watcher{svc: svc, path: path, opt: opt, log: svc.cfg.Logger}
	if err := w.load(true); err != nil {
		return nil, err
	}
	return w, nil
}

// Reload loads the files now. On success the Service answers from them;
// on failure it keeps the configuration it had and the error, which names
// the file, line and field, is returned and logged.
func (w *Watcher) Reload() error { return w.load(false) }

// load loads the files; first says it is the load at start, whose failure
// is logged as what it is: the server does not start (there is no last
// good configuration yet).
func (w *Watcher) load(first bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stamp = config.Stamp(w.path)
	c, err := config.Load(w.path, w.opt)
	w.svc.metrics.loaded(err == nil)
	if err != nil {
		var ce *config.Error
		if !errors.As(err, &ce) {
			ce = &config.Error{File: w.path, Msg: err.Error()}
		}
		msg := "envoy config: not loaded; the last good configuration stays in use"
		if first {
			msg = "envoy config: not loaded at start; the server exits (fix --envoy-config and start it again)"
		}
		w.log.Error(msg, "file", ce.File, "line", ce.Line, "field", ce.Field, "err", ce.Msg)
		return err
	}
	w.svc.SetConfig(c)
	w.log.Info("envoy config loaded", "path", w.path, "files", len(c.Files()), "domains", c.Domains())
	return nil
}

// Run polls the files every interval until ctx ends, reloading when they
// changed.
func (w *Watcher) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.mu.Lock()
			changed := config.Stamp(w.path) != w.stamp
			w.mu.Unlock()
			if changed {
				w.Reload()
			}
		}
	}
}
