package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/httpapi"
	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/shards"
)

// loadRules loads the --rules file, if any, into store. Errors name the
// file, the rule (position, line, id) and the field.
func loadRules(store *shards.Store, path string, maxLogLimit int64, log *slog.Logger) error {
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("rules file: %w", err)
	}
	list, err := rules.LoadYAML(data, maxLogLimit)
	if err != nil {
		return fmt.Errorf("rules file %s: %w", path, err)
	}
	for _, r := range list {
		if _, err := store.SetRule(r); err != nil {
			return fmt.Errorf("rules file %s: %w", path, err)
		}
	}
	log.Info("rules loaded", "file", path, "rules", len(list))
	return nil
}

// httpConfig wires the HTTP API to the node's state and metrics.
func httpConfig(cfg Config, store *shards.Store, reg *prometheus.Registry) httpapi.Config {
	return httpapi.Config{
		Gatherer: reg, Registerer: reg, Checker: store, Rules: store,
		AdminToken: cfg.AdminToken, CheckToken: cfg.RequirePass,
		MaxKeyBytes: cfg.MaxKeyBytes, MaxLogLimit: cfg.MaxLogLimit,
	}
}
