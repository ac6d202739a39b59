package shards

import "github.com/cespare/xxhash/v2"

// maxPrefetch bounds the keys one Prefetch call looks at.
const maxPrefetch = 32

// Prefetch reads the index slots and records of keys, so that checks of
// those keys that follow soon find them in the CPU caches. It changes no
// state. Its point is memory-level parallelism: a check of one key waits
// for two dependent cache misses (index slot, then record), and checks run
// one after another, so a pipelined batch of n checks on cold keys waits
// for 2n misses in a row. Prefetch takes the locks of the keys' shards
// (in index order, as CheckAll does), issues every slot load, then every
// record load, with no locked instruction in between to serialise them,
// and releases the locks. Only the first maxPrefetch keys are read. The
// result is meaningless; it exists so that the loads are not optimised
// away.
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
	for _, sh := range locked[:nl] {
		s.shards[sh].mu.Lock()
	}
	var sink uint64
	for i := 0; i < n; i++ {
		t := &s.shards[hashes[i]&s.mask].tab
		if len(t.slots) > 0 {
			sink += t.slots[home(tagOf(hashes[i]), len(t.slots))]
		}
	}
	for i := 0; i < n; i++ {
		// The key's slot is at most a few slots after its home, usually
		// in the cache line the first pass loaded.
		t := &s.shards[hashes[i]&s.mask].tab
		if len(t.slots) == 0 {
			continue
		}
		tag := tagOf(hashes[i])
		j := home(tag, len(t.slots))
		for d := 0; d < 8; d++ {
			slot := t.slots[j]
			if slot == 0 {
				break
			}
			if uint32(slot>>32) == tag {
				sink += uint64(t.record(uint32(slot))[0])
				break
			}
			if j++; j == len(t.slots) {
				j = 0
			}
		}
	}
	for _, sh := range locked[:nl] {
		s.shards[sh].mu.Unlock()
	}
	return sink
}
