package shards

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"github.com/rlserver/rlserver/engine"
)

// ErrWrongType is returned (wrapped in a *WrongTypeError) when a key is
// checked with an algorithm other than the one its state holds.
var ErrWrongType = errors.New("WRONGTYPE Operation against a key holding the wrong kind of value")

// WrongTypeError says which algorithm a key holds and which was asked for.
type WrongTypeError struct {
	Held, Want engine.Algo
}

// Error returns the Redis-style WRONGTYPE message with both algorithm names.
func (e *WrongTypeError) Error() string {
	return fmt.Sprintf("%s: the key holds '%s' state, not '%s' (RL.RESET it or use another key)",
		ErrWrongType, e.Held, e.Want)
}

// Unwrap makes errors.Is(err, ErrWrongType) true.
func (e *WrongTypeError) Unwrap() error { return ErrWrongType }

// entryOverhead is the least a key costs beyond its name: its index slot
// and the length, algorithm and time fields of its record (see table).
const entryOverhead = slotBytes + 11

// entry is one key's state, decoded from its record. Entries are values:
// the record in the shard's table is the state, and a changed entry is
// written back with update.
type entry struct {
	algo    engine.Algo
	expires int64 // ns; the state may be dropped from then on
	st      engine.State
	dirty   bool   // listed in the shard's journal since it was last collected
	slot    int    // the key's index slot, set by get, for update and drop
	size    int    // the length of its record, set by get
	spilled bool   // log: st.Log is a ring of the table's rings, not inline
	ring    uint32 // log, spilled: the index of st.Log in the table's rings
	ringCap int32  // log, spilled: the ring capacity its record accounts for
}

// shard is one lock stripe. The padding keeps two shards' mutexes off the
// same cache line.
type shard struct {
	mu      sync.Mutex
	tab     table
	clock   int64       // the latest time seen, ns
	scratch entry       // returned by get
	journal bool        // record changes (see journal.go)
	note    *changeNote // the Store's, set with journal
	jbuf    []byte      // eager records since the last collection
	jbase   int64       // the time jbuf's relative records are relative to
	based   bool        // jbuf holds jbase's record
	nrec    int         // records in jbuf
	lazy    bool        // jbuf is full: record by listing keys
	jkeys   []byte      // the keys listed since the last collection
	// jepoch counts the collections; a value journaled as its state since
	// the last one has stated == jepoch+1 (see noteValueState).
	jepoch  uint32
	evicted int64   // keys evicted (see evict)
	lim     *limits // the Store's memory bound (see room)
	rng     uint64  // xorshift state for choosing victims
	hot     hotSketch
	// scripts counts the script transactions holding or about to hold
	// the shard, busy says one has run past its time limit (busy.go).
	scripts atomic.Int32
	busy    atomic.Bool
	// vals holds the keys that hold Redis values (see values.go);
	// valBytes is the memory they are accounted.
	vals     map[string]*valEntry
	valBytes int64
}

// tick returns max(now, latest time seen) and records it. Call with mu held.
func (sh *shard) tick(now int64) int64 {
	if now < sh.clock {
		return sh.clock
	}
	sh.clock = now
	return now
}

// get returns the live entry for key, dropping it if it has expired. Call
// with mu held. The entry is the shard's scratch copy of the key's state,
// and a short log's entries are in the table's scratch ring: both stay
// valid until the next get or fresh state on this shard and until the
// shard's keys change; after changing it, write it back with update (or
// drop it) before the next get.
func (sh *shard) get(key []byte, now int64) *entry {
	return sh.getTag(key, tagOf(xxhash.Sum64(key)), now)
}

func (sh *shard) getTag(key []byte, tag uint32, now int64) *entry {
	e := sh.lookup(key, tag)
	if e != nil && e.expires <= now {
		sh.drop(e)
		return nil
	}
	return e
}

