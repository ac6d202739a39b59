package shards

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"github.com/rlserver/rlserver/engine"
)

// The journal records the changes of key state since it was last
// collected, so that a replicated log can carry the resulting state of each
// key (see records.go) instead of the commands that produced it. It is off
// unless EnableJournal is called; then every change of a key's state made
// by Check, Throttle, Reset, CheckAll and Flush, every change of a Redis
// value (see values.go; always recorded lazily), and every rule change, is
// recorded, and AppendChanges collects the records.
//
// A shard records a change in one of two ways:
//
//   - eagerly: the key's new state, or its deletion, is encoded at once
//     into the shard's jbuf, while the record is in the CPU's caches. This
//     is the way of every algorithm but the log, and of every deletion;
//     it costs an encoding of about 40 bytes per change, where looking the
//     key up again at collection time costs two cache misses.
//   - lazily: the key is listed, once, in jkeys (uvarint length | key) the
//     first time it changes after a collection, and dirtyBit is set in the
//     algo byte of its record so that its later changes cost only that
//     test; the collection writes its state as it is then. This is the way
//     of the log, whose state grows with its entries, and of every change
//     of a shard whose jbuf has passed maxEager since the last collection,
//     so that the journal's memory stays bounded by the number of keys
//     when collections fall behind (a stalled disk).
//
// A shard's eager records are collected before its listed keys, and a
// shard goes from eager to lazy but never back until the next
// collection, so a key's latest change is always the one applied last. A
// listed key whose record has no dirtyBit (listed twice, collected
// already; or changed eagerly since) writes nothing; one that has no record
// writes a deletion.
//
// Dropping state that has expired (on access or by Sweep) is not recorded:
// a replica holds the same expiry and its copy has expired as well.
// Dropping state because a check left it indistinguishable from a fresh
// key is recorded, since the replica's copy may expire later.

// dirtyBit marks, in a record's algo byte, a key listed in its shard's
// journal since the last collection.
const dirtyBit = 0x80

// EnableJournal makes the Store list its changes for AppendChanges. Call it
// before the Store is used.
func (s *Store) EnableJournal() {
	s.journal = true
	s.rules.journal = true
	s.rules.note = &s.note
	for i := range s.shards {
		s.shards[i].journal = true
		s.shards[i].note = &s.note
	}
}

// OnChange sets fn to be called when the journal receives its first change
// since the last AppendChanges began, so that a collector can sleep while
// nothing changes instead of polling. fn is called with a shard's lock
// held: it must not block nor call back into the Store. A later call
// replaces fn; nil removes it.
func (s *Store) OnChange(fn func()) {
	if fn == nil {
		s.note.fn.Store(nil)
		return
	}
	s.note.fn.Store(&fn)
}

// changeNote tells a collector that the journal is no longer empty
// (OnChange): pending is set by the first change after AppendChanges
// cleared it, and only that change calls fn.
type changeNote struct {
	pending atomic.Bool
	fn      atomic.Pointer[func()]
}

// changed records that the journal received a change, calling fn if it is
// the first since the last collection began. Safe on a nil receiver.
func (c *changeNote) changed() {
	if c == nil || c.pending.Load() || c.pending.Swap(true) {
		return
	}
	if fn := c.fn.Load(); fn != nil {
		(*fn)()
	}
}

// noteFlushed records that every key was dropped (Flush, Tx.Flush): with
// the journal on, the next AppendChanges begins with a flush-all record,
// and OnChange's fn hears of it.
func (s *Store) noteFlushed() {
	s.flushed = s.journal
	if s.journal {
		s.note.changed()
	}
}

// empty reports whether the shard's journal holds nothing. Call with mu
// held.
func (sh *shard) empty() bool { return len(sh.jbuf) == 0 && len(sh.jkeys) == 0 }

