package shards

import (
	"fmt"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/values"
)

// The Redis values of package values (strings, lists, hashes, sorted sets)
// live in their shard beside the limiter's records, in a map of their own:
// a key is in the table (limiter state) or in the map (a value), never in
// both. They share everything else with the limiter's state: the shard's
// lock, its clock, the journal (a changed value is listed lazily and
// written whole when the journal is collected: see recValSet), snapshots,
// the memory bound and its eviction, Sweep, Len and FLUSHALL. A limiter
// command on a key that holds a value answers WRONGTYPE, and a value
// command on a key that holds limiter state answers WRONGTYPE too (see
// Keys.Lookup), except for the commands on any key (DEL, EXISTS, TYPE...).

// ValueTypeError is returned by a limiter command (Check, Throttle,
// CheckAll) on a key that holds a Redis value. It wraps ErrWrongType.
type ValueTypeError struct {
	Held values.Kind
	Want engine.Algo
}

// Error returns the Redis-style WRONGTYPE message with both kinds.
func (e *ValueTypeError) Error() string {
	return fmt.Sprintf("%s: the key holds a Redis %s, not '%s' state (DEL it or use another key)",
		ErrWrongType, e.Held, e.Want)
}

// Unwrap makes errors.Is(err, ErrWrongType) true.
func (e *ValueTypeError) Unwrap() error { return ErrWrongType }

// valEntry is one key's value in its shard's vals map.
type valEntry struct {
	v     *values.Value
	exp   int64 // ns since the epoch the key expires at; 0 for never
	size  int64 // the bytes accounted for it: key, value and overhead
	dirty bool  // listed in the shard's journal since it was last collected
	// stated is the shard's jepoch+1 when the value was journaled as its
	// state since the last collection (noteValueState).
	stated uint32
}

// valOverhead is what a value costs beyond its key and its own Size: the
// map's slot, the key's string header and the valEntry.
const valOverhead = 80

// live reports whether ve has not expired at now.
func (ve *valEntry) live(now int64) bool { return ve.exp == 0 || ve.exp > now }

// value returns key's live value, or nil; an expired one is dropped (not
// journaled: a replica holds the same expiry). Call with mu held.
func (sh *shard) value(key []byte, now int64) *valEntry {
	if len(sh.vals) == 0 {
		return nil
	}
	ve := sh.vals[string(key)]
	if ve != nil && !ve.live(now) {
		sh.dropValue(key, ve)
		return nil
	}
	return ve
}

// valueError returns the WRONGTYPE error of a limiter command with
// algorithm a on key if key holds a live value, else nil. It costs a length
// test on a shard without values. Call with mu held.
func (sh *shard) valueError(key []byte, a engine.Algo, now int64) error {
	if len(sh.vals) == 0 {
		return nil
	}
	if ve := sh.value(key, now); ve != nil {
		return &ValueTypeError{Held: ve.v.Kind(), Want: a}
	}
	return nil
}

// putValue stores v with expiry exp as key's value, replacing the key's
// limiter state if it has any, and journals the change: as eff's command
// if it covers it (see effects.go), else by listing the key. Call with mu
// held.
func (sh *shard) putValue(key []byte, tag uint32, v *values.Value, exp, now int64, eff *effect) {
	if exp != 0 && exp <= now {
		sh.deleteKey(key, tag, now)
		return
	}
	if i := sh.tab.find(key, tag); i >= 0 {
		e := &sh.scratch
		sh.tab.decode(i, e)
		sh.remove(key, e)
	}
	ve := sh.setValue(key, tag, v, exp, now)
	sh.journalValue(key, ve, eff, now)
}

// replaceValue is putValue for a key that holds the live value ve (in
// this shard), with a future or no expiry: the key is not looked up again.
// Call with mu held.
func (sh *shard) replaceValue(key []byte, ve *valEntry, v *values.Value, exp, now int64, eff *effect) {
	ve.v, ve.exp = v, exp
	size := int64(len(key)) + v.Size() + valOverhead
	sh.valBytes += size - ve.size
	ve.size = size
	sh.journalValue(key, ve, eff, now)
}

// journalValue journals the change of key's value ve, made at now by
// eff's command (nil, or not a one-key write, for any other change): a
// small string as its state, eagerly (see noteValueState); else as the
// command if eff covers it (see effects.go); else by listing the key.
// Call with mu held.
func (sh *shard) journalValue(key []byte, ve *valEntry, eff *effect, now int64) {
	switch {
	case !sh.journal:
	case !sh.lazy && !ve.dirty && ve.v.Kind() == values.KindString && ve.v.Size() <= maxStatedValue:
		sh.noteValueState(key, ve, eff)
	case eff.covers(sh, key, ve):
		sh.noteEffect(key, eff, now)
	default:
		sh.noteValue(key, ve)
	}
}

// maxStatedValue is the largest Value.Size of a string journaled as its
// state (a string of up to 64 bytes): its recValSet record, about 40
// bytes for a counter, is smaller than the record of the command that
// wrote it (INCRBY key n: the key twice and the command's name), and it
// is encoded while the value is in the CPU's caches, as a limiter key's
// recSetRel is.
const maxStatedValue = 128