// lookup returns the key's entry, expired or not, as get does. Call with
// mu held.
func (sh *shard) lookup(key []byte, tag uint32) *entry {
	i := sh.tab.find(key, tag)
	if i < 0 {
		return nil
	}
	e := &sh.scratch
	sh.tab.decode(i, e)
	return e
}

// freshState returns the state of a fresh key, keeping st's log ring (the
// scratch ring or the key's own), emptied, so that reusing an expired log
// key does not allocate.
func freshState(st engine.State) engine.State {
	if st.Log == nil {
		return engine.State{}
	}
	st.Log.Reset()
	return engine.State{Log: st.Log}
}

// drop deletes the key of e, an entry returned by get. Call with mu held.
func (sh *shard) drop(e *entry) {
	sh.tab.remove(e.slot)
}

// Store is the key state of one node. All methods are safe for concurrent
// use.
type Store struct {
	shards []shard
	mask   uint64
	txs    sync.Pool // *Tx, reused by Transact
	rules  ruleTable // see rules.go
	limits limits    // see evict.go

	// The journal (see journal.go): jmu serialises collections with
	// Flush, which sets flushed.
	journal bool
	jmu     sync.Mutex
	flushed bool
	note    changeNote // OnChange
}

// DefaultMaxKeyBytes is the longest key accepted by default (the server's
// --max-key-bytes): the RESP server, the HTTP API and the Envoy service
// refuse a longer one before it reaches a Store.
const DefaultMaxKeyBytes = 1024

// DefaultShards is the shard count New uses for n <= 0.
const DefaultShards = 256

// New returns an empty Store with n shards, rounded up to a power of two,
// and no memory bound.
func New(n int) *Store { return NewStore(Options{Shards: n}) }

// NewStore returns an empty Store configured by o.
func NewStore(o Options) *Store {
	n := o.Shards
	if n <= 0 {
		n = DefaultShards
	}
	size, shift := 1, uint(0)
	for size < n {
		size <<= 1
		shift++
	}
	s := &Store{shards: make([]shard, size), mask: uint64(size - 1),
		limits: limits{max: o.MaxMemory, policy: o.Policy, other: o.Other, held: o.Held, shift: shift, refuse: o.Refuse}}
	s.rules.blocks.max = o.MaxBlocks
	s.limits.blocks = &s.rules.blocks.bytes
	for i := range s.shards {
		s.shards[i].rng = uint64(i+1) * 0x9e3779b97f4a7c15
		s.shards[i].lim = &s.limits
		if !o.NoHotKeys {
			s.shards[i].hot.init(size)
		}
	}
	return s
}

func (s *Store) shardFor(key []byte) *shard {
	return &s.shards[xxhash.Sum64(key)&s.mask]
}

// Check charges cost against key with algorithm a and parameters p at time
// now. The caller validates p and cost. It returns a *WrongTypeError if the
// key holds another algorithm's state. A check of cost 0 (RL.PEEK) changes
// nothing, whatever its parameters (see peek). A new key may first evict
// others, or be refused with ErrOOM, under Options.MaxMemory (see room).
// It does not allocate in steady state: only a new key, to grow its
// shard's pages or index, and a log that has spilled to a ring (see
// inline.go), to grow it.
func (s *Store) Check(key []byte, a engine.Algo, p engine.Params, cost, now int64) (engine.Result, error) {
	h := xxhash.Sum64(key)
	sh := &s.shards[h&s.mask]
	if err := sh.lockCmd(); err != nil {
		return engine.Result{}, err
	}
	defer sh.mu.Unlock()
	return sh.check(key, h, a, p, cost, now)
}

// check is Check on the key's shard, whose lock the caller holds; h is
// the key's hash. A check that charges is counted in the hot-key sketch.
func (sh *shard) check(key []byte, h uint64, a engine.Algo, p engine.Params, cost, now int64) (engine.Result, error) {
	r, err := sh.checkState(key, h, a, p, cost, now)
	if err == nil && cost > 0 {
		sh.hot.record(key, h, !r.Allowed, sh.clock)
	}
	return r, err
}

