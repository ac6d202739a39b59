package values

import (
	"fmt"
	"math"
)

// zset is a sorted set: a skiplist in (score, member) order and a map from
// member to node, for O(1) scores and O(log n) inserts, deletes, ranks and
// ranges.
type zset struct {
	sl   skiplist
	dict map[string]*znode
	// lp is whether Redis would hold this set as a listpack (at most 128
	// members, none over 64 bytes; once past that it stays a skiplist).
	// Redis then stores a score of -0 as 0, and ranges by lex scan the
	// members in order.
	lp   bool
	size int64 // the members' share of the value's Size
}

const (
	zsetListpackEntries = 128 // Redis's zset-max-listpack-entries
	zsetListpackValue   = 64  // Redis's zset-max-listpack-value
	// zsetMemberOverhead is a member's cost beside its bytes: its node
	// (levels averaging 4/3) and its map entry.
	zsetMemberOverhead = 104
)

func newZSetVal() *zset {
	return &zset{dict: make(map[string]*znode), lp: true}
}

func memberCost(m string) int64 { return int64(len(m)) + zsetMemberOverhead }

func (z *zset) len() int { return z.sl.length }

// lookup returns member's node, nil if it is not in the set.
func (z *zset) lookup(member []byte) *znode { return z.dict[string(member)] }

// store returns score as the set keeps it: a listpack writes -0 as 0.
func (z *zset) store(score float64) float64 {
	if z.lp && score == 0 {
		return 0
	}
	return score
}

// add inserts member, which is not in the set, with score.
func (z *zset) add(member []byte, score float64) {
	if z.lp && (z.sl.length+1 > zsetListpackEntries || len(member) > zsetListpackValue) {
		z.lp = false
	}
	m := string(member)
	z.dict[m] = z.sl.insert(z.store(score), m)
	z.size += memberCost(m)
}

// setScore moves the member of node x to score.
func (z *zset) setScore(x *znode, score float64) {
	x = z.sl.updateScore(x, z.store(score))
	z.dict[x.member] = x
}

// remove deletes the member of node x.
func (z *zset) remove(x *znode) {
	delete(z.dict, x.member)
	z.size -= memberCost(x.member)
	z.sl.remove(x)
}

// scoreRange is a range of scores, each end open or closed.
type scoreRange struct {
	min, max     float64
	minex, maxex bool
}

func (r *scoreRange) aboveMin(s float64) bool {
	if r.minex {
		return s > r.min
	}
	return s >= r.min
}

func (r *scoreRange) belowMax(s float64) bool {
	if r.maxex {
		return s < r.max
	}
	return s <= r.max
}

// empty reports whether no score can be in r.
func (r *scoreRange) empty() bool {
	return r.min > r.max || (r.min == r.max && (r.minex || r.maxex))
}

// firstIn returns the first node in r and its 1-based rank (nil if none).
func (z *zset) firstIn(r *scoreRange) (*znode, int) {
	if r.empty() {
		return nil, 0
	}
	x, rank := z.sl.firstFrom(func(n *znode) bool { return !r.aboveMin(n.score) })
	if x == nil || !r.belowMax(x.score) {
		return nil, 0
	}
	return x, rank
}

// lastIn returns the last node in r and its 1-based rank (nil if none).
func (z *zset) lastIn(r *scoreRange) (*znode, int) {
	if r.empty() {
		return nil, 0
	}
	x, rank := z.sl.firstFrom(func(n *znode) bool { return r.belowMax(n.score) })
	if rank--; rank == 0 {
		return nil, 0
	}
	if x == nil {
		x = z.sl.tail
	} else {
		x = x.backward
	}
	if !r.aboveMin(x.score) {
		return nil, 0
	}
	return x, rank
}

// count returns the number of members in r.
func (z *zset) count(r *scoreRange) int {
	_, first := z.firstIn(r)
	if first == 0 {
		return 0
	}
	_, last := z.lastIn(r)
	return last - first + 1
}

// removeRange removes the members in r and returns how many it removed.
func (z *zset) removeRange(r *scoreRange) int {
	if r.empty() || z.len() == 0 {
		return 0
	}
	var update [zMaxLevel]*znode
	z.sl.updateBefore(func(n *znode) bool { return !r.aboveMin(n.score) }, &update)
	return z.removeFrom(&update, func(x *znode) bool { return r.belowMax(x.score) })
}

// removeRanks removes the members of 1-based ranks start to end.
func (z *zset) removeRanks(start, end int) int {
	if z.len() == 0 {
		return 0
	}
	var update [zMaxLevel]*znode
	traversed := 0
	x := &z.sl.head
	for i := z.sl.level - 1; i >= 0; i-- {
		for x.lv[i].next != nil && traversed+x.lv[i].span < start {
			traversed += x.lv[i].span
			x = x.lv[i].next
		}
		update[i] = x
	}
	n := end - start + 1
	return z.removeFrom(&update, func(*znode) bool { n--; return n >= 0 })
}

// removeFrom removes, from the node after update[0], nodes while keep
// says so, and returns how many.
func (z *zset) removeFrom(update *[zMaxLevel]*znode, more func(*znode) bool) int {
	removed := 0
	x := update[0].lv0()
	for x != nil && more(x) {
		next := x.lv[0].next
		z.sl.unlink(x, update)
		delete(z.dict, x.member)
		z.size -= memberCost(x.member)
		z.sl.recycle(x)
		removed++
		x = next
	}
	return removed
}

// verify checks the skiplist, the map and the recorded size.
func (z *zset) verify() error {
	nodes, err := z.sl.verify()
	if err != nil {
		return err
	}
	if len(nodes) != len(z.dict) {
		return fmt.Errorf("values: zset of %d nodes maps %d members", len(nodes), len(z.dict))
	}
	var size int64
	for _, x := range nodes {
		if z.dict[x.member] != x {
			return fmt.Errorf("values: zset member %q maps elsewhere", x.member)
		}
		if math.IsNaN(x.score) {
			return fmt.Errorf("values: zset member %q has a NaN score", x.member)
		}
		if z.lp && (len(x.member) > zsetListpackValue || (x.score == 0 && math.Signbit(x.score))) {
			return fmt.Errorf("values: listpack zset member %q breaks the listpack's rules", x.member)
		}
		size += memberCost(x.member)
	}
	if z.lp && len(nodes) > zsetListpackEntries {
		return fmt.Errorf("values: listpack zset of %d members", len(nodes))
	}
	if size != z.size {
		return fmt.Errorf("values: zset members size %d, recorded %d", size, z.size)
	}
	return nil
}
