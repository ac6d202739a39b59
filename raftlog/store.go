package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
)

// Store is the raft.LogStore and raft.StableStore of one Raft group, kept
// in a node's shared Pebble database under NamespaceLog and
// NamespaceStable with the group's id.
//
// A Store is safe for concurrent use. Every write is committed with
// pebble.Sync before the call returns. FirstIndex and LastIndex answer
// from bounds cached in memory, which equal the lowest and highest index
// stored once every write that moves them has returned. The Store does
// not own the database and has nothing to close.
type Store struct {
	db     *pebble.DB
	group  uint32
	write  *pebble.WriteOptions // pebble.Sync; crash tests swap in NoSync to show they catch it
	logLo  []byte               // first log key of the group (its prefix)
	logHi  []byte               // past the last log key of the group
	stable []byte               // stable-store prefix of the group

	// mu serializes the writes that move the bounds (StoreLogs and
	// DeleteRange) with their bound updates, so the cache follows the
	// commits in order. Readers load bounds without it.
	mu     sync.Mutex
	bounds atomic.Pointer[bounds] // never nil after New; replaced, never changed
	watch  SuffixWatcher          // set by Watch before use, or nil
	onSync func()                 // set by OnSync before use, or nil

	stats counters
	guard Guard // nil: none
}

// Guard is asked before each append whether the disk can take it (Space
// satisfies it; see SetGuard).
type Guard interface {
	// Allow returns an error, and the write is not made, if n more bytes
	// on disk would leave too little free space.
	Allow(n int64) error
}

// SetGuard makes StoreLogs ask g before each append, with twice the
// batch's size (the WAL now, a flushed table later), and fail with g's
// error instead of committing, so that Pebble never meets a full disk
// in its WAL. Call it before the Store is used.
func (s *Store) SetGuard(g Guard) { s.guard = g }

// bounds are the lowest and highest index stored, if any. A bounds value
// is immutable, so a reader always sees a pair that was true together.
type bounds struct {
	first, last uint64
	some        bool // false: the log is empty, first and last are 0
}

// widen returns the bounds after storing entries lo to hi.
func (b *bounds) widen(lo, hi uint64) *bounds {
	if !b.some {
		return &bounds{first: lo, last: hi, some: true}
	}
	return &bounds{first: min(b.first, lo), last: max(b.last, hi), some: true}
}

// overlaps reports whether entries lo to hi may hold a stored entry.
func (b *bounds) overlaps(lo, hi uint64) bool {
	return b.some && lo <= hi && lo <= b.last && hi >= b.first
}

var (
	_ raft.LogStore    = (*Store)(nil)
	_ raft.StableStore = (*Store)(nil)
)

// New returns the Store of group in db, a database opened by OpenDB (or
// with options to the same effect). It reads the group's first and last
// log index once. Several Stores of different groups may share db; two
// Stores of the same group must not be used at once.
func New(db *pebble.DB, group uint32) (*Store, error) {
	lo, hi := NamespaceLog.Bounds(group)
	s := &Store{
		db:     db,
		group:  group,
		write:  pebble.Sync,
		logLo:  lo,
		logHi:  hi,
		stable: NamespaceStable.Prefix(group),
	}
	b, err := s.readBounds()
	if err != nil {
		return nil, err
	}
	s.bounds.Store(b)
	return s, nil
}

// FirstIndex returns the lowest index stored, or 0 if the log is empty.
// It reads a cached value and never fails.
func (s *Store) FirstIndex() (uint64, error) { return s.bounds.Load().first, nil }

// LastIndex returns the highest index stored, or 0 if the log is empty.
// It reads a cached value and never fails.
func (s *Store) LastIndex() (uint64, error) { return s.bounds.Load().last, nil }

// GetLog reads the entry at index into l. It returns raft.ErrLogNotFound
// itself (not wrapped: raft compares with ==) when no entry is stored at
// index, and an error wrapping ErrCorrupt when the stored entry cannot be
// decoded. l owns its memory afterwards; nothing refers to Pebble's.
func (s *Store) GetLog(index uint64, l *raft.Log) error {
	var kb [logKeyLen]byte
	v, closer, err := s.db.Get(appendLogKey(append(kb[:0], s.logLo...), index))
	if errors.Is(err, pebble.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return fmt.Errorf("raftlog: group %d: get log %d: %w", s.group, index, err)
	}
	err = decodeEntry(v, index, l)
	if cerr := closer.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("raftlog: group %d: get log %d: %w", s.group, index, cerr)
	}
	return err
}

// StoreLog stores one entry, as StoreLogs.
func (s *Store) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

