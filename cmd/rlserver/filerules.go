package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/rlserver/rlserver/rules"
)

// The --rules file owns the rules it names. Loading it (at start and on
// SIGHUP) sets each of its rules, replacing a rule of the same id however
// it was made, and deletes the rules that the previous load set and the
// file no longer names. Rules made at run time (RL.RULE.SET, POST or PUT
// /rules) under other ids are left alone. The ids of the last load are
// recorded in the data directory (fileRulesRecord), so that a restart
// with a changed file deletes what the old one set, as a reload does.

// fileRulesRecord is the file, in the data directory, of the rule ids the
// --rules file set at its last load.
const fileRulesRecord = "rlserver.file-rules.json"

// fileRulesList is fileRulesRecord's content.
type fileRulesList struct {
	Version int      `json:"version"`
	File    string   `json:"file"`
	IDs     []string `json:"ids"`
}

// ruleWriter is where the file's rules go: the node's rule store.
type ruleWriter interface {
	SetRule(r rules.Rule) (added bool, err error)
	DeleteRule(id string) (existed bool, err error)
}

// fileRules loads the --rules file into a rule store. Its methods are
// safe for concurrent use; loads run one at a time.
type fileRules struct {
	mu          sync.Mutex
	path        string // --rules; "" loads nothing
	maxLogLimit int64
	store       ruleWriter
	record      string          // path of fileRulesRecord; "" without a data directory
	owned       map[string]bool // the ids the last load set
	log         *slog.Logger
}

// newFileRules returns the loader of path into store, with the ids the
// last load recorded in dataDir ("" records nothing).
func newFileRules(path string, maxLogLimit int64, store ruleWriter, dataDir string, log *slog.Logger) (*fileRules, error) {
	f := &fileRules{path: path, maxLogLimit: maxLogLimit, store: store, owned: map[string]bool{}, log: log}
	if dataDir == "" || path == "" {
		return f, nil
	}
	f.record = filepath.Join(dataDir, fileRulesRecord)
	b, err := os.ReadFile(f.record)
	if errors.Is(err, os.ErrNotExist) {
		return f, nil
	}
	var l fileRulesList
	if err == nil {
		err = json.Unmarshal(b, &l)
	}
	if err != nil || l.Version != 1 {
		return nil, fmt.Errorf("data directory: %s is not a record of the rules file's rules (%v): remove it", f.record, err)
	}
	for _, id := range l.IDs {
		f.owned[id] = true
	}
	return f, nil
}

// load stores list (the file's rules, from readRules) and deletes the
// rules the previous load set that list does not name. A store without a
// leader (a cluster electing) is retried until retry has passed or ctx
// ends. It returns the first error, after which the rules not yet stored
// keep their old state and the next load tries again.
func (f *fileRules) load(ctx context.Context, list []rules.Rule, retry time.Duration) error {
	if f.path == "" {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	deadline := time.Now().Add(retry)
	named := map[string]bool{}
	for _, r := range list {
		named[r.ID] = true
		f.owned[r.ID] = true // owned from the first try on, so a failed load's rules are cleaned up later
		if err := retrying(ctx, deadline, func() error { _, err := f.store.SetRule(r); return err }); err != nil {
			return fmt.Errorf("rules file %s: rule %q: %w", f.path, r.ID, err)
		}
	}
	var gone []string
	for id := range f.owned {
		if !named[id] {
			gone = append(gone, id)
		}
	}
	sort.Strings(gone)
	for _, id := range gone {
		if err := retrying(ctx, deadline, func() error { _, err := f.store.DeleteRule(id); return err }); err != nil {
			return fmt.Errorf("rules file %s: delete rule %q: %w", f.path, id, err)
		}
		delete(f.owned, id)
	}
	if err := f.writeRecord(); err != nil {
		return err
	}
	f.log.Info("rules loaded", "file", f.path, "rules", len(list), "deleted", len(gone))
	return nil
}

// reload reads the file again and loads it; a file that does not read or
// validate changes nothing.
func (f *fileRules) reload(ctx context.Context, retry time.Duration) error {
	list, err := readRules(f.path, f.maxLogLimit)
	if err != nil {
		return err
	}
	return f.load(ctx, list, retry)
}

// writeRecord writes the owned ids to the record, atomically.
func (f *fileRules) writeRecord() error {
	if f.record == "" {
		return nil
	}
	l := fileRulesList{Version: 1, File: f.path, IDs: []string{}}
	for id := range f.owned {
		l.IDs = append(l.IDs, id)
	}
	sort.Strings(l.IDs)
	b, _ := json.MarshalIndent(l, "", "  ")
	tmp := f.record + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("rules file: record its rules: %w", err)
	}
	if err := os.Rename(tmp, f.record); err != nil {
		return fmt.Errorf("rules file: record its rules: %w", err)
	}
	return nil
}

// retrying calls do until it succeeds, deadline passes or ctx ends,
// pausing 100 ms between tries, and returns its last error.
func retrying(ctx context.Context, deadline time.Time, do func() error) error {
	for {
		err := do()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}
