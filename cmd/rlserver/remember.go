package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rlserver/rlserver/internal/durable"
)

// A cluster node's data directory remembers how the node was started —
// its addresses, how it joined, its consistency — in settingsFile, so that
// a restart needs --data-dir alone: the other nodes know it by those
// addresses. A setting given again (flag, environment or config file)
// overrides the remembered one and is remembered from then on. Secrets
// (--requirepass, --admin-token, TLS files) are not written to disk: give
// them again, as on the first start.

// settingsFile is the file, in the data directory, of a cluster node's
// remembered settings.
const settingsFile = "rlserver.settings.json"

// settings is settingsFile's content: flag name → value.
type settings struct {
	Version int               `json:"version"`
	Flags   map[string]string `json:"flags"`
}

// rememberedFlags are the settings a cluster node's directory remembers,
// by flag name, with cfg's value of each.
func rememberedFlags(cfg *Config) map[string]*string {
	return map[string]*string{
		"listen": &cfg.Listen, "http": &cfg.HTTP, "grpc": &cfg.GRPC, "raft-addr": &cfg.RaftAddr, "raft-advertise": &cfg.RaftAdvertise,
		"announce": &cfg.Announce, "join": &cfg.Join, "consistency": &cfg.Consistency, "node-id": &cfg.NodeID,
	}
}

// recallSettings sets, in cfg, every remembered setting of dir that cfg
// was not given, and returns their names. It does nothing for a directory
// without settingsFile (a new or standalone node's).
func recallSettings(cfg *Config, dir string) ([]string, error) {
	path := filepath.Join(dir, settingsFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	var s settings
	if err := json.Unmarshal(b, &s); err != nil || s.Version != 1 {
		return nil, fmt.Errorf("data directory: %s is not a settings file of this version (%v): remove it and give the node's flags again", path, err)
	}
	var recalled []string
	for name, p := range rememberedFlags(cfg) {
		if v, ok := s.Flags[name]; ok && !cfg.given[name] && *p != v {
			*p = v
			recalled = append(recalled, name)
		}
	}
	if v, ok := s.Flags["proxy"]; ok && !cfg.given["proxy"] {
		if cfg.Proxy, err = strconv.ParseBool(v); err != nil {
			return nil, fmt.Errorf("data directory: %s: proxy=%q: %v", path, v, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("data directory: %s: %w", path, err)
	}
	return recalled, nil
}

// rememberSettings writes cfg's remembered settings into dir, synced, and
// replaces the file atomically.
func rememberSettings(cfg *Config, dir string) error {
	s := settings{Version: 1, Flags: map[string]string{"proxy": strconv.FormatBool(cfg.Proxy)}}
	for name, p := range rememberedFlags(cfg) {
		s.Flags[name] = *p
	}
	b, _ := json.MarshalIndent(s, "", "  ")
	return durable.WriteFile(vfs.Default, filepath.Join(dir, settingsFile), append(b, '\n'))
}
