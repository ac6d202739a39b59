package shards

import (
	"context"
	"sort"
)

// The hot-key sketch: which keys were checked most in the last minute.
//
// Each shard keeps its own, changed under the shard lock the check already
// holds, so recording costs no lock and no shared cache line. It is a
// Filtered Space-Saving sketch (Homem and Carvalho, 2010) per generation:
// hotSlots monitored keys, each with its count and the count's error, and
// an array of filter counters indexed by the key's hash. A check of a
// monitored key adds one to its count. A check of any other key adds one
// to its filter counter, unless that counter has reached twice the
// smallest monitored count: then the key takes the smallest one's slot,
// with the filter counter as its count's error, and the evicted key's
// count goes to its own filter counter. So every key that is not
// monitored was checked at most its filter counter's value times, a
// monitored key at least its count minus its error, and the noise of many
// cold keys is spread over the filter counters instead of pushing the hot
// ones out: what a hot key's count misses is about twice the checks of
// the other keys of its shard divided by the filter's size. (The original
// admits at once when the filter counter reaches the smallest count; on
// a stream of many equally cold keys that replaces a monitored key on one
// check in six, each a copy of its name, and twice the smallest count
// makes that rare.) A check of a cold key costs a scan of hotSlots hashes
// (one cache line) and one counter.
//
// Time is cut in generations of hotGenNs; a shard keeps its current one
// and the hotGens-1 before it (their monitored keys only), so a report
// covers between (hotGens-1)·hotGenNs and hotGens·hotGenNs: the last 45
// to 60 seconds.

// Bounds of the number of hot keys asked for (RL.HOTKEYS's COUNT,
// /v1/hotkeys's count).
const (
	DefaultHotKeys = 10
	MaxHotKeys     = 1000 // more is taken as this
)

// HotWindowNs is how far back the hot keys look, at most: a minute.
const HotWindowNs = hotGens * hotGenNs

const (
	hotGens   = 4
	hotGenNs  = int64(15e9) // 15 s
	hotSlots  = 8           // monitored keys per shard and generation
	hotFilter = 16384       // filter counters per Store (at least 64 a shard)
)

// HotKey is one row of the hot keys: a key, the checks of it and how many
// of those were denied. Checks never exceeds the true count of the window
// and falls short of it by at most the checks made while the key was not
// monitored (see the sketch); Denied counts the denials made while it was.
type HotKey struct {
	Key    string `json:"key"`
	Checks uint64 `json:"checks"`
	Denied uint64 `json:"denied"`
}

// hotSketch is a shard's hot-key sketch. What a check touches — the
// current generation's hashes and counts, its filter — is in the shard
// itself, in three cache lines; the rest (errors, denials, key names, the
// past generations) is behind rest. Call its methods with the shard's
// lock held.
type hotSketch struct {
	hash   [hotSlots]uint64 // the current generation's monitored keys
	count  [hotSlots]uint32 // upper bounds of their checks; 0: the slot is free
	epoch  int64            // the current generation: time / hotGenNs
	least  int              // the slot of the smallest count
	filter []uint32         // the current generation's filter; nil: the sketch is off
	rest   *hotRest
}

// hotRest is the part of a shard's sketch that checks rarely touch.
type hotRest struct {
	cur  hotTable              // the current generation's, but for hash and count
	past [hotGens - 1]hotTable // the generations before it, in a ring
	next int                   // the oldest of past
}

// hotTable is one generation's monitored keys.
type hotTable struct {
	count  [hotSlots]uint32 // upper bound of the key's checks; 0: the slot is free
	over   [hotSlots]uint32 // how much count may exceed the true count
	denied [hotSlots]uint32
	keys   [hotSlots][]byte
	epoch  int64
}

// hotKeyRoom is the room for its key each slot of every generation
// starts with, so that a key up to that long takes a slot without
// allocating even the first time; a longer one grows the slot's buffer,
// once.
const hotKeyRoom = 32

// init sizes the filter for a Store of n shards.
func (k *hotSketch) init(n int) {
	k.filter = make([]uint32, max(64, hotFilter/n))
	k.rest = &hotRest{}
	room := make([]byte, hotGens*hotSlots*hotKeyRoom)
	next := func() []byte {
		b := room[:0:hotKeyRoom]
		room = room[hotKeyRoom:]
		return b
	}
	for i := range hotSlots {
		k.rest.cur.keys[i] = next()
		for g := range k.rest.past {
			k.rest.past[g].keys[i] = next()
		}
	}
}

// record counts a check of key (whose hash is h) at time now, denied or
// not. It allocates only when a key longer than hotKeyRoom takes a slot
// whose buffer has not held one as long.
func (k *hotSketch) record(key []byte, h uint64, denied bool, now int64) {
	if k.filter == nil {
		return
	}
	if ep := now / hotGenNs; ep != k.epoch {
		if ep < k.epoch { // the shard's clock never goes back; be safe
			return
		}
		k.rotate(ep)
	}
	for i := range k.hash {
		if k.hash[i] == h && k.count[i] != 0 {
			k.count[i]++
			if denied {
				k.rest.cur.denied[i]++
			}
			if i == k.least {
				k.findLeast()
			}
			return
		}
	}
	f := &k.filter[(h>>32)&uint64(len(k.filter)-1)]
	m := k.least
	if uint64(*f) < 2*uint64(k.count[m]) {
		*f++
		return
	}
	k.admit(m, key, h, *f, denied)
}

