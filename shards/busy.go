package shards

import (
	"errors"
	"time"
)

// Scripts hold their keys' shards for as long as they run (see
// TxPlan.Script), which may be seconds where a command holds a shard for a
// microsecond. A client's command never waits blindly for such a shard: it
// polls it instead (lockCmd), and once the script has run past its time
// limit (Tx.SetBusy) it gets ErrBusy, as Redis answers BUSY while a script
// runs too long. So an event loop of the server, which serves many
// connections and must not wait long, is held at most until the script
// turns busy, and a SCRIPT KILL sent on any connection is read; a script's
// transaction on a loop does not wait at all (TxPlan.NoWait: the server
// runs it again off the loop).

// ErrBusy is Redis's answer to a command that would wait for a script that
// has run past its time limit.
var ErrBusy = errors.New("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.")

// ErrWouldWait is Transact's answer, for a plan with NoWait, when a shard
// it needs is held by a script, which may hold it for long: the caller,
// which must not wait (an event loop), runs the transaction again where it
// may.
var ErrWouldWait = errors.New("a shard of the transaction is held by a script")

// lockNoWait locks the shard, or returns ErrWouldWait if it is held and
// more scripts than own (the caller's: 1 for a script's transaction, 0
// otherwise) count on it.
func (sh *shard) lockNoWait(own int32) error {
	if sh.mu.TryLock() {
		return nil
	}
	if sh.scripts.Load() > own {
		return ErrWouldWait
	}
	sh.mu.Lock() // another command's microsecond
	return nil
}

// lockCmd locks the shard for a client's command, or returns ErrBusy if a
// script that holds it has run past its time limit.
func (sh *shard) lockCmd() error {
	if sh.mu.TryLock() {
		return nil
	}
	if sh.scripts.Load() == 0 {
		sh.mu.Lock() // another command's microsecond
		return nil
	}
	return sh.awaitScript()
}

// awaitScript polls the shard, which a script holds or is about to, until
// it is free (locking it) or the script turns busy.
func (sh *shard) awaitScript() error {
	for d := time.Microsecond; ; d = min(2*d, time.Millisecond) {
		if sh.mu.TryLock() {
			return nil
		}
		if sh.busy.Load() {
			return ErrBusy
		}
		if sh.scripts.Load() == 0 {
			sh.mu.Lock()
			return nil
		}
		time.Sleep(d)
	}
}

// lockShards locks the shards the transaction holds, in index order, as
// a client's command does (lockCmd): a shard held by a busy script makes
// it unlock what it took and return ErrBusy, whether the transaction is a
// command's or another script's. The index order keeps two transactions
// from waiting for each other.
//
// With noWait (TxPlan.NoWait) a shard held by a script makes it unlock
// what it took and return ErrWouldWait at once (lockNoWait; own as there).
func (tx *Tx) lockShards(noWait bool, own int32) error {
	s := tx.s
	for i := tx.nextHeld(0); i < len(s.shards); i = tx.nextHeld(i + 1) {
		var err error
		if sh := &s.shards[i]; noWait {
			err = sh.lockNoWait(own)
		} else {
			err = sh.lockCmd()
		}
		if err != nil {
			tx.unlockShards(i)
			return err
		}
	}
	return nil
}

// unlockShards unlocks the held shards below end.
func (tx *Tx) unlockShards(end int) {
	for i := tx.nextHeld(0); i < end; i = tx.nextHeld(i + 1) {
		tx.s.shards[i].mu.Unlock()
	}
}

// SetBusy marks the shards a script's transaction holds as busy (the
// script has run past its time limit: commands that would wait for them
// get ErrBusy), or no longer busy. Safe to call from any goroutine while
// the transaction runs.
func (tx *Tx) SetBusy(busy bool) {
	for i := tx.nextHeld(0); i < len(tx.s.shards); i = tx.nextHeld(i + 1) {
		tx.s.shards[i].busy.Store(busy)
	}
}
