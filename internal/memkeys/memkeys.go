// Package memkeys is an in-memory values.Keyspace for tests: the values
// package's own, the script engine's and the server's, which need keys
// without a store. It checks that commands keep the Keyspace's contract
// (no empty aggregate is stored, values stay consistent) and counts what
// they did.
package memkeys

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/rlserver/rlserver/values"
)

// Keyspace is a values.Keyspace in a map. Its clock is set with SetNow.
// It is not safe for concurrent use.
type Keyspace struct {
	now  int64
	keys map[string]*entry
	// OOM is what Writable answers a command that may grow memory (nil
	// for none), Refuse what it answers any write (nil for none).
	OOM, Refuse error
	// Check makes every Put verify the value (values.Value.Verify), which
	// walks it: off for benchmarks.
	Check bool
	// Puts and Deletes count the calls.
	Puts, Deletes int
	broken        []string
}

type entry struct {
	v     *values.Value
	exp   int64
	other string
}

// New returns an empty Keyspace at time 0, with Check on.
func New() *Keyspace { return &Keyspace{keys: make(map[string]*entry), Check: true} }

// SetNow sets the time (ns since the epoch) keys expire against.
func (k *Keyspace) SetNow(now int64) { k.now = now }

// Now returns the time set by SetNow.
func (k *Keyspace) Now() int64 { return k.now }

// SetOther makes key hold state of another kind, named typ (limiter
// state), expiring at exp (0 for never).
func (k *Keyspace) SetOther(key, typ string, exp int64) {
	k.keys[key] = &entry{other: typ, exp: exp}
}

// live returns key's entry if it has not expired.
func (k *Keyspace) live(key string) *entry {
	e := k.keys[key]
	if e == nil || (e.exp != 0 && e.exp <= k.now) {
		return nil
	}
	return e
}

// Lookup implements values.Keyspace.
func (k *Keyspace) Lookup(key []byte) values.Entry {
	e := k.live(string(key))
	if e == nil {
		return values.Entry{}
	}
	return values.Entry{Value: e.v, Expires: e.exp, Other: e.other}
}

// Put implements values.Keyspace. It records a breach of the contract (an
// empty aggregate, a nil or inconsistent value) for Err.
func (k *Keyspace) Put(key []byte, v *values.Value, exp int64) {
	k.Puts++
	switch {
	case v == nil:
		k.broken = append(k.broken, fmt.Sprintf("Put(%q, nil)", key))
	case v.Kind() != values.KindString && v.Len() == 0:
		k.broken = append(k.broken, fmt.Sprintf("Put(%q) of an empty %s", key, v.Kind()))
	case k.Check:
		if err := v.Verify(); err != nil {
			k.broken = append(k.broken, fmt.Sprintf("Put(%q): %v", key, err))
		}
	}
	if e := k.keys[string(key)]; e != nil {
		*e = entry{v: v, exp: exp} // no allocation for a key that stays
		return
	}
	k.keys[string(key)] = &entry{v: v, exp: exp}
}

// Delete implements values.Keyspace.
func (k *Keyspace) Delete(key []byte) bool {
	k.Deletes++
	e := k.live(string(key))
	delete(k.keys, string(key))
	return e != nil
}

// Writable implements values.Keyspace with the OOM and Refuse errors.
func (k *Keyspace) Writable(grow bool) error {
	if k.Refuse != nil {
		return k.Refuse
	}
	if grow {
		return k.OOM
	}
	return nil
}

// Scan implements values.Keyspace. Keys are visited in the order of a
// hash of their names; the cursor is the hash to go on from, so a key
// that stays is visited once whatever else changes.
func (k *Keyspace) Scan(cursor uint64, count int, fn func(key []byte, kind string) bool) uint64 {
	type hk struct {
		h   uint64
		key string
	}
	var all []hk
	for key := range k.keys {
		if h := hashKey(key); h >= cursor && k.live(key) != nil {
			all = append(all, hk{h, key})
		}
	}
	slices.SortFunc(all, func(a, b hk) int {
		if a.h != b.h {
			return cmpU64(a.h, b.h)
		}
		return cmpStr(a.key, b.key)
	})
	for i, x := range all {
		if i >= count && x.h != all[i-1].h {
			return x.h
		}
		e := k.keys[x.key]
		kind := e.other
		if e.v != nil {
			kind = e.v.Kind().String()
		}
		if !fn([]byte(x.key), kind) {
			if i+1 < len(all) {
				return all[i+1].h
			}
			return 0
		}
	}
	return 0
}

// hashKey is a key's place in Scan's order, never 0 (the cursor that
// starts and ends an iteration).
func hashKey(key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return max(h.Sum64(), 1)
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Len implements values.Keyspace.
func (k *Keyspace) Len() int {
	n := 0
	for key := range k.keys {
		if k.live(key) != nil {
			n++
		}
	}
	return n
}

// Flush implements values.Keyspace.
func (k *Keyspace) Flush() { clear(k.keys) }

// Size returns the sum of the live values' Size.
func (k *Keyspace) Size() int64 {
	var n int64
	for key, e := range k.keys {
		if e.v != nil && k.live(key) != nil {
			n += e.v.Size()
		}
	}
	return n
}

// Err returns the breaches of the Keyspace's contract seen so far, and
// the inconsistencies of the values stored now, or nil.
func (k *Keyspace) Err() error {
	var errs []error
	for _, b := range k.broken {
		errs = append(errs, errors.New(b))
	}
	for key, e := range k.keys {
		if e.v != nil {
			if err := e.v.Verify(); err != nil {
				errs = append(errs, fmt.Errorf("key %q: %w", key, err))
			}
		}
	}
	return errors.Join(errs...)
}
