package shards_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/shards"
)

var errRefused = errors.New("MISCONF refused for the test")

// TestRefuseStopsEveryChange: while Options.Refuse refuses, every command
// that would change state — through the Store or inside a transaction —
// gets its error and changes nothing (the journal stays empty, the state
// digest stays the same), while peeks (cost or quantity 0) and reads
// answer. Once it allows, the same commands work.
func TestRefuseStopsEveryChange(t *testing.T) {
	var refusing atomic.Bool
	s := shards.NewStore(shards.Options{Shards: 4, Refuse: func() error {
		if refusing.Load() {
			return errRefused
		}
		return nil
	}})
	s.EnableJournal()
	p := engine.Params{Limit: 10, Window: 60e9}
	now := int64(1e18)
	if _, err := s.Check([]byte("k"), engine.Fixed, p, 3, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetRule(rule("r", "fixed", 5, false)); err != nil {
		t.Fatal(err)
	}
	s.AppendChanges(nil) // collected: the journal is empty
	refusing.Store(true)
	digest := s.Digest(now)
	changes := []struct {
		name string
		run  func() error
	}{
		{"check", func() error { _, err := s.Check([]byte("k"), engine.Fixed, p, 1, now); return err }},
		{"check new key", func() error { _, err := s.Check([]byte("new"), engine.Fixed, p, 1, now); return err }},
		{"throttle", func() error { _, err := s.Throttle([]byte("g"), 5, 10, 60, 1, now); return err }},
		{"reset", func() error { _, err := s.Reset([]byte("k"), now); return err }},
		{"flush", s.Flush},
		{"set rule", func() error { _, err := s.SetRule(rule("r2", "fixed", 5, false)); return err }},
		{"create rule", func() error { return s.CreateRule(rule("r3", "fixed", 5, false)) }},
		{"delete rule", func() error { _, err := s.DeleteRule("r"); return err }},
		{"check rules", func() error { return s.CheckRules(query("u1", 1), now) }},
		{"check all", func() error {
			_, err := s.CheckAll([]shards.Op{{Key: []byte("k"), Algo: engine.Fixed, Params: p}}, 1, now)
			return err
		}},
		{"tx check", func() error {
			return inTx(s, func(tx *shards.Tx) error { _, err := tx.Check([]byte("k"), engine.Fixed, p, 1, now); return err })
		}},
		{"tx reset", func() error {
			return inTx(s, func(tx *shards.Tx) error { _, err := tx.Reset([]byte("k"), now); return err })
		}},
		{"tx flush", func() error { return inTx(s, func(tx *shards.Tx) error { return tx.Flush() }) }},
		{"tx check rules", func() error { return inTx(s, func(tx *shards.Tx) error { return tx.CheckRules(query("u1", 1), now) }) }},
	}
	for _, c := range changes {
		if err := c.run(); !errors.Is(err, errRefused) {
			t.Errorf("%s while refusing: %v, want the refusal", c.name, err)
		}
	}
	if _, n := s.AppendChanges(nil); n != 0 || s.Digest(now) != digest || s.RuleCount() != 1 {
		t.Fatalf("refused commands changed state: %d records journaled, digest changed %v, %d rules", n, s.Digest(now) != digest, s.RuleCount())
	}
	// Peeks and reads answer.
	if r, err := s.Check([]byte("k"), engine.Fixed, p, 0, now); err != nil || r.Remaining != 7 {
		t.Fatalf("peek: %+v %v", r, err)
	}
	if _, err := s.Throttle([]byte("g"), 5, 10, 60, 0, now); err != nil {
		t.Fatalf("throttle quantity 0: %v", err)
	}
	if err := s.CheckRules(query("u1", 0), now); err != nil {
		t.Fatalf("check rules of cost 0: %v", err)
	}
	if err := inTx(s, func(tx *shards.Tx) error { _, err := tx.Check([]byte("k"), engine.Fixed, p, 0, now); return err }); err != nil {
		t.Fatalf("tx peek: %v", err)
	}
	refusing.Store(false)
	for _, c := range changes {
		if err := c.run(); err != nil {
			t.Errorf("%s once allowed: %v", c.name, err)
		}
	}
}

// inTx runs fn in a transaction over every shard and returns its error.
func inTx(s *shards.Store, fn func(tx *shards.Tx) error) error {
	var err error
	s.Transact(shards.TxPlan{All: true}, func(tx *shards.Tx) { err = fn(tx) })
	return err
}