// checkState is check without the sketch.
func (sh *shard) checkState(key []byte, h uint64, a engine.Algo, p engine.Params, cost, now int64) (engine.Result, error) {
	now = sh.tick(now)
	e := sh.lookup(key, tagOf(h))
	if cost == 0 {
		if e == nil {
			if err := sh.valueError(key, a, now); err != nil {
				return engine.Result{}, err
			}
		}
		return peek(e, a, p, now)
	}
	if err := sh.lim.refused(); err != nil {
		return engine.Result{}, err
	}
	expired := e != nil && e.expires <= now
	if expired {
		// Expired state is a fresh key: another algorithm may take the
		// key; the same algorithm reuses its record in place instead of
		// a removal and an insertion.
		if e.algo != a {
			sh.drop(e)
			e = nil
		} else {
			e.st = freshState(e.st)
		}
	}
	if e == nil {
		if err := sh.valueError(key, a, now); err != nil {
			return engine.Result{}, err
		}
		if err := sh.room(); err != nil {
			return engine.Result{}, err
		}
		st := sh.tab.fresh(a)
		r := engine.Check(a, &st, p, cost, now)
		if exp := engine.ExpiresAt(a, &st, p); exp > now {
			sh.insertTag(key, tagOf(h), &entry{algo: a, expires: exp, st: st})
		}
		return r, nil
	}
	if e.algo != a {
		return engine.Result{}, &WrongTypeError{Held: e.algo, Want: a}
	}
	r := engine.Check(a, &e.st, p, cost, now)
	exp := engine.ExpiresAt(a, &e.st, p)
	if expired && exp <= now {
		sh.drop(e) // expired state that stays fresh: no change to list
		return r, nil
	}
	sh.update(key, e, exp, now)
	return r, nil
}

// peek answers a check of cost 0 on e, the key's entry (nil if it has
// none), without changing the key: a peek with parameters other than the
// ones its state was written with must neither rewrite nor drop that
// state. Expired state reads as a fresh key and is left to the sweep.
func peek(e *entry, a engine.Algo, p engine.Params, now int64) (engine.Result, error) {
	var st engine.State
	if e != nil && e.expires > now {
		if e.algo != a {
			return engine.Result{}, &WrongTypeError{Held: e.algo, Want: a}
		}
		st = e.st
	}
	return engine.Peek(a, &st, p, now), nil
}

// insert stores e as the state of key, which must have no live state (get
// returned nil). Call with mu held.
func (sh *shard) insert(key []byte, e *entry) {
	sh.insertTag(key, tagOf(xxhash.Sum64(key)), e)
}

// insertTag is insert for a key whose tag the caller has.
func (sh *shard) insertTag(key []byte, tag uint32, e *entry) {
	sh.noteSet(key, e)
	sh.tab.add(key, tag, e)
}

// update writes back e, an entry returned by get and changed since, with
// its new expiry, dropping it if it is now indistinguishable from a fresh
// key. Call with mu held.
func (sh *shard) update(key []byte, e *entry, exp, now int64) {
	if exp <= now {
		sh.remove(key, e)
		return
	}
	e.expires = exp
	sh.noteSet(key, e)
	sh.tab.rewrite(e.slot, key, e)
}

// remove deletes the live key of e, an entry returned by get, as a change
// of its state (listed in the journal), where drop forgets state that has
// expired. Call with mu held.
func (sh *shard) remove(key []byte, e *entry) {
	sh.noteDelete(key, e)
	sh.drop(e)
}

// Throttle runs CL.THROTTLE on key (GCRA state) at time now; see
// engine.CellThrottle.
func (s *Store) Throttle(key []byte, maxBurst, count, period, quantity, now int64) (engine.CellResult, error) {
	h := xxhash.Sum64(key)
	sh := &s.shards[h&s.mask]
	if err := sh.lockCmd(); err != nil {
		return engine.CellResult{}, err
	}
	defer sh.mu.Unlock()
	return sh.throttle(key, h, maxBurst, count, period, quantity, now)
}

