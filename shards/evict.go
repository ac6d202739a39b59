package shards

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
)

// ErrOOM is Redis's error for a command that needs memory when used memory
// is above maxmemory and the policy is noeviction.
var ErrOOM = errors.New("OOM command not allowed when used memory > 'maxmemory'.")

// Policy is what a Store does when its memory reaches Options.MaxMemory.
type Policy uint8

// The policies, named as Redis's.
const (
	// VolatileTTL evicts the keys whose state expires soonest: the state
	// nearest to a fresh key's, whose loss changes the least.
	VolatileTTL Policy = iota
	// NoEviction refuses new keys with ErrOOM; existing keys go on being
	// checked.
	NoEviction
)

// String returns the policy's name, as --maxmemory-policy takes it.
func (p Policy) String() string {
	if p == NoEviction {
		return "noeviction"
	}
	return "volatile-ttl"
}

// ParsePolicy returns the policy named s.
func ParsePolicy(s string) (Policy, error) {
	switch strings.ToLower(s) {
	case "volatile-ttl":
		return VolatileTTL, nil
	case "noeviction":
		return NoEviction, nil
	}
	return 0, fmt.Errorf("unknown maxmemory policy %q: want volatile-ttl or noeviction", s)
}

// Options configure a Store. Zero values take the defaults.
type Options struct {
	Shards int // lock stripes, rounded up to a power of two; DefaultShards if <= 0
	// MaxMemory bounds the bytes of key state plus Other; 0 is unbounded.
	// Each shard gets an equal share, and makes room for a new key in it
	// (or refuses it, under NoEviction) when its share is used up.
	MaxMemory int64
	Policy    Policy
	// Other, if not nil, is memory used outside the Store that counts
	// against MaxMemory, such as the server's connection buffers.
	Other *atomic.Int64
	// Held, if not nil, returns more memory held outside the Store that
	// counts against MaxMemory like Other: a cluster's blocks, which its
	// meta group holds (each store's share of them). The Store's own
	// blocks count without it. It is called when a new key needs room.
	Held func() int64
	// MaxBlocks bounds the blocks the Store holds (0: no bound): a new
	// block beyond it drops the blocks nearest to their end first, and is
	// counted in BlockStats.Dropped (see SetBlock).
	MaxBlocks int
	// Refuse, if not nil, is asked before every change a command would
	// make — a check or throttle that charges (cost above 0), a reset, a
	// flush, a rule set or deleted — and a non-nil error is returned
	// instead, with nothing changed; peeks (cost 0) and replicated changes
	// (ApplyRecords) are not asked. A durable node refuses this way while
	// its disk is nearly full, so that memory never runs ahead of a log
	// that cannot take it. It is called on every such command: it must be
	// cheap (an atomic load) and not allocate.
	Refuse func() error
	// NoHotKeys turns the hot-key sketch off (see HotKeys, which then
	// answers nothing); for measuring what the sketch costs.
	NoHotKeys bool
}

// limits are a Store's bounds: memory (see Options) and refusals.
type limits struct {
	max    int64
	policy Policy
	other  *atomic.Int64
	held   func() int64
	blocks *atomic.Int64 // the Store's blocks' bytes (blockTable.bytes)
	shift  uint          // log2 of the shard count
	refuse func() error
}

// refused returns Options.Refuse's answer, or nil without one.
func (l *limits) refused() error {
	if l.refuse == nil {
		return nil
	}
	return l.refuse()
}

// sampleSize is how many keys VolatileTTL looks at to choose the one it
// evicts, as Redis's maxmemory-samples.
const sampleSize = 8

// budget returns a shard's share of the bound: MaxMemory less Other, Held
// and the Store's blocks, divided among the shards.
func (l *limits) budget() int64 {
	free := l.max
	if l.other != nil {
		free -= l.other.Load()
	}
	if l.held != nil {
		free -= l.held()
	}
	if l.blocks != nil {
		free -= l.blocks.Load()
	}
	return free >> l.shift
}

// room makes room in sh for a new key, or refuses it: it returns ErrOOM
// under NoEviction when sh has used its share of MaxMemory, and under
// VolatileTTL evicts keys until sh is within its share. Call it with mu
// held, before the key is added (so that the new key is never evicted
// for itself); entries returned by get are invalid afterwards.
func (sh *shard) room() error {
	s := sh.lim
	if s == nil || s.max <= 0 {
		return nil
	}
	budget := s.budget()
	if sh.memory() < budget {
		return nil
	}
	if s.policy == NoEviction {
		return ErrOOM
	}
	for sh.memory() >= budget {
		// Evicting frees records, not pages: once an eighth of the pages
		// is free (and more than two pages), compacting gives it back.
		if t := &sh.tab; t.freeBytes > 2*pageSize && t.freeBytes*8 >= t.pageBytes {
			t.compact()
			continue
		}
		ti := -1
		if sh.tab.n > 0 {
			ti = sh.victim()
		}
		vk, vat, vok := sh.valueVictim()
		switch {
		case ti >= 0 && (!vok || sh.tab.expiresAt(ti) <= vat):
			sh.evict(ti)
		case vok:
			sh.evictValue(vk)
		case sh.valBytes > 0:
			// Only values without an expiry are left: as Redis's
			// volatile-ttl, they are not evicted, and growth is refused.
			return ErrOOM
		default:
			return nil
		}
	}
	return nil
}

// victim returns the slot of the key VolatileTTL evicts next: among
// sampleSize keys found from a random slot on, the one whose state
// expires soonest. The shard must hold a key.
func (sh *shard) victim() int {
	t := &sh.tab
	sh.rng ^= sh.rng << 13
	sh.rng ^= sh.rng >> 7
	sh.rng ^= sh.rng << 17
	i := int(sh.rng % uint64(len(t.slots)))
	best, bestAt := -1, int64(0)
	for seen := 0; seen < sampleSize && seen < t.n; i++ {
		if i == len(t.slots) {
			i = 0
		}
		if t.slots[i] == 0 {
			continue
		}
		seen++
		if at := t.expiresAt(i); best < 0 || at < bestAt {
			best, bestAt = i, at
		}
	}
	return best
}

// evict removes the key of slot i to make room under MaxMemory. It is the
// one place where keys are evicted: an eviction is a state change like a
// check or a reset, and a store that is journaled or replicated must
// record it here, so that every replica drops the same keys. Call it with
// mu held.
func (sh *shard) evict(i int) {
	if sh.journal {
		// An eviction is a change of state like any other: replicas and
		// a replay must drop the key too.
		rec := sh.tab.record(uint32(sh.tab.slots[i]))
		key, pos := recKey(rec)
		sh.noteDelete(key, &entry{dirty: rec[pos]&dirtyBit != 0})
	}
	sh.tab.remove(i)
	sh.evicted++
}

// Evicted returns the number of keys evicted to make room under
// MaxMemory since the Store was made.
func (s *Store) Evicted() int64 {
	var n int64
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.evicted
		sh.mu.Unlock()
	}
	return n
}

// MaxMemory returns the memory bound in bytes, 0 for none.
func (s *Store) MaxMemory() int64 { return s.limits.max }

// MaxMemoryPolicy returns the name of the policy at the bound.
func (s *Store) MaxMemoryPolicy() string { return s.limits.policy.String() }
