package shards

// Sweep examines up to perShard keys in every shard, in the map's random
// iteration order, and drops those whose state has expired at now. A shard
// in which more than a quarter of the examined keys had expired is swept
// again, up to four rounds, so that a burst of expiries is reclaimed quickly
// while one call stays bounded by 4*perShard keys per shard. It returns the
// number of keys dropped.
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
		seen, dropped := 0, 0
		for k, e := range sh.m {
			if seen == limit {
				break
			}
			seen++
			if e.expires <= now {
				sh.drop(k, e)
				dropped++
			}
		}
		removed += dropped
		if dropped*4 <= seen || seen < limit {
			break
		}
	}
	return removed
}
