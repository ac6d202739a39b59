package shards

import "runtime"

// Sweep examines up to perShard keys in every shard, continuing where the
// previous sweep of that shard stopped, and drops those whose state has
// expired at now. A shard in which more than a quarter of the examined keys
// had expired is swept again, up to four rounds, so that a burst of
// expiries is reclaimed quickly while one call stays bounded by 4*perShard
// keys per shard. It yields the processor (runtime.Gosched) after every
// few shards' worth of keys examined, so that with few processors a sweep
// that drops many keys does not hold back the connections for its whole
// length; a sweep of empty shards does not yield (an idle cluster node
// sweeps many empty stores, and each yield is a trip through the
// scheduler). It returns the number of keys dropped. It also drops the
// blocks expired at now (PruneBlocks).
func (s *Store) Sweep(now int64, perShard int) int {
	s.PruneBlocks(now)
	removed, work := 0, 0
	for i := range s.shards {
		dropped, seen := s.shards[i].sweep(now, perShard)
		removed += dropped
		if work += seen; work >= sweepYield*perShard {
			runtime.Gosched()
			work = 0
		}
	}
	return removed
}

// sweepYield is how many shards' worth of keys (perShard each) Sweep
// examines between yields.
const sweepYield = 8

// sweep drops up to four rounds of limit expired keys (and as many
// values), and returns how many it dropped and how many it examined.
func (sh *shard) sweep(now int64, limit int) (removed, examined int) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now = sh.tick(now)
	for round := 0; round < 4; round++ {
		seen, dropped := sh.tab.sweep(now, limit)
		removed += dropped
		examined += seen
		if dropped*4 <= seen || seen < limit {
			break
		}
	}
	if len(sh.vals) > 0 {
		for round := 0; round < 4; round++ {
			seen, dropped := sh.sweepValues(now, limit)
			removed += dropped
			examined += seen
			if dropped*4 <= seen || seen < limit {
				break
			}
		}
	}
	return removed, examined
}

// sweep examines up to limit keys from the sweep cursor on, or every key,
// and removes those expired at now.
func (t *table) sweep(now int64, limit int) (seen, dropped int) {
	for visited := 0; seen < limit && t.n > 0 && visited < len(t.slots); {
		if t.cursor >= len(t.slots) {
			t.cursor = 0
		}
		if t.slots[t.cursor] == 0 {
			t.cursor++
			visited++
			continue
		}
		seen++
		if t.expiresAt(t.cursor) > now {
			t.cursor++
			visited++
			continue
		}
		// Removal shifts the following keys back by one: look at this
		// slot again.
		t.remove(t.cursor)
		dropped++
	}
	return seen, dropped
}
