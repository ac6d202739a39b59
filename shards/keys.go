package shards

import (
	"strconv"

	"github.com/cespare/xxhash/v2"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/values"
)

// Keys is a transaction's keyspace as package values sees it (it
// implements values.Keyspace): the Redis values and, as keys of another
// kind, the limiter state of the shards the transaction holds, at one
// time. Get it from Tx.Keys; it is valid while the Tx is. A key whose
// shard the transaction does not hold must not be passed to its methods
// (Holds tells): commands name their keys up front, and a script's keys
// are checked before each call (see package script).
type Keys struct {
	tx  *Tx
	now int64
	eff effect // the command Exec runs (see effects.go)
	// last is the live value Lookup found last, in shard lastSh under the
	// key lastKey (a copy in lastBuf): a Lookup or a Put of the same key,
	// as a command's Lookup then Put and a script's commands on its key
	// are, skip finding the key again. Whatever may remove the entry
	// forgets it (Delete, a Put that deletes, an eviction's Writable,
	// Flush); the clock of a Keys does not move, so the entry stays live.
	last    *valEntry
	lastSh  *shard
	lastKey []byte
	lastBuf [64]byte
}

// remember makes ve, key's live value in sh, the one Lookup found last.
func (k *Keys) remember(key []byte, sh *shard, ve *valEntry) {
	if len(key) > len(k.lastBuf) {
		k.last, k.lastKey = nil, nil
		return
	}
	k.last, k.lastSh, k.lastKey = ve, sh, append(k.lastBuf[:0], key...)
}

// forget drops what remember kept.
func (k *Keys) forget() { k.last, k.lastKey = nil, nil }

// otherNames are the TYPE names of limiter state, by algorithm.
var otherNames = func() [engine.NumAlgos]string {
	var n [engine.NumAlgos]string
	for a := engine.Fixed; a <= engine.GCRA; a++ {
		n[a] = "rl-" + a.String()
	}
	return n
}()

// Keys returns the transaction's keyspace at now, or later: the latest
// clock among the shards it holds, which each then moves to (so that a
// command sees one time on all its keys). Now reports the time chosen.
func (tx *Tx) Keys(now int64) *Keys { return tx.KeysInto(new(Keys), now) }

// KeysInto is Keys, in k: it sets k to the transaction's keyspace at now
// (or later, as Keys) and returns k, so that a caller that keeps a Keys
// of its own need not allocate one per transaction.
func (tx *Tx) KeysInto(k *Keys, now int64) *Keys {
	n := len(tx.s.shards)
	for i := tx.nextHeld(0); i < n; i = tx.nextHeld(i + 1) {
		now = max(now, tx.s.shards[i].clock)
	}
	for i := tx.nextHeld(0); i < n; i = tx.nextHeld(i + 1) {
		tx.s.shards[i].tick(now)
	}
	*k = Keys{tx: tx, now: now}
	return k
}

// Now returns the time the keyspace runs at, ns since the epoch.
func (k *Keys) Now() int64 { return k.now }

// All reports whether the transaction holds every shard.
func (k *Keys) All() bool { return k.tx.all }

// Holds reports whether key's shard is held by the transaction, so that
// key may be used.
func (k *Keys) Holds(key []byte) bool {
	return k.tx.holds(xxhash.Sum64(key) & k.tx.s.mask)
}

// shard returns key's shard, which must be held, and the key's hash.
func (k *Keys) shard(key []byte) (*shard, uint64) {
	h := xxhash.Sum64(key)
	if !k.tx.holds(h & k.tx.s.mask) {
		panic("shards: Keys used with the key " + strconv.Quote(string(key)) + " whose shard is not held")
	}
	return &k.tx.s.shards[h&k.tx.s.mask], h
}

// Lookup returns what key holds (see values.Keyspace).
func (k *Keys) Lookup(key []byte) values.Entry {
	if ve := k.last; ve != nil && string(key) == string(k.lastKey) {
		return values.Entry{Value: ve.v, Expires: ve.exp}
	}
	sh, h := k.shard(key)
	if ve := sh.value(key, k.now); ve != nil {
		k.remember(key, sh, ve)
		return values.Entry{Value: ve.v, Expires: ve.exp}
	}
	if e := sh.getTag(key, tagOf(h), k.now); e != nil {
		return values.Entry{Other: otherNames[e.algo], Expires: e.expires}
	}
	return values.Entry{}
}

