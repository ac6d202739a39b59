package shards

// Sweep examines up to perShard keys in every shard, continuing where the
// previous sweep of that shard stopped, and drops those whose state has
// expired at now. A shard in which more than a quarter of the examined keys
// had expired is swept again, up to four rounds, so that a burst of
// expiries is reclaimed quickly while one call stays bounded by 4*perShard
// keys per shard. It returns the number of keys dropped.
func (s *Store) Sweep(now int64, perShard int) int {
	removed := 0
	for i := range s.shards {
		removed += s.shards[i].sweep(now, perShard)
	}
	return removed
}

func (sh *shard) sweep(now int64, limit int) int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now = sh.tick(now)
	removed := 0
	for round := 0; round < 4; round++ {
		seen, dropped := sh.tab.sweep(now, limit)
		removed += dropped
		if dropped*4 <= seen || seen < limit {
			break
		}
	}
	return removed
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
