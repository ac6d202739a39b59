package shards

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cespare/xxhash/v2"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/values"
)

// Records carry the Store's state out of it and back in: AppendChanges
// (the journal) and AppendShard/AppendRules (snapshots) write them,
// ApplyRecords reads them. A record is a kind byte, then
//
//	recSet:      uvarint key length | key | varint expires-T | engine state
//	recDelete:   uvarint key length | key
//	recFlushAll: nothing (every key is forgotten; rules stay)
//	recRuleSet:  uvarint length | the rule as JSON (rules.EncodeJSON)
//	recRuleDel:  uvarint length | rule id
//	recBase:     varint time (ns): the base of the recSetRel records after
//	             it, until the next recBase
//	recBlockSet: uvarint length | the block as JSON (rules.EncodeBlock)
//	recBlockDel: uvarint length | identifier ("type=value")
//	recSetRel:   uvarint key length | key | algo | varint T-base
//	             | varint expires-T | varint N | varint P
//	recValSet:   uvarint key length | key | varint expires (ns since the
//	             epoch, 0 for never) | the value (values.AppendValue)
//	recValCmd:   a command of package values that changed one key, replayed
//	             (see effects.go)
//
// recSetRel is recSet for the algorithms other than the log, with T taken
// from the base: the journal's records are written while checks run, when
// T is within milliseconds of the shard's clock, so that it takes 3 or 4
// bytes rather than 9 (a check's record is about 15% smaller). recBase
// does not count as a record: it changes no state.
// where the engine state is engine.AppendState's stable encoding and T is
// the state's T field. A record says what a key's state is, not how it got
// there, so applying the same records in the same order gives the same
// state on any node, whatever its clock, its shard count or its table
// layout, and applying a record twice changes nothing.
const (
	recSet      = 1
	recDelete   = 2
	recFlushAll = 3
	recRuleSet  = 4
	recRuleDel  = 5
	recBase     = 6
	recSetRel   = 7
	recBlockSet = 8
	recBlockDel = 9
	recValSet   = 10
)

// ErrCorruptRecord is returned by ApplyRecords for input it cannot decode.
var ErrCorruptRecord = errors.New("shards: corrupt state record")

func appendSet(dst, key []byte, e *entry) []byte {
	dst = append(dst, recSet)
	dst = appendKey(dst, key)
	dst = binary.AppendVarint(dst, e.expires-e.st.T)
	return engine.AppendState(dst, e.algo, &e.st)
}

func appendBase(dst []byte, base int64) []byte {
	return binary.AppendVarint(append(dst, recBase), base)
}

// appendSetRel appends a recSetRel record; e is not a log's entry.
func appendSetRel(dst, key []byte, e *entry, base int64) []byte {
	dst = append(dst, recSetRel)
	dst = appendKey(dst, key)
	dst = append(dst, byte(e.algo))
	dst = binary.AppendVarint(dst, e.st.T-base)
	dst = binary.AppendVarint(dst, e.expires-e.st.T)
	dst = binary.AppendVarint(dst, e.st.N)
	return binary.AppendVarint(dst, e.st.P)
}

// appendValSet appends a recValSet record of key's value ve.
func appendValSet(dst, key []byte, ve *valEntry) []byte {
	dst = appendKey(append(dst, recValSet), key)
	dst = binary.AppendVarint(dst, ve.exp)
	return values.AppendValue(dst, ve.v)
}

func appendDelete(dst, key []byte) []byte {
	return appendKey(append(dst, recDelete), key)
}

// ApplyRecords applies the records in b in order, as of now, the time the
// node that wrote them stamped them with (never the local clock): a key
// whose state has expired at now is deleted rather than stored. It does
// not list anything in the journal. It returns the number of records
// applied and, for input it cannot decode, an error wrapping
// ErrCorruptRecord that says where; the records before it are applied.
//
// Consecutive rule records (a rules.Change, a snapshot's rules) are
// applied as one change of the rule set, as they were made: readers never
// see a part of them, and n of them cost O(n log n), not O(n²).
func (s *Store) ApplyRecords(b []byte, now int64) (int, error) {
	n := 0
	var base int64
	var run ruleRun
	defer run.apply(s) // the records before a corrupt one are applied
	for off := 0; off < len(b); {
		switch b[off] {
		case recBase:
			v, m := binary.Varint(b[off+1:])
			if m <= 0 {
				return n, fmt.Errorf("%w: base at byte %d", ErrCorruptRecord, off)
			}
			base, off = v, off+1+m
			continue
		case recRuleSet, recRuleDel:
			m, err := run.add(b[off:])
			if err != nil {
				return n, fmt.Errorf("%w: record %d at byte %d: %v", ErrCorruptRecord, n, off, err)
			}
			off += m
			n++
			continue
		}
		run.apply(s)
		m, err := s.applyRecord(b[off:], now, base)
		if err != nil {
			return n, fmt.Errorf("%w: record %d at byte %d: %v", ErrCorruptRecord, n, off, err)
		}
		off += m
		n++
	}
	return n, nil
}

