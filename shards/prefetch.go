package shards

import (
	"github.com/cespare/xxhash/v2"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/values"
)

// maxPrefetch bounds the keys one Prefetch call looks at.
const maxPrefetch = 32

// Prefetch reads the index slots and records of keys, so that checks of
// those keys that follow soon find them in the CPU caches. It changes no
// state. Its point is memory-level parallelism: a check of one key waits
// for two dependent cache misses (index slot, then record), and checks run
// one after another, so a pipelined batch of n checks on cold keys waits
// for 2n misses in a row (four for a long log, whose ring is two pointers
// further; a short log's entries are in its record). Prefetch takes the
// locks of the keys' shards (in index order, as CheckAll does), issues
// every slot load, then every record load, then every ring load, with no
// locked instruction in between to serialise them, and releases the
// locks. A key that holds a Redis value (a script's counter) is found in
// its shard's map, then its entry, then the value, each pass one load per
// key. Only the first maxPrefetch keys are read. The result is
// meaningless; it exists so that the loads are not optimised away.
//
//go:noinline
func (s *Store) Prefetch(keys [][]byte) uint64 {
	n := min(len(keys), maxPrefetch)
	var hashes [maxPrefetch]uint64
	var locked [maxPrefetch]int
	nl := 0
	for i := 0; i < n; i++ {
		h := xxhash.Sum64(keys[i])
		hashes[i] = h
		sh := int(h & s.mask)
		// Insertion into the sorted, distinct list of shards to lock.
		j := nl
		for j > 0 && locked[j-1] > sh {
			j--
		}
		if j > 0 && locked[j-1] == sh {
			continue
		}
		copy(locked[j+1:nl+1], locked[j:nl])
		locked[j] = sh
		nl++
	}
	// TryLock: a prefetch is a hint, and must never wait for a shard
	// that a script holds (see busy.go); a shard it cannot lock at once
	// is skipped.
	kept := 0
	for _, sh := range locked[:nl] {
		if s.shards[sh].mu.TryLock() {
			locked[kept] = sh
			kept++
		}
	}
	nl = kept
	var held [maxPrefetch]bool // the key's shard is locked
	for i := 0; i < n; i++ {
		for _, sh := range locked[:nl] {
			held[i] = held[i] || sh == int(hashes[i]&s.mask)
		}
	}
	var sink uint64
	for i := 0; i < n; i++ {
		if !held[i] {
			continue
		}
		sh := &s.shards[hashes[i]&s.mask]
		if t := &sh.tab; len(t.slots) > 0 {
			sink += t.slots[home(tagOf(hashes[i]), len(t.slots))]
		}
		sink += sh.hot.prefetch(hashes[i])
	}
	sink += s.prefetchValues(keys[:n], hashes[:n], held[:n])
	var recs [maxPrefetch][]byte
	for i := 0; i < n; i++ {
		if !held[i] {
			continue
		}
		t := &s.shards[hashes[i]&s.mask].tab
		if rec := t.prefetchRecord(tagOf(hashes[i])); rec != nil {
			recs[i] = rec
			sink += uint64(rec[0])
		}
	}
	// A long log's entries live in a ring behind two more pointers: the
	// ring struct, then its buffer, where a check reads the oldest entry
	// and writes after the newest. Each pass issues one independent load
	// per key, so that the misses of a pass overlap.
	var ringIdx [maxPrefetch]int
	logs := 0
	for i := 0; i < n; i++ {
		ringIdx[i] = -1
		if recs[i] != nil {
			if r, _, ok := spilledRing(recs[i]); ok {
				ringIdx[i] = int(r)
				logs++
			}
		}
	}
	if logs > 0 {
		var rings [maxPrefetch]*engine.Ring
		for i := 0; i < n; i++ {
			if ringIdx[i] >= 0 {
				rings[i] = s.shards[hashes[i]&s.mask].tab.rings[ringIdx[i]]
			}
		}
		var lens [maxPrefetch]int
		for i := 0; i < n; i++ {
			if rings[i] != nil {
				lens[i] = rings[i].Len()
			}
		}
		for i := 0; i < n; i++ {
			if lens[i] > 0 {
				sink += uint64(rings[i].At(0).At + rings[i].Last().At)
			}
		}
	}
	for _, sh := range locked[:nl] {
		s.shards[sh].mu.Unlock()
	}
	return sink
}

// prefetchRecord returns the record of the key with tag, looking a few
// slots from its home, or nil; it does not compare keys (a tag collision
// only prefetches the wrong record).
func (t *table) prefetchRecord(tag uint32) []byte {
	if len(t.slots) == 0 {
		return nil
	}
	j := home(tag, len(t.slots))
	for d := 0; d < 8; d++ {
		slot := t.slots[j]
		if slot == 0 {
			return nil
		}
		if uint32(slot>>32) == tag {
			return t.record(uint32(slot))
		}
		if j++; j == len(t.slots) {
			j = 0
		}
	}
	return nil
}

// prefetchValues reads the map slots, entries and values of the keys that
// hold Redis values, among keys whose shards are held (locked), one pass
// per level so that the keys' misses of a level overlap. hashes are the
// keys' hashes.
func (s *Store) prefetchValues(keys [][]byte, hashes []uint64, held []bool) uint64 {
	var ves [maxPrefetch]*valEntry
	found := false
	for i, key := range keys {
		if !held[i] {
			continue
		}
		if sh := &s.shards[hashes[i]&s.mask]; len(sh.vals) > 0 {
			ves[i] = sh.vals[string(key)]
			found = found || ves[i] != nil
		}
	}
	if !found {
		return 0
	}
	var vs [maxPrefetch]*values.Value
	var sink uint64
	for i := range keys {
		if ve := ves[i]; ve != nil {
			vs[i] = ve.v
			sink += uint64(ve.exp)
		}
	}
	for i := range keys {
		if v := vs[i]; v != nil {
			sink += v.Prefetch()
		}
	}
	return sink
}
