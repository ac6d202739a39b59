package shards

import (
	"errors"
	"fmt"
	"sync"

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

// entryOverhead estimates the bytes a key costs beyond its name: the entry,
// the string header, the map slot and pointer.
const entryOverhead = 96

// entry is one key's state.
type entry struct {
	algo    engine.Algo
	expires int64 // ns; the state may be dropped from then on
	st      engine.State
}

// shard is one lock stripe. The padding keeps two shards' mutexes off the
// same cache line.
type shard struct {
	mu    sync.Mutex
	m     map[string]*entry
	clock int64 // the latest time seen, ns
	bytes int64 // estimated memory of the keys in m
	_     [32]byte
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
// with mu held.
func (sh *shard) get(key []byte, now int64) *entry {
	e := sh.m[string(key)]
	if e != nil && e.expires <= now {
		sh.drop(string(key), e)
		return nil
	}
	return e
}

func (sh *shard) drop(key string, e *entry) {
	delete(sh.m, key)
	sh.bytes -= entrySize(len(key), e)
}

func entrySize(keyLen int, e *entry) int64 {
	n := int64(entryOverhead + keyLen)
	if e.st.Log != nil {
		n += int64(e.st.Log.Cap()) * 16
	}
	return n
}

// Store is the key state of one node. All methods are safe for concurrent
// use.
type Store struct {
	shards []shard
	mask   uint64
	rules  ruleTable // see rules.go
}

// DefaultShards is the shard count New uses for n <= 0.
const DefaultShards = 256

// New returns an empty Store with n shards, rounded up to a power of two.
func New(n int) *Store {
	if n <= 0 {
		n = DefaultShards
	}
	size := 1
	for size < n {
		size <<= 1
	}
	s := &Store{shards: make([]shard, size), mask: uint64(size - 1)}
	for i := range s.shards {
		s.shards[i].m = make(map[string]*entry)
	}
	return s
}

func (s *Store) shardFor(key []byte) *shard {
	return &s.shards[xxhash.Sum64(key)&s.mask]
}

// Check charges cost against key with algorithm a and parameters p at time
// now. The caller validates p and cost. It returns a *WrongTypeError if the
// key holds another algorithm's state. It does not allocate unless the key
// is new or a log grows.
func (s *Store) Check(key []byte, a engine.Algo, p engine.Params, cost, now int64) (engine.Result, error) {
	sh := s.shardFor(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now = sh.tick(now)
	e := sh.get(key, now)
	if e != nil && e.algo != a {
		return engine.Result{}, &WrongTypeError{Held: e.algo, Want: a}
	}
	if e == nil {
		var st engine.State
		r := engine.Check(a, &st, p, cost, now)
		if exp := engine.ExpiresAt(a, &st, p); exp > now {
			sh.insert(key, &entry{algo: a, expires: exp, st: st})
		}
		return r, nil
	}
	size := entrySize(len(key), e)
	r := engine.Check(a, &e.st, p, cost, now)
	sh.update(key, e, size, engine.ExpiresAt(a, &e.st, p), now)
	return r, nil
}

func (sh *shard) insert(key []byte, e *entry) {
	k := string(key)
	sh.m[k] = e
	sh.bytes += entrySize(len(k), e)
}

// update records e's new expiry and memory (size is e's size before the
// change), dropping e if it is now indistinguishable from a fresh key.
func (sh *shard) update(key []byte, e *entry, size, exp, now int64) {
	if exp <= now {
		delete(sh.m, string(key))
		sh.bytes -= size
		return
	}
	e.expires = exp
	sh.bytes += entrySize(len(key), e) - size
}

// Throttle runs CL.THROTTLE on key (GCRA state) at time now; see
// engine.CellThrottle.
func (s *Store) Throttle(key []byte, maxBurst, count, period, quantity, now int64) (engine.CellResult, error) {
	sh := s.shardFor(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now = sh.tick(now)
	e := sh.get(key, now)
	if e != nil && e.algo != engine.GCRA {
		return engine.CellResult{}, &WrongTypeError{Held: e.algo, Want: engine.GCRA}
	}
	var st engine.State
	if e != nil {
		st = e.st
	}
	res, err := engine.CellThrottle(&st, maxBurst, count, period, quantity, now)
	if err != nil {
		return res, err
	}
	switch {
	case e == nil && st.T > now:
		sh.insert(key, &entry{algo: engine.GCRA, expires: st.T, st: st})
	case e != nil:
		e.st = st
		sh.update(key, e, entrySize(len(key), e), st.T, now)
	}
	return res, nil
}

// Reset forgets key's state and reports whether it held any. The error is
// always nil; it is there for callers' interfaces that a cluster node, which
// can fail, also satisfies.
func (s *Store) Reset(key []byte, now int64) (bool, error) {
	sh := s.shardFor(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now = sh.tick(now)
	e := sh.get(key, now)
	if e == nil {
		return false, nil
	}
	sh.drop(string(key), e)
	return true, nil
}

// Len returns the number of keys held, including expired keys that have not
// been swept yet.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// MemoryBytes returns an estimate of the memory the keys take: names,
// entries, map slots and log entries.
func (s *Store) MemoryBytes() int64 {
	var n int64
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.bytes
		sh.mu.Unlock()
	}
	return n
}

// Flush drops every key. The error is always nil (see Reset).
func (s *Store) Flush() error {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.m = make(map[string]*entry)
		sh.bytes = 0
		sh.mu.Unlock()
	}
	return nil
}

// Shards returns the number of shards.
func (s *Store) Shards() int { return len(s.shards) }
