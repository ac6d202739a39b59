package server

import (
	"github.com/rlserver/rlserver/shards"
	"github.com/rlserver/rlserver/values"
)

// spannedKeys is the keyspace of every store a cluster node serves, for
// the commands that see every key (KEYS, SCAN, DBSIZE): Scan's cursor
// holds the store's index in its high 16 bits and the store's own cursor
// below. The commands on named keys never use it.
type spannedKeys struct {
	parts []*shards.Keys
	now   int64
}

// spanKeys returns the keyspace of txs at now (the latest of their clocks).
func spanKeys(txs []*shards.Tx, now int64) *spannedKeys {
	k := &spannedKeys{parts: make([]*shards.Keys, len(txs))}
	for i, tx := range txs {
		k.parts[i] = tx.Keys(now)
		now = max(now, k.parts[i].Now())
	}
	k.now = now
	return k
}

const spanShift = 48

func (k *spannedKeys) Lookup(key []byte) values.Entry             { panic("server: Lookup on every key") }
func (k *spannedKeys) Put(key []byte, v *values.Value, exp int64) { panic("server: Put on every key") }
func (k *spannedKeys) Delete(key []byte) bool                     { panic("server: Delete on every key") }

// Writable is nil: the commands on every key only read.
func (k *spannedKeys) Writable(grow bool) error { return nil }

// Scan scans the stores in order (see spannedKeys).
func (k *spannedKeys) Scan(cursor uint64, count int, fn func(key []byte, kind string) bool) uint64 {
	for i := int(cursor >> spanShift); i < len(k.parts); i++ {
		c := k.parts[i].Scan(cursor&(1<<spanShift-1), count, fn)
		if c != 0 {
			return uint64(i)<<spanShift | c
		}
		cursor = 0
		if i+1 < len(k.parts) {
			return uint64(i+1) << spanShift
		}
	}
	return 0
}

// Len returns the keys of every store.
func (k *spannedKeys) Len() int {
	n := 0
	for _, p := range k.parts {
		n += p.Len()
	}
	return n
}

// Flush flushes every store.
func (k *spannedKeys) Flush() {
	for _, p := range k.parts {
		p.Flush()
	}
}