// Put stores v with expiry exp as key's value (see values.Keyspace).
func (k *Keys) Put(key []byte, v *values.Value, exp int64) {
	if ve := k.last; ve != nil && string(key) == string(k.lastKey) && (exp == 0 || exp > k.now) {
		k.lastSh.replaceValue(key, ve, v, exp, k.now, &k.eff) // a value, so no limiter state to remove
		return
	}
	k.forget()
	sh, h := k.shard(key)
	sh.putValue(key, tagOf(h), v, exp, k.now, &k.eff)
}

// Exec runs a command of package values on the keyspace at its time
// (values.Exec), and has the journal record the change it makes to its one
// key as the command itself rather than the key's whole value (see
// effects.go). Commands should run through it, not values.Exec.
func (k *Keys) Exec(resp int, args [][]byte) values.Reply {
	cmd := values.Lookup(args[0])
	if cmd == nil {
		return values.Exec(k, k.now, resp, args) // its error
	}
	return k.ExecCommand(cmd, resp, args)
}

// ExecCommand is Exec for a command looked up already: cmd is
// values.Lookup(args[0]). Its changes are journaled as Exec's are.
func (k *Keys) ExecCommand(cmd *values.Command, resp int, args [][]byte) values.Reply {
	k.eff.set(cmd, args)
	r := values.ExecCommand(k, cmd, k.now, resp, args)
	k.eff.clear()
	return r
}

// Delete removes key whatever it holds (see values.Keyspace).
func (k *Keys) Delete(key []byte) bool {
	k.forget()
	sh, h := k.shard(key)
	return sh.deleteKey(key, tagOf(h), k.now)
}

// Writable returns the Store's refusal (Options.Refuse) and, with grow,
// ErrOOM when a held shard is over its share of MaxMemory and cannot
// evict (see room).
func (k *Keys) Writable(grow bool) error {
	if grow && k.tx.s.limits.max > 0 {
		k.forget() // room may evict
	}
	if err := k.tx.s.limits.refused(); err != nil {
		return err
	}
	if !grow || k.tx.s.limits.max <= 0 {
		return nil
	}
	for i := k.tx.nextHeld(0); i < len(k.tx.s.shards); i = k.tx.nextHeld(i + 1) {
		if err := k.tx.s.shards[i].room(); err != nil {
			return err
		}
	}
	return nil
}

// Scan visits the held shards from the one cursor names, each whole (so
// that a key live during the whole iteration is visited once), until count
// keys were visited or fn returns false; the cursor it returns is the next
// shard's index, 0 after the last.
func (k *Keys) Scan(cursor uint64, count int, fn func(key []byte, kind string) bool) uint64 {
	shards := k.tx.s.shards
	seen := 0
	for i := cursor; i < uint64(len(shards)); i++ {
		if !k.tx.holds(i) {
			continue
		}
		if !k.scanShard(&shards[i], fn, &seen) {
			return i + 1
		}
		if seen >= count && i+1 < uint64(len(shards)) {
			return i + 1
		}
	}
	return 0
}

// scanShard calls fn with every live key of sh, counting them in seen, and
// reports whether fn wanted more.
func (k *Keys) scanShard(sh *shard, fn func(key []byte, kind string) bool, seen *int) bool {
	more := true
	sh.forEach(k.now, func(key []byte, e *entry) {
		if more {
			*seen++
			more = fn(key, otherNames[e.algo])
		}
	})
	var kb []byte
	sh.forEachValue(k.now, func(key string, ve *valEntry) {
		if more {
			*seen++
			kb = append(kb[:0], key...)
			more = fn(kb, ve.v.Kind().String())
		}
	})
	return more
}

// Len returns the number of keys of the held shards.
func (k *Keys) Len() int {
	n := 0
	for i := range k.tx.s.shards {
		if k.tx.holds(uint64(i)) {
			n += k.tx.s.shards[i].keys()
		}
	}
	return n
}

// Flush removes every key: it needs a transaction that holds every
// shard, and does nothing otherwise.
func (k *Keys) Flush() {
	k.forget()
	_ = k.tx.Flush()
}

// Hot counts a command on key in the hot-key sketch (RL.HOTKEYS), as a
// check is counted.
func (k *Keys) Hot(key []byte) {
	sh, h := k.shard(key)
	sh.hot.record(key, h, false, k.now)
}
