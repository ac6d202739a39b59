package shards_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/shards"
)

// keyOtherShard returns a key whose shard (of n) differs from key's.
func keyOtherShard(key string, n int) string {
	for i := 0; ; i++ {
		k := key + "-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if xxhash.Sum64String(k)%uint64(n) != xxhash.Sum64String(key)%uint64(n) {
			return k
		}
	}
}

// TestTransactHoldsOnlyItsKeys: while a transaction runs, a Check of one
// of its keys waits for it to end, and a Check of a key on another shard
// does not.
func TestTransactHoldsOnlyItsKeys(t *testing.T) {
	const n = 16
	s := shards.New(n)
	p := engine.Params{Limit: 10, Window: 60e9}
	other := keyOtherShard("mine", n)
	mineDone, otherDone := make(chan struct{}), make(chan struct{})
	s.Transact(shards.TxPlan{Keys: [][]byte{[]byte("mine")}}, func(tx *shards.Tx) {
		if _, err := tx.Check([]byte("mine"), engine.Fixed, p, 1, now0); err != nil {
			t.Fatal(err)
		}
		go func() { s.Check([]byte("mine"), engine.Fixed, p, 1, now0); close(mineDone) }()
		go func() { s.Check([]byte(other), engine.Fixed, p, 1, now0); close(otherDone) }()
		select {
		case <-otherDone:
		case <-time.After(10 * time.Second):
			t.Fatal("a key on another shard waited for the transaction")
		}
		// A negative: give the blocked Check ample time to (wrongly) finish.
		select {
		case <-mineDone:
			t.Fatal("a Check of the transaction's key ran while the transaction held it")
		case <-time.After(50 * time.Millisecond):
		}
		if r, _ := tx.Check([]byte("mine"), engine.Fixed, p, 1, now0); r.Remaining != 8 {
			t.Fatalf("second check in the transaction: remaining %d, want 8 (nothing in between)", r.Remaining)
		}
		if _, err := tx.Check([]byte(other), engine.Fixed, p, 1, now0); !errors.Is(err, shards.ErrNotLocked) {
			t.Fatalf("check of an undeclared key: %v, want ErrNotLocked", err)
		}
	})
	select {
	case <-mineDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting Check did not run after the transaction")
	}
	if r := peek(t, s, "mine", engine.Fixed, p, now0); r.Remaining != 7 {
		t.Fatalf("after: remaining %d, want 7", r.Remaining)
	}
}

// TestTransactionsDoNotInterleave: each transaction checks x then y; if
// another transaction's checks could come in between, x and y would
// sometimes report different counts within one transaction.
func TestTransactionsDoNotInterleave(t *testing.T) {
	s := shards.New(64)
	p := engine.Params{Limit: 1 << 40, Window: 3600e9}
	plan := shards.TxPlan{Keys: [][]byte{[]byte("x"), []byte("y")}}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				s.Transact(plan, func(tx *shards.Tx) {
					rx, _ := tx.Check([]byte("x"), engine.Fixed, p, 1, now0)
					ry, _ := tx.Check([]byte("y"), engine.Fixed, p, 1, now0)
					if rx.Remaining != ry.Remaining {
						select {
						case errs <- "x and y diverged inside one transaction":
						default:
						}
					}
				})
			}
		}()
	}
	wg.Wait()
	close(errs)
	if msg, ok := <-errs; ok {
		t.Fatal(msg)
	}
	if r := peek(t, s, "x", engine.Fixed, p, now0); r.Remaining != 1<<40-4000 {
		t.Fatalf("x remaining %d, want %d", r.Remaining, int64(1<<40-4000))
	}
}

