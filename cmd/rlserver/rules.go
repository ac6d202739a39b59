package main

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/httpapi"
	"github.com/rlserver/rlserver/internal/boundedfile"
	"github.com/rlserver/rlserver/internal/clientid"
	"github.com/rlserver/rlserver/rules"
)

// readRules reads and validates the --rules file, if any, before anything
// else starts, so that a bad file stops the server without touching its
// data directory. Errors name the file, the rule (position, line, id) and
// the field. The file is read with bounds (boundedfile): at most maxBytes
// (--max-config-bytes), and a FIFO or device that does not end within
// configWait is given up; a file that holds no list of rules (empty, or
// comments only: a file caught half-written) is refused rather than read
// as "no rules" — `[]` says that.
func readRules(path string, maxLogLimit, maxBytes int64) ([]rules.Rule, error) {
	if path == "" {
		return nil, nil
	}
	data, err := boundedfile.Read(path, maxBytes, configWait)
	if errors.Is(err, boundedfile.ErrTooLarge) {
		return nil, fmt.Errorf("rules file %s: %w (--max-config-bytes %d): raise --max-config-bytes to load it", path, err, maxBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("rules file %s: %w", path, err)
	}
	list, err := rules.LoadYAML(data, maxLogLimit)
	if err != nil {
		return nil, fmt.Errorf("rules file %s: %w", path, err)
	}
	return list, nil
}

// configWait bounds how long reading a --rules or --envoy-config file may
// take: a FIFO whose writer never finishes must not hold the reloads (and
// a SIGTERM behind them) forever.
const configWait = 5 * time.Second

// httpConfig wires the HTTP API to the node's state, metrics (those of
// the RESP server, which counts HTTP checks with its own) and log.
func httpConfig(cfg Config, st *state, reg *prometheus.Registry, m httpapi.Metrics, log *slog.Logger) httpapi.Config {
	hc := httpapi.Config{
		Gatherer: reg, Registerer: reg, Checker: st.lim, Rules: st.lim, Metrics: m, Logger: log,
		AdminToken: cfg.AdminToken, CheckToken: cfg.RequirePass, MetricsAuth: cfg.MetricsAuth,
		MaxKeyBytes: cfg.MaxKeyBytes, MaxLogLimit: cfg.MaxLogLimit, IPv6Prefix: cfg.IPv6Prefix, Clock: st.now,
	}
	hc.TrustedProxies, _ = clientid.ParsePrefixes(cfg.TrustedProxies) // Validate has parsed it
	if st.node != nil {
		hc.Durable = st.node
	}
	if st.disk != nil {
		hc.Ready = st.disk.Space.Err // not ready for checks while the disk is nearly full
	}
	if st.cl != nil {
		hc.Durable = st.cl
		hc.Cluster = clusterNode{st.cl}
		hc.Checker = httpChecker{st.cl.Forwarder(), st.cl} // HTTP clients do not follow MOVED
		hc.Ready = func() error {
			if !st.cl.View().OK {
				return errors.New("some slots have no leader yet")
			}
			return st.disk.Space.Err()
		}
	}
	return hc
}