// noteValueState records key's value ve as its state (recValSet), eagerly,
// and marks it so, so that its later changes until the next collection
// are not journaled as commands (see effect.covers).
// The record replaces the previous one that eff's keyspace wrote for the
// key if that is still the shard's last record: a script that changes its
// key twice (INCRBY then PEXPIRE) costs one record, as a check does.
// Call with mu held.
func (sh *shard) noteValueState(key []byte, ve *valEntry, eff *effect) {
	if sh.empty() {
		sh.note.changed()
	}
	if eff != nil && eff.tailSh == sh && eff.tailEnd == len(sh.jbuf) && recordOf(sh.jbuf[eff.tailStart:], key) {
		sh.jbuf = sh.jbuf[:eff.tailStart]
		sh.nrec--
	}
	start := len(sh.jbuf)
	sh.jbuf = appendValSet(sh.jbuf, key, ve)
	sh.nrec++
	sh.lazy = len(sh.jbuf) > maxEager
	ve.stated = sh.jepoch + 1
	if eff != nil {
		eff.tailSh, eff.tailStart, eff.tailEnd = sh, start, len(sh.jbuf)
	}
}

// recordOf reports whether rec, a record, is one of key.
func recordOf(rec, key []byte) bool {
	if len(rec) < 2 {
		return false
	}
	l, m := uvarint(rec[1:])
	return m > 0 && l == uint64(len(key)) && 1+m+len(key) <= len(rec) && string(rec[1+m:1+m+len(key)]) == string(key)
}

// setValue stores v with expiry exp as key's value, dropping the key's
// limiter state, and returns its entry; nothing is journaled. Call with
// mu held.
func (sh *shard) setValue(key []byte, tag uint32, v *values.Value, exp, now int64) *valEntry {
	if i := sh.tab.find(key, tag); i >= 0 {
		sh.tab.remove(i)
	}
	ve := sh.vals[string(key)]
	if ve == nil {
		if sh.vals == nil {
			sh.vals = make(map[string]*valEntry)
		}
		ve = &valEntry{}
		sh.vals[string(key)] = ve
	}
	ve.v, ve.exp = v, exp
	size := int64(len(key)) + v.Size() + valOverhead
	sh.valBytes += size - ve.size
	ve.size = size
	return ve
}

// deleteKey removes key whatever it holds, as a change (journaled), and
// reports whether it held anything live. Call with mu held.
func (sh *shard) deleteKey(key []byte, tag uint32, now int64) bool {
	if ve := sh.value(key, now); ve != nil {
		sh.noteValueDelete(key, ve)
		sh.dropValue(key, ve)
		return true
	}
	if e := sh.getTag(key, tag, now); e != nil {
		sh.remove(key, e)
		return true
	}
	return false
}

// dropValue forgets key's value without recording it. Call with mu held.
func (sh *shard) dropValue(key []byte, ve *valEntry) {
	sh.valBytes -= ve.size
	delete(sh.vals, string(key))
}

// noteValue lists key, whose value ve changed, in the journal: values are
// always recorded lazily, since one can be large and change many times
// between two collections. Call with mu held.
func (sh *shard) noteValue(key []byte, ve *valEntry) {
	if !sh.journal {
		return
	}
	if sh.empty() {
		sh.note.changed()
	}
	if !ve.dirty {
		ve.dirty = true
		sh.jkeys = appendKey(sh.jkeys, key)
	}
}

// noteValueDelete records that key, whose value ve is about to be dropped,
// is gone. Call with mu held.
func (sh *shard) noteValueDelete(key []byte, ve *valEntry) {
	sh.noteDelete(key, &entry{dirty: ve.dirty})
}

// memory returns the bytes the shard's keys take. Call with mu held.
func (sh *shard) memory() int64 { return sh.tab.memory() + sh.valBytes }

// keys returns the number of keys the shard holds, expired ones not yet
// dropped included. Call with mu held.
func (sh *shard) keys() int { return sh.tab.n + len(sh.vals) }

// forEachValue calls fn with every value of the shard live at now. Call
// with mu held; fn must not change the shard.
func (sh *shard) forEachValue(now int64, fn func(key string, ve *valEntry)) {
	for k, ve := range sh.vals {
		if ve.live(now) {
			fn(k, ve)
		}
	}
}

// sweepValues drops up to limit values expired at now, from wherever the
// map's iteration starts (a random place, as Redis samples), and reports
// how many it looked at and dropped. Call with mu held.
func (sh *shard) sweepValues(now int64, limit int) (seen, dropped int) {
	for k, ve := range sh.vals {
		if seen == limit {
			break
		}
		seen++
		if !ve.live(now) {
			sh.valBytes -= ve.size
			delete(sh.vals, k)
			dropped++
		}
	}
	return seen, dropped
}

// valueVictim returns the key of the volatile value (one with an expiry)
// that expires soonest among up to sampleSize of them found within
// 8*sampleSize values from wherever the map's iteration starts, and false
// if it found none: values without an expiry are never evicted, as under
// Redis's volatile-ttl. Call with mu held.
func (sh *shard) valueVictim() (string, int64, bool) {
	best, bestAt, found, seen := "", int64(0), 0, 0
	for k, ve := range sh.vals {
		if found == sampleSize || seen == 8*sampleSize {
			break
		}
		seen++
		if ve.exp == 0 {
			continue
		}
		found++
		if best == "" || ve.exp < bestAt {
			best, bestAt = k, ve.exp
		}
	}
	return best, bestAt, best != ""
}

// evictValue removes the value of key to make room under MaxMemory,
// recording it as a change (see evict). Call with mu held.
func (sh *shard) evictValue(key string) {
	ve := sh.vals[key]
	sh.noteValueDelete([]byte(key), ve)
	sh.dropValue([]byte(key), ve)
	sh.evicted++
}

// Persistent returns the number of keys without an expiry: Redis values
// with no TTL (limiter state always expires). INFO's keyspace line counts
// the others as its expires. The shards of a busy script are not counted.
func (s *Store) Persistent() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		if len(sh.vals) == 0 || sh.lockCmd() != nil {
			continue
		}
		for _, ve := range sh.vals {
			if ve.exp == 0 {
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}