// StoreLogs stores the entries in one batch committed with pebble.Sync:
// all of them or none; with a Guard that refuses, none (see SetGuard). An entry replaces any entry stored at its index;
// indexes need not follow the last one (raft leaves gaps after installing
// a snapshot). Index 0 is stored like any other, though raft starts at 1
// and FirstIndex cannot tell it from an empty log. The entries are not
// retained.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	start := time.Now()
	b := s.db.NewBatch()
	defer b.Close()
	lo, hi, size, err := s.fill(b, logs)
	if err != nil {
		return err
	}
	if s.guard != nil {
		if err := s.guard.Allow(2 * int64(b.Len())); err != nil {
			return fmt.Errorf("raftlog: group %d: store logs %d-%d: %w", s.group, lo, hi, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := b.Commit(s.write); err != nil {
		return fmt.Errorf("raftlog: group %d: store logs %d-%d: %w", s.group, lo, hi, err)
	}
	s.bounds.Store(s.bounds.Load().widen(lo, hi))
	s.stats.appended(len(logs), size, time.Since(start))
	s.synced()
	return nil
}

// fill adds the encoded entries to b and returns their lowest and highest
// index and their encoded size.
func (s *Store) fill(b *pebble.Batch, logs []*raft.Log) (lo, hi uint64, size int, err error) {
	var kb [logKeyLen]byte
	lo, hi = logs[0].Index, logs[0].Index
	for _, l := range logs {
		// Encoded straight into the batch: entries can be hundreds of
		// KB, and a copy of each costs as much as the batch's own.
		key := appendLogKey(append(kb[:0], s.logLo...), l.Index)
		n := entryLen(l)
		op := b.SetDeferred(len(key), n)
		copy(op.Key, key)
		if v := appendEntry(op.Value[:0], l); len(v) != n || &v[0] != &op.Value[0] {
			return 0, 0, 0, fmt.Errorf("raftlog: group %d: log %d encoded to %d bytes, not %d", s.group, l.Index, len(v), n)
		}
		if err := op.Finish(); err != nil {
			return 0, 0, 0, fmt.Errorf("raftlog: group %d: batch log %d: %w", s.group, l.Index, err)
		}
		lo, hi, size = min(lo, l.Index), max(hi, l.Index), size+n
	}
	return lo, hi, size, nil
}

// SuffixWatcher hears of the deletions that lower a Store's last index
// (raft drops a follower's entries that conflict with its leader's), so
// that a record of the last index kept elsewhere can follow it down before
// the entries go. See Store.Watch.
type SuffixWatcher interface {
	// Lowering is called, with the group's writes held, before the
	// deletion is committed, with the index that will be the last (0 if
	// none is left); its error stops the deletion.
	Lowering(group uint32, last uint64) error
	// Lowered is called after the deletion, whether it succeeded or not,
	// once LastIndex tells the truth again.
	Lowered(group uint32)
}

// Watch makes DeleteRange tell w before it lowers the last index. Call it
// before the Store is used.
func (s *Store) Watch(w SuffixWatcher) { s.watch = w }

// OnSync makes the Store call fn after each synced commit that Stats
// counts in Syncs (an append, a range deletion, a stable-store write),
// so that a watcher can sleep while the log does not change. fn must not
// block. Call it before the Store is used.
func (s *Store) OnSync(fn func()) { s.onSync = fn }

// synced calls the OnSync hook, if any.
func (s *Store) synced() {
	if s.onSync != nil {
		s.onSync()
	}
}

// DeleteRange deletes the entries from lo to hi, both included, with one
// range deletion committed with pebble.Sync. Indexes with no entry are
// skipped; a range that holds no entry, or lo > hi, writes nothing.
// Afterwards FirstIndex and LastIndex are those of the entries left.
func (s *Store) DeleteRange(lo, hi uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bounds.Load()
	if !b.overlaps(lo, hi) {
		return nil
	}
	end := s.logHi // up to the last entry: also right for hi = MaxUint64
	if hi < b.last {
		end = appendLogKey(append([]byte(nil), s.logLo...), hi+1)
	} else if s.watch != nil {
		if err := s.lowering(lo); err != nil {
			return err
		}
		defer s.watch.Lowered(s.group)
	}
	start := appendLogKey(append([]byte(nil), s.logLo...), lo)
	if err := s.db.DeleteRange(start, end, s.write); err != nil {
		return fmt.Errorf("raftlog: group %d: delete logs %d-%d: %w", s.group, lo, hi, err)
	}
	s.stats.syncs.Add(1)
	s.synced()
	if lo > b.first && hi < b.last {
		return nil // a hole in the middle: the bounds stay
	}
	nb, err := s.readBounds()
	if err != nil {
		return err
	}
	s.bounds.Store(nb)
	return nil
}

// lowering tells the watcher that the entries from lo on are about to go,
// with the highest index that stays.
func (s *Store) lowering(lo uint64) error {
	var last uint64
	if lo > 0 {
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: s.logLo,
			UpperBound: appendLogKey(append([]byte(nil), s.logLo...), lo)})
		if err != nil {
			return fmt.Errorf("raftlog: group %d: read log bounds: %w", s.group, err)
		}
		if it.Last() {
			last, err = s.indexOf(it.Key())
		}
		if ierr := errors.Join(it.Error(), it.Close()); err == nil {
			err = ierr
		}
		if err != nil {
			return fmt.Errorf("raftlog: group %d: read log bounds: %w", s.group, err)
		}
	}
	return s.watch.Lowering(s.group, last)
}

// readBounds reads the lowest and highest index stored from the database.
func (s *Store) readBounds() (*bounds, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: s.logLo, UpperBound: s.logHi})
	if err != nil {
		return nil, fmt.Errorf("raftlog: group %d: read log bounds: %w", s.group, err)
	}
	b := &bounds{}
	if it.First() {
		b.some = true
		b.first, err = s.indexOf(it.Key())
		if err == nil && it.Last() {
			b.last, err = s.indexOf(it.Key())
		}
	}
	if ierr := errors.Join(it.Error(), it.Close()); err == nil && ierr != nil {
		err = fmt.Errorf("raftlog: group %d: read log bounds: %w", s.group, ierr)
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

// indexOf returns the index of a log key of the group.
func (s *Store) indexOf(key []byte) (uint64, error) {
	if len(key) != logKeyLen {
		return 0, fmt.Errorf("%w: group %d: log key %x", ErrCorrupt, s.group, key)
	}
	return binary.BigEndian.Uint64(key[PrefixLen:]), nil
}
