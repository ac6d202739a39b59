package shards

import (
	"bytes"
	"encoding/binary"
	"errors"

	"github.com/cespare/xxhash/v2"
	"github.com/rlserver/rlserver/values"
)

// A change that a command of package values makes to its one key is
// journaled as the command itself, at the time it ran (recValCmd), where
// writing the key's whole value would cost as much as the value: a sliding
// log of a thousand entries changed by one ZADD is a record of the ZADD, as
// Redis replicates a script by its effects. A replica replays the command
// on its copy of the key at the same time; the commands are deterministic
// (a script's randomness and clock are already in their arguments), its
// copy is the leader's by induction, and evictions reach it as deletions
// recorded before the command.
//
// A small string (a counter, a timestamp: what the limiter libraries'
// scripts keep) is journaled as its state instead, at once (recValSet,
// noteValueState): its record is smaller than the command's, and a
// script's second change of the key replaces the record of its first.
//
// The other changes are journaled as state (recValSet, listed lazily): a
// command that writes several keys (RENAME, MSET), a change while the
// shard's journal is lazy (its eager records are bounded), and a key
// already listed in this collection (its state, written last, is the
// truth).
//
//	recValCmd: uvarint key length | key | varint T-base | uvarint argc
//	           | (uvarint length | argument) × argc
//
// T is the command's time and base the shard's journal base (recBase).
const recValCmd = 11

// effect is the command a Keys runs (Keys.Exec), to be journaled as a
// change of its key.
type effect struct {
	args [][]byte
	key  []byte
	ok   bool // a write command of one key: its change may be its effect
	done bool // journaled already (a command that Puts its key twice)
	// The last record noteValueState wrote for the keyspace, at
	// jbuf[tailStart:tailEnd] of shard tailSh: a later state of the same
	// key replaces it while it is still the shard's last record.
	tailSh             *shard
	tailStart, tailEnd int
}

// set makes args, a call of cmd, the command being run.
func (e *effect) set(cmd *values.Command, args [][]byte) {
	e.args, e.done = args, false
	e.ok = cmd != nil && cmd.Flags&values.Write != 0 && cmd.FirstKey == 1 && cmd.LastKey == 1 && len(args) > 1
	if e.ok {
		e.key = args[1]
	}
}

// clear forgets the command.
func (e *effect) clear() { e.args, e.key, e.ok = nil, nil, false }

// covers reports whether the change of key's value ve can be journaled as
// the command: a one-key write on that key, the shard's journal eager, the
// key not listed already, and not journaled as its state since the last
// collection (a replica applies a state record at the collection's time,
// when the state may have expired, so a command replayed after it at its
// own earlier time could find no value where the leader had one). Call
// with mu held.
func (e *effect) covers(sh *shard, key []byte, ve *valEntry) bool {
	return e != nil && e.ok && !sh.lazy && !ve.dirty && ve.stated != sh.jepoch+1 && bytes.Equal(key, e.key)
}

// noteEffect journals the command of e, which changed key at now, unless
// the same command was journaled already. Call with mu held.
func (sh *shard) noteEffect(key []byte, e *effect, now int64) {
	if e.done {
		return
	}
	e.done = true
	if sh.empty() {
		sh.note.changed()
	}
	if !sh.based {
		sh.jbase, sh.based = sh.clock, true
		sh.jbuf = appendBase(sh.jbuf, sh.jbase)
	}
	sh.jbuf = appendKey(append(sh.jbuf, recValCmd), key)
	sh.jbuf = binary.AppendVarint(sh.jbuf, now-sh.jbase)
	sh.jbuf = binary.AppendUvarint(sh.jbuf, uint64(len(e.args)))
	for _, a := range e.args {
		sh.jbuf = appendKey(sh.jbuf, a)
	}
	sh.nrec++
	sh.lazy = len(sh.jbuf) > maxEager
}

// applyValCmd replays the recValCmd record at the front of b, whose time
// is relative to base, and returns its length.
func (s *Store) applyValCmd(b []byte, base int64) (int, error) {
	key, off, err := field(b, 1)
	if err != nil {
		return 0, err
	}
	rel, m := binary.Varint(b[off:])
	if m <= 0 {
		return 0, errors.New("bad time")
	}
	off += m
	argc, m := binary.Uvarint(b[off:])
	if m <= 0 || argc == 0 || argc > uint64(len(b)) {
		return 0, errors.New("bad argument count")
	}
	off += m
	args := make([][]byte, argc)
	for i := range args {
		if args[i], off, err = field(b, off); err != nil {
			return 0, err
		}
	}
	h := xxhash.Sum64(key)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	// The command runs at its own time, even if the shard's clock has
	// passed it: a state record before it in the same collection (a
	// limiter key's, or a small value's: see noteValueState) is applied at
	// the collection's time, which moves the clock, and the keys the
	// command finds must be those that were live when it ran.
	now := base + rel
	sh.tick(now)
	values.Exec(&replayKeys{sh: sh, now: now}, now, 2, args)
	return off, nil
}

// replayKeys is one shard as a replayed command sees it: changes are
// applied as they were recorded, with nothing journaled and nothing
// evicted (the leader's evictions are records of their own).
type replayKeys struct {
	sh  *shard
	now int64
}

func (r *replayKeys) Lookup(key []byte) values.Entry {
	if ve := r.sh.value(key, r.now); ve != nil {
		return values.Entry{Value: ve.v, Expires: ve.exp}
	}
	if e := r.sh.get(key, r.now); e != nil {
		return values.Entry{Other: otherNames[e.algo], Expires: e.expires}
	}
	return values.Entry{}
}

func (r *replayKeys) Put(key []byte, v *values.Value, exp int64) {
	r.sh.setValue(key, tagOf(xxhash.Sum64(key)), v, exp, r.now)
}

func (r *replayKeys) Delete(key []byte) bool {
	if ve := r.sh.vals[string(key)]; ve != nil {
		r.sh.dropValue(key, ve)
		return true
	}
	if i := r.sh.tab.find(key, tagOf(xxhash.Sum64(key))); i >= 0 {
		r.sh.tab.remove(i)
		return true
	}
	return false
}

func (r *replayKeys) Writable(bool) error { return nil }

func (r *replayKeys) Scan(uint64, int, func([]byte, string) bool) uint64 { return 0 }

func (r *replayKeys) Len() int { return r.sh.keys() }

func (r *replayKeys) Flush() {}