func TestTransactRuleChecks(t *testing.T) {
	s := shards.New(16)
	if _, err := s.SetRule(rule("a", "fixed", 2, false)); err != nil {
		t.Fatal(err)
	}
	q := query("u1", 1)
	s.Transact(shards.TxPlan{Queries: []*rules.Query{query("u1", 1)}}, func(tx *shards.Tx) {
		// A rule added by someone else during the transaction is ordered
		// after it: the transaction's checks do not see it.
		done := make(chan struct{})
		go func() { s.SetRule(rule("b", "fixed", 1, false)); close(done) }()
		<-done
		for i, want := range []bool{true, true, false} {
			if err := tx.CheckRules(q, now0); err != nil {
				t.Fatal(err)
			}
			if q.Allowed != want || len(q.Evals) != 1 {
				t.Fatalf("check %d: allowed %v with %d rules, want %v with 1", i, q.Allowed, len(q.Evals), want)
			}
		}
	})
	if err := s.CheckRules(q, now0); err != nil || len(q.Evals) != 2 {
		t.Fatalf("after: %v, %d rules, want 2", err, len(q.Evals))
	}
}

// TestTransactRuleChangeThenCheck: with All, a rule set inside the
// transaction applies to its later rule checks.
func TestTransactRuleChangeThenCheck(t *testing.T) {
	s := shards.New(16)
	q := query("u1", 1)
	s.Transact(shards.TxPlan{All: true}, func(tx *shards.Tx) {
		if _, err := tx.SetRule(rule("a", "fixed", 1, false)); err != nil {
			t.Fatal(err)
		}
		if err := tx.CheckRules(q, now0); err != nil || !q.Allowed || len(q.Evals) != 1 {
			t.Fatalf("first: %v %v %d", err, q.Allowed, len(q.Evals))
		}
		if err := tx.CheckRules(q, now0); err != nil || q.Allowed {
			t.Fatalf("second: %v %v, want denied", err, q.Allowed)
		}
		if n := tx.Len(); n != 1 {
			t.Fatalf("Len %d, want 1", n)
		}
		if err := tx.Flush(); err != nil || tx.Len() != 0 {
			t.Fatalf("Flush: %v, Len %d", err, tx.Len())
		}
	})
}

func TestTransactWithoutAllRefusesWholeStore(t *testing.T) {
	s := shards.New(4)
	s.Transact(shards.TxPlan{}, func(tx *shards.Tx) {
		if err := tx.Flush(); !errors.Is(err, shards.ErrNotLocked) {
			t.Fatalf("Flush without All: %v", err)
		}
	})
}

// TestTransactNoWait: a NoWait transaction gets ErrWouldWait, without
// running, for a shard a script's transaction holds, whether it is a
// script's own or not; it waits, as any transaction, for one held by a
// transaction that is not a script's; and it runs at once on a shard of
// its own.
func TestTransactNoWait(t *testing.T) {
	const n = 16
	s := shards.New(n)
	key, other := []byte("held"), []byte(keyOtherShard("held", n))
	try := func(plan shards.TxPlan) error {
		ran := false
		err := s.Transact(plan, func(*shards.Tx) { ran = true })
		if ran == (err != nil) {
			t.Fatalf("plan %+v: ran %v, err %v", plan, ran, err)
		}
		return err
	}
	s.Transact(shards.TxPlan{Keys: [][]byte{key}, Script: true}, func(*shards.Tx) {
		for _, script := range []bool{false, true} {
			if err := try(shards.TxPlan{Keys: [][]byte{other, key}, NoWait: true, Script: script}); !errors.Is(err, shards.ErrWouldWait) {
				t.Fatalf("script %v: %v, want ErrWouldWait", script, err)
			}
			if err := try(shards.TxPlan{Keys: [][]byte{other}, NoWait: true, Script: script}); err != nil {
				t.Fatalf("script %v, a shard of its own: %v", script, err)
			}
		}
	})
	done := make(chan error)
	s.Transact(shards.TxPlan{Keys: [][]byte{key}}, func(*shards.Tx) {
		go func() { done <- try(shards.TxPlan{Keys: [][]byte{key}, NoWait: true, Script: true}) }()
		select {
		case err := <-done:
			t.Fatalf("a NoWait transaction did not wait for a command's transaction: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	})
	if err := <-done; err != nil {
		t.Fatalf("after the command's transaction: %v", err)
	}
	if err := try(shards.TxPlan{Keys: [][]byte{key}, NoWait: true}); err != nil {
		t.Fatal(err)
	}
}