// prefetch reads what a record of a key with hash h reads (the hashes,
// the counts, the filter counter), for Store.Prefetch.
func (k *hotSketch) prefetch(h uint64) uint64 {
	if k.filter == nil {
		return 0
	}
	return k.hash[hotSlots-1] + uint64(k.count[0]) + uint64(k.filter[(h>>32)&uint64(len(k.filter)-1)])
}

// admit gives slot m to key, whose filter counter says it may have been
// checked f times before.
func (k *hotSketch) admit(m int, key []byte, h uint64, f uint32, denied bool) {
	if k.count[m] != 0 { // the evicted key's checks go to its filter counter
		g := &k.filter[(k.hash[m]>>32)&uint64(len(k.filter)-1)]
		*g = max(*g, k.count[m])
	}
	t := &k.rest.cur
	k.hash[m], k.count[m], t.over[m], t.denied[m] = h, f+1, f, 0
	if denied {
		t.denied[m] = 1
	}
	t.keys[m] = append(t.keys[m][:0], key...)
	k.findLeast()
}

// findLeast points least at the smallest count.
func (k *hotSketch) findLeast() {
	m := 0
	for i := 1; i < hotSlots; i++ {
		if k.count[i] < k.count[m] {
			m = i
		}
	}
	k.least = m
}

// rotate starts generation ep: the current one replaces the oldest past
// one, whose key buffers the new one reuses.
func (k *hotSketch) rotate(ep int64) {
	r := k.rest
	old := &r.past[r.next]
	keys := old.keys
	*old = r.cur
	old.count, old.epoch = k.count, k.epoch
	r.next = (r.next + 1) % len(r.past)
	r.cur = hotTable{}
	for i := range keys {
		r.cur.keys[i] = keys[i][:0]
	}
	k.hash, k.count, k.epoch, k.least = [hotSlots]uint64{}, [hotSlots]uint32{}, ep, 0
	clear(k.filter)
}

// collect adds the shard's monitored keys of the generations within the
// window that ends at now to acc.
func (k *hotSketch) collect(now int64, acc map[string]*HotKey) {
	if k.rest == nil {
		return
	}
	cur := k.rest.cur
	cur.count, cur.epoch = k.count, k.epoch
	cur.collect(now, acc)
	for i := range k.rest.past {
		k.rest.past[i].collect(now, acc)
	}
}

// collect adds t's keys to acc if t is within the window that ends at now.
func (t *hotTable) collect(now int64, acc map[string]*HotKey) {
	ep := now / hotGenNs
	if t.epoch > ep || t.epoch <= ep-hotGens {
		return
	}
	for i := range t.count {
		if t.count[i] == 0 {
			continue
		}
		r := acc[string(t.keys[i])]
		if r == nil {
			r = &HotKey{Key: string(t.keys[i])}
			acc[r.Key] = r
		}
		r.Checks += uint64(t.count[i] - t.over[i])
		r.Denied += uint64(t.denied[i])
	}
}

// HotKeys returns the n keys checked most (Check, Throttle, CheckAll, a
// transaction's checks; not peeks, nor changes applied from a log) in the
// window of about a minute that ends at now, most checked first, ties by
// key. ctx is unused: a
// Store answers at once, and takes it so that a Store, a durable node and
// a cluster answer the same interface. Safe for concurrent use; it holds
// one shard's lock at a time.
func (s *Store) HotKeys(ctx context.Context, n int, now int64) []HotKey {
	acc := map[string]*HotKey{}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.hot.collect(now, acc)
		sh.mu.Unlock()
	}
	return TopHotKeys(acc, n)
}

// TopHotKeys returns the n rows of acc with the most checks, most first,
// ties by key; rows with no checks are left out.
func TopHotKeys(acc map[string]*HotKey, n int) []HotKey {
	out := make([]HotKey, 0, len(acc))
	for _, r := range acc {
		if r.Checks > 0 {
			out = append(out, *r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Checks != out[j].Checks {
			return out[i].Checks > out[j].Checks
		}
		return out[i].Key < out[j].Key
	})
	if n >= 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// MergeHotKeys sums lists of hot keys per key (the checks of one key made
// on several nodes) and returns the n with the most checks.
func MergeHotKeys(n int, lists ...[]HotKey) []HotKey {
	acc := map[string]*HotKey{}
	for _, l := range lists {
		for _, r := range l {
			a := acc[r.Key]
			if a == nil {
				a = &HotKey{Key: r.Key}
				acc[r.Key] = a
			}
			a.Checks += r.Checks
			a.Denied += r.Denied
		}
	}
	return TopHotKeys(acc, n)
}