// ruleRun gathers consecutive rule records for ApplyRecords: each id's
// last record wins, as if they were applied one by one.
type ruleRun struct {
	last  map[string]*rules.Compiled // nil: deleted
	order []string                   // ids in order of first mention
}

// add decodes the rule record at the front of b into the run and returns
// its length.
func (r *ruleRun) add(b []byte) (int, error) {
	v, off, err := field(b, 1)
	if err != nil {
		return 0, err
	}
	var id string
	var c *rules.Compiled
	if b[0] == recRuleDel {
		id = string(v)
	} else {
		rule, err := rules.DecodeStored(v)
		if err == nil {
			c, err = rules.Compile(rule, 0)
		}
		if err != nil {
			return 0, err
		}
		id = rule.ID
	}
	if r.last == nil {
		r.last = map[string]*rules.Compiled{}
	}
	if _, ok := r.last[id]; !ok {
		r.order = append(r.order, id)
	}
	r.last[id] = c
	return off, nil
}

// apply applies the run to s's rules as one change and empties it.
func (r *ruleRun) apply(s *Store) {
	if len(r.order) == 0 {
		return
	}
	var set []*rules.Compiled
	var del []string
	for _, id := range r.order {
		if c := r.last[id]; c != nil {
			set = append(set, c)
		} else {
			del = append(del, id)
		}
	}
	s.rules.apply(set, del, false)
	r.last, r.order = nil, r.order[:0]
}

// applyRecord applies the record at the front of b, whose recSetRel
// records are relative to base, and returns its length.
func (s *Store) applyRecord(b []byte, now, base int64) (int, error) {
	switch b[0] {
	case recSetRel:
		return s.applySetRel(b, now, base)
	case recValSet:
		return s.applyValSet(b, now)
	case recValCmd:
		return s.applyValCmd(b, base)
	case recFlushAll:
		s.clearKeys()
		return 1, nil
	case recSet, recDelete:
		key, off, err := field(b, 1)
		if err != nil {
			return 0, err
		}
		if b[0] == recDelete {
			s.applyDelete(key)
			return off, nil
		}
		dexp, m := binary.Varint(b[off:])
		if m <= 0 {
			return 0, errors.New("bad expiry")
		}
		a, st, k, err := engine.DecodeState(b[off+m:])
		if err != nil {
			return 0, err
		}
		s.applySet(key, st.T+dexp, a, st, now)
		return off + m + k, nil
	case recBlockSet, recBlockDel:
		v, off, err := field(b, 1)
		if err != nil {
			return 0, err
		}
		return off, s.applyBlock(b[0], v, now)
	}
	return 0, fmt.Errorf("unknown record kind %d", b[0])
}

// applySetRel applies the recSetRel record at the front of b.
func (s *Store) applySetRel(b []byte, now, base int64) (int, error) {
	key, off, err := field(b, 1)
	if err != nil {
		return 0, err
	}
	if off >= len(b) {
		return 0, errors.New("truncated record")
	}
	a := engine.Algo(b[off])
	if !a.Valid() || a == engine.Log {
		return 0, fmt.Errorf("algorithm %d in a relative record", b[off])
	}
	off++
	var v [4]int64
	for i := range v {
		x, m := binary.Varint(b[off:])
		if m <= 0 {
			return 0, errors.New("truncated record")
		}
		v[i], off = x, off+m
	}
	t := base + v[0]
	s.applySet(key, t+v[1], a, engine.State{T: t, N: v[2], P: v[3]}, now)
	return off, nil
}

// field reads a uvarint-length-prefixed field of b at off and returns it
// and the offset after it.
func field(b []byte, off int) ([]byte, int, error) {
	l, m := binary.Uvarint(b[off:])
	if m <= 0 || l > uint64(len(b)-off-m) {
		return nil, 0, errors.New("truncated field")
	}
	end := off + m + int(l)
	return b[off+m : end], end, nil
}

func (s *Store) applySet(key []byte, expires int64, a engine.Algo, st engine.State, now int64) {
	h := xxhash.Sum64(key)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.tick(now)
	tag := tagOf(h)
	if i := sh.tab.find(key, tag); i >= 0 {
		sh.tab.remove(i)
	}
	if ve := sh.vals[string(key)]; ve != nil {
		sh.dropValue(key, ve)
	}
	if expires > now {
		sh.tab.add(key, tag, &entry{algo: a, expires: expires, st: st})
	}
}

func (s *Store) applyDelete(key []byte) {
	h := xxhash.Sum64(key)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if i := sh.tab.find(key, tagOf(h)); i >= 0 {
		sh.tab.remove(i)
	}
	if ve := sh.vals[string(key)]; ve != nil {
		sh.dropValue(key, ve)
	}
}