// throttle is Throttle on the key's shard, whose lock the caller holds; h
// is the key's hash. A throttle that charges is counted in the hot-key
// sketch.
func (sh *shard) throttle(key []byte, h uint64, maxBurst, count, period, quantity, now int64) (engine.CellResult, error) {
	res, err := sh.throttleState(key, maxBurst, count, period, quantity, now)
	if err == nil && quantity != 0 {
		sh.hot.record(key, h, res.Limited, sh.clock)
	}
	return res, err
}

// throttleState is throttle without the sketch.
func (sh *shard) throttleState(key []byte, maxBurst, count, period, quantity, now int64) (engine.CellResult, error) {
	if quantity != 0 {
		if err := sh.lim.refused(); err != nil {
			return engine.CellResult{}, err
		}
	}
	now = sh.tick(now)
	e := sh.get(key, now)
	if e != nil && e.algo != engine.GCRA {
		return engine.CellResult{}, &WrongTypeError{Held: e.algo, Want: engine.GCRA}
	}
	if e == nil {
		if err := sh.valueError(key, engine.GCRA, now); err != nil {
			return engine.CellResult{}, err
		}
	}
	var st engine.State
	if e != nil {
		st = e.st
	} else if quantity != 0 {
		if err := sh.room(); err != nil {
			return engine.CellResult{}, err
		}
	}
	res, err := engine.CellThrottle(&st, maxBurst, count, period, quantity, now)
	if err != nil {
		return res, err
	}
	switch {
	case quantity == 0: // a peek changes nothing
	case e == nil && st.T > now:
		sh.insert(key, &entry{algo: engine.GCRA, expires: st.T, st: st})
	case e != nil:
		e.st = st
		sh.update(key, e, st.T, now)
	}
	return res, nil
}

// Reset forgets key's state and reports whether it held any. The error is
// Options.Refuse's, if it refuses.
func (s *Store) Reset(key []byte, now int64) (bool, error) {
	if err := s.limits.refused(); err != nil {
		return false, err
	}
	sh := s.shardFor(key)
	if err := sh.lockCmd(); err != nil {
		return false, err
	}
	defer sh.mu.Unlock()
	return sh.reset(key, now), nil
}

// reset is Reset on the key's shard, whose lock the caller holds.
// A key holding a Redis value is deleted too, as DEL would.
func (sh *shard) reset(key []byte, now int64) bool {
	return sh.deleteKey(key, tagOf(xxhash.Sum64(key)), sh.tick(now))
}

// Len returns the number of keys held, Redis values included, and
// including expired keys that have not been swept yet. The shards of a
// script past its time limit are not counted.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		if sh.lockCmd() != nil {
			continue
		}
		n += sh.keys()
		sh.mu.Unlock()
	}
	return n
}

// MemoryBytes returns the memory the keys take: index slots, record pages
// (names and state, including free space not yet compacted), log rings
// and Redis values; and the blocks (rules.BlockBytes).
func (s *Store) MemoryBytes() int64 {
	n := s.rules.blocks.bytes.Load()
	for i := range s.shards {
		sh := &s.shards[i]
		if sh.lockCmd() != nil {
			continue // a busy script's: counted once it ends
		}
		n += sh.memory()
		sh.mu.Unlock()
	}
	return n
}

// Flush drops every key (not the rules). The error is Options.Refuse's,
// if it refuses. With the journal on, the next AppendChanges begins with a
// flush-all record, and a change made while Flush runs either is wiped
// by it or is collected after that record.
func (s *Store) Flush() error {
	if err := s.limits.refused(); err != nil {
		return err
	}
	s.jmu.Lock()
	defer s.jmu.Unlock()
	s.clearKeys()
	s.noteFlushed()
	return nil
}

// Shards returns the number of shards.
func (s *Store) Shards() int { return len(s.shards) }
