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

// ruleWriter is where the file's rules go: the node's rule store, which
// makes a load one change (one log entry, one meta entry in a cluster).
type ruleWriter interface {
	ChangeRules(ch rules.Change) (rules.ChangeResult, error)
}

// fileRules loads the --rules file into a rule store. Its methods are
// safe for concurrent use; loads run one at a time.
type fileRules struct {
	mu          sync.Mutex
	path        string // --rules; "" loads nothing
	maxLogLimit int64
	maxBytes    int64 // --max-config-bytes
	store       ruleWriter
	record      string          // path of fileRulesRecord; "" without a data directory
	owned       map[string]bool // the ids the last load set
	log         *slog.Logger
}

// newFileRules returns the loader of path into store, with the ids the
// last load recorded in dataDir ("" records nothing).
func newFileRules(path string, maxLogLimit, maxBytes int64, store ruleWriter, dataDir string, log *slog.Logger) (*fileRules, error) {
	f := &fileRules{path: path, maxLogLimit: maxLogLimit, maxBytes: maxBytes, store: store, owned: map[string]bool{}, log: log}
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
// rules the previous load set that list does not name, as one change
// (rules.Change): every rule store reader — on this node, and in a
// cluster on every node — sees the rules of the last load or of this one,
// never a part. A store without a leader (a cluster electing) is retried
// until retry has passed or ctx ends. If the change is refused, the next
// load tries again, and deletes the rules of this one it does not name
// (in a cluster, a change whose answer was lost may have been made).
func (f *fileRules) load(ctx context.Context, list []rules.Rule, retry time.Duration) error {
	if f.path == "" {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	named := make(map[string]bool, len(list))
	for _, r := range list {
		named[r.ID] = true
	}
	var gone []string
	for id := range f.owned {
		if !named[id] {
			gone = append(gone, id)
		}
	}
	sort.Strings(gone)
	start := time.Now()
	var res rules.ChangeResult
	err := retrying(ctx, start.Add(retry), func() (err error) {
		res, err = f.store.ChangeRules(rules.Change{Set: list, Delete: gone})
		return err
	})
	if err != nil {
		for id := range named { // the change may have been made (an unknown outcome): the next load cleans up after it
			f.owned[id] = true
		}
		return fmt.Errorf("rules file %s: not loaded: %w", f.path, err)
	}
	f.owned = named
	if err := f.writeRecord(); err != nil {
		return err
	}
	f.log.Info("rules loaded", "file", f.path, "rules", len(list), "added", res.Added, "replaced", res.Replaced,
		"deleted", res.Deleted, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// reload reads the file again and loads it; a file that does not read or
// validate changes nothing.
func (f *fileRules) reload(ctx context.Context, retry time.Duration) error {
	list, err := readRules(f.path, f.maxLogLimit, f.maxBytes)
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