// noteSet records that key now holds e (its state and expiry final),
// eagerly or lazily (marking e so that the record written next carries
// dirtyBit). Call it with mu held, before writing e (add or rewrite).
func (sh *shard) noteSet(key []byte, e *entry) {
	if !sh.journal {
		return
	}
	if sh.empty() {
		sh.note.changed()
	}
	if e.algo != engine.Log && !sh.lazy {
		if !sh.based {
			sh.jbase, sh.based = sh.clock, true
			sh.jbuf = appendBase(sh.jbuf, sh.jbase)
		}
		sh.jbuf = appendSetRel(sh.jbuf, key, e, sh.jbase)
		sh.nrec++
		sh.lazy = len(sh.jbuf) > maxEager
		return
	}
	if !e.dirty {
		e.dirty = true
		sh.jkeys = appendKey(sh.jkeys, key)
	}
}

// noteDelete records that key, whose entry e is about to be removed, is
// gone. Call it with mu held.
func (sh *shard) noteDelete(key []byte, e *entry) {
	if sh.journal && sh.empty() {
		sh.note.changed()
	}
	switch {
	case !sh.journal:
	case sh.lazy:
		if !e.dirty {
			sh.jkeys = appendKey(sh.jkeys, key)
		}
	default:
		sh.jbuf = appendDelete(sh.jbuf, key)
		sh.nrec++
		sh.lazy = len(sh.jbuf) > maxEager
	}
}

// maxEager bounds the eager records a shard holds between collections.
const maxEager = 64 << 10

func appendKey(dst, key []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	return append(dst, key...)
}

// AppendChanges appends to dst the records of every change made since the
// previous call — a flush-all record first if Flush ran, then the rule
// changes in the order they were made, then the latest state (or the
// deletion) of each changed key, shard by shard — and returns the extended
// slice and the number of records appended. It locks one shard at a time,
// so checks go on meanwhile; a change made while it runs is in this call's
// records or the next call's. Calls must not overlap (one flusher).
func (s *Store) AppendChanges(dst []byte) ([]byte, int) {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	// Before collecting: a change noted from here on is either collected
	// below or calls OnChange's fn again.
	s.note.pending.Store(false)
	n := 0
	if s.flushed {
		dst = append(dst, recFlushAll)
		s.flushed = false
		n++
	}
	dst, k := s.rules.takeChanges(dst)
	n += k
	for i := range s.shards {
		dst, k = s.shards[i].collect(dst)
		n += k
	}
	return dst, n
}

// collect appends the shard's eager records, then those of its listed
// keys, and empties both.
func (sh *shard) collect(dst []byte) ([]byte, int) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	dst = append(dst, sh.jbuf...)
	n := sh.nrec
	sh.jbuf, sh.nrec, sh.lazy, sh.based = trim(sh.jbuf), 0, false, false
	sh.jepoch++
	for b := sh.jkeys; len(b) > 0; {
		l, m := uvarint(b)
		key := b[m : m+int(l)]
		b = b[m+int(l):]
		i := sh.tab.find(key, tagOf(xxhash.Sum64(key)))
		if i < 0 {
			if ve := sh.vals[string(key)]; ve != nil {
				if ve.dirty { // else listed twice; collected above
					dst = appendValSet(dst, key, ve)
					ve.dirty = false
					n++
				}
				continue
			}
			dst = appendDelete(dst, key)
			n++
			continue
		}
		e := &sh.scratch
		sh.tab.decode(i, e)
		if !e.dirty {
			continue // listed twice; collected above
		}
		dst = appendSet(dst, key, e)
		sh.tab.clearDirty(i)
		n++
	}
	sh.jkeys = trim(sh.jkeys)
	return dst, n
}

// trim empties a journal buffer for reuse, releasing it if a burst grew
// it past twice maxEager.
func trim(b []byte) []byte {
	if cap(b) > 2*maxEager {
		return nil
	}
	return b[:0]
}

// clearDirty removes dirtyBit from the record of slot i.
func (t *table) clearDirty(i int) {
	rec := t.record(uint32(t.slots[i]))
	_, pos := recKey(rec)
	rec[pos] &^= dirtyBit
}

// Pending reports the number of changes recorded and not yet collected
// (a key listed twice counts twice), for tests and INFO.
func (s *Store) Pending() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.nrec
		for b := sh.jkeys; len(b) > 0; n++ {
			l, m := uvarint(b)
			b = b[m+int(l):]
		}
		sh.mu.Unlock()
	}
	return n
}