// applyValSet applies the recValSet record at the front of b and returns
// its length.
func (s *Store) applyValSet(b []byte, now int64) (int, error) {
	key, off, err := field(b, 1)
	if err != nil {
		return 0, err
	}
	exp, m := binary.Varint(b[off:])
	if m <= 0 || exp < 0 {
		return 0, errors.New("bad expiry")
	}
	off += m
	v, m, err := values.DecodeValue(b[off:])
	if err != nil {
		return 0, err
	}
	off += m
	h := xxhash.Sum64(key)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now = sh.tick(now)
	if i := sh.tab.find(key, tagOf(h)); i >= 0 {
		sh.tab.remove(i)
	}
	if ve := sh.vals[string(key)]; ve != nil {
		sh.dropValue(key, ve)
	}
	if exp == 0 || exp > now {
		sh.setValue(key, tagOf(h), v, exp, now)
	}
	return off, nil
}

// clearKeys forgets every key, not the rules, without recording anything.
func (s *Store) clearKeys() {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.clear()
		sh.mu.Unlock()
	}
}

// clear forgets the shard's keys and its journal. Call with mu held.
func (sh *shard) clear() {
	sh.tab = table{}
	sh.vals, sh.valBytes = nil, 0
	sh.jbuf, sh.nrec, sh.lazy, sh.based, sh.jkeys = sh.jbuf[:0], 0, false, false, sh.jkeys[:0]
}

// Clear forgets every key and every rule, and the journal's list, as
// restoring a snapshot must before it applies the snapshot's records.
func (s *Store) Clear() {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	s.clearKeys()
	s.flushed = false
	s.rules.reset()
}

// AppendShard appends a set record for every key of shard i whose state
// (or Redis value) is live at now, and returns the extended slice and the number of
// records. It holds only shard i's lock, so a snapshot written shard by
// shard never stops the other shards.
func (s *Store) AppendShard(i int, dst []byte, now int64) ([]byte, int) {
	sh := &s.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	n := 0
	sh.forEach(now, func(key []byte, e *entry) {
		dst = appendSet(dst, key, e)
		n++
	})
	sh.forEachValue(now, func(key string, ve *valEntry) {
		dst = appendValSet(dst, []byte(key), ve)
		n++
	})
	return dst, n
}

// forEach calls fn with every key of the shard whose state is live at now
// and its entry, valid only during the call. Call with mu held.
//
// It visits the slots in a scrambled order (a stride coprime with their
// number), not in index order: the index keeps keys sorted by hash tag,
// and a table grown by inserting keys in that order (restoring a snapshot
// written in it) would pile every key of a small table onto its first
// slots and probe quadratically.
func (sh *shard) forEach(now int64, fn func(key []byte, e *entry)) {
	t := &sh.tab
	n := uint64(len(t.slots))
	for j := uint64(0); j < n; j++ {
		i := int(j * scrambleStride % n)
		slot := t.slots[i]
		if slot == 0 {
			continue
		}
		e := &sh.scratch
		t.decode(i, e)
		if e.expires <= now {
			continue
		}
		key, _ := recKey(t.record(uint32(slot)))
		fn(key, e)
	}
}

// scrambleStride is a prime larger than any table's slot count, hence
// coprime with it: j*scrambleStride mod n visits every slot once.
const scrambleStride = 1<<31 - 1

// AppendRules appends a rule record for every rule, in id order, then a
// block record for every block held, and returns the extended slice and
// the number of records.
func (s *Store) AppendRules(dst []byte) ([]byte, int) {
	all := s.rules.set.Load().All()
	for _, c := range all {
		dst = appendRuleSet(dst, c.Rule)
	}
	dst, n := s.appendBlocks(dst)
	return dst, len(all) + n
}

func appendRuleSet(dst []byte, r rules.Rule) []byte {
	js := rules.EncodeJSON(r)
	dst = binary.AppendUvarint(append(dst, recRuleSet), uint64(len(js)))
	return append(dst, js...)
}

func appendRuleDel(dst []byte, id string) []byte {
	dst = binary.AppendUvarint(append(dst, recRuleDel), uint64(len(id)))
	return append(dst, id...)
}

// Digest returns a digest of the state live at now: every key with its
// expiry and state, every rule and every live block, in their record encoding, so two
// Stores that hold the same state give the same digest whatever their
// shard counts, table layouts and histories. Replicas compare digests
// taken at the same now.
func (s *Store) Digest(now int64) uint64 {
	var sum uint64
	var buf []byte
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.forEach(now, func(key []byte, e *entry) {
			buf = appendSet(buf[:0], key, e)
			sum += xxhash.Sum64(buf)
		})
		sh.forEachValue(now, func(key string, ve *valEntry) {
			buf = appendValSet(buf[:0], []byte(key), ve)
			sum += xxhash.Sum64(buf)
		})
		sh.mu.Unlock()
	}
	for _, c := range s.rules.set.Load().All() {
		buf = appendRuleSet(buf[:0], c.Rule)
		sum += xxhash.Sum64(buf)
	}
	for _, b := range s.rules.blocks.table.Load().Active(now) {
		b.TTL = 0
		buf = appendBlockSet(buf[:0], b)
		sum += xxhash.Sum64(buf)
	}
	return sum
}
