package shards

// CountKeys returns the number of keys whose state is live at now and for
// which match returns true. It holds one shard's lock at a time; match
// must not keep key.
func (s *Store) CountKeys(now int64, match func(key []byte) bool) int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.forEach(now, func(key []byte, _ *entry) {
			if match(key) {
				n++
			}
		})
		sh.forEachValue(now, func(key string, _ *valEntry) {
			if match([]byte(key)) {
				n++
			}
		})
		sh.mu.Unlock()
	}
	return n
}
