package values

import (
	"fmt"
	"math"
	"slices"
)

// zset is a sorted set. While Redis would hold it as a listpack (lp: at
// most 128 members, none over 64 bytes) it is a slice of its members in
// (score, member) order, as compact as Redis's listpack and with no
// object per member for the garbage collector to visit: members are
// found by scanning it, as Redis scans a listpack, and ranks and score
// ranges by binary search. Past that it becomes, for good, a skiplist in
// (score, member) order and a map from member to node, for O(1) scores
// and O(log n) inserts, deletes, ranks and ranges.
type zset struct {
	ents []zent // the listpack form, while lp
	sl   skiplist
	dict map[string]*znode // the skiplist form's members, once !lp
	// lp is whether Redis would hold this set as a listpack. Redis then
	// stores a score of -0 as 0, and ranges by lex scan the members in
	// order.
	lp   bool
	size int64 // the members' share of the value's Size
}

// zent is a member and its score.
type zent struct {
	member string
	score  float64
}

const (
	zsetListpackEntries = 128 // Redis's zset-max-listpack-entries
	zsetListpackValue   = 64  // Redis's zset-max-listpack-value
	// zsetMemberOverhead is a member's cost beside its bytes: its node
	// (levels averaging 4/3) and its map entry. A listpack's member costs
	// less; the figure is kept for both, so that a set's Size does not
	// jump when it leaves the listpack.
	zsetMemberOverhead = 104
)

func newZSetVal() *zset {
	return &zset{lp: true}
}

func memberCost(m string) int64 { return int64(len(m)) + zsetMemberOverhead }

func (z *zset) len() int {
	if z.lp {
		return len(z.ents)
	}
	return z.sl.length
}

// find returns member's index in the listpack form, -1 if absent.
func (z *zset) find(member []byte) int {
	for i := range z.ents {
		if z.ents[i].member == string(member) {
			return i
		}
	}
	return -1
}

// zpos is where a member is: its index in the listpack form, or its node
// in the skiplist form.
type zpos struct {
	i int
	x *znode
}

// locate returns where member is and its score, and whether it is in the
// set.
func (z *zset) locate(member []byte) (zpos, float64, bool) {
	if z.lp {
		if i := z.find(member); i >= 0 {
			return zpos{i: i}, z.ents[i].score, true
		}
		return zpos{}, 0, false
	}
	if x := z.dict[string(member)]; x != nil {
		return zpos{x: x}, x.score, true
	}
	return zpos{}, 0, false
}

// score returns member's score, and whether it is in the set.
func (z *zset) score(member []byte) (float64, bool) {
	_, score, ok := z.locate(member)
	return score, ok
}

// rank returns member's 1-based rank, 0 if it is not in the set.
func (z *zset) rank(member []byte) int {
	if z.lp {
		return z.find(member) + 1
	}
	if x := z.dict[string(member)]; x != nil {
		return z.sl.rank(x)
	}
	return 0
}

// store returns score as the set keeps it: a listpack writes -0 as 0.
func (z *zset) store(score float64) float64 {
	if z.lp && score == 0 {
		return 0
	}
	return score
}

// search returns the index at which (score, member) goes in the listpack
// form: the number of members ordered before it.
func (z *zset) search(score float64, member string) int {
	lo, hi := 0, len(z.ents)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if e := &z.ents[mid]; zless(e.score, e.member, score, member) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// add inserts member, which is not in the set, with score.
func (z *zset) add(member []byte, score float64) {
	if z.lp && (len(z.ents)+1 > zsetListpackEntries || len(member) > zsetListpackValue) {
		z.toSkiplist()
	}
	m := string(member)
	z.size += memberCost(m)
	if !z.lp {
		z.dict[m] = z.sl.insert(score, m)
		return
	}
	score = z.store(score)
	z.ents = slices.Insert(z.ents, z.search(score, m), zent{m, score})
}

// toSkiplist moves the set from its listpack form to its skiplist form,
// for good.
func (z *zset) toSkiplist() {
	z.lp = false
	z.dict = make(map[string]*znode, len(z.ents)+1)
	for _, e := range z.ents {
		z.dict[e.member] = z.sl.insert(e.score, e.member)
	}
	z.ents = nil
}

// update moves the member at p (locate) to score.
func (z *zset) update(p zpos, score float64) {
	if !z.lp {
		x := z.sl.updateScore(p.x, score)
		z.dict[x.member] = x
		return
	}
	m := z.ents[p.i].member
	z.ents = slices.Delete(z.ents, p.i, p.i+1)
	score = z.store(score)
	z.ents = slices.Insert(z.ents, z.search(score, m), zent{m, score})
}

// remove deletes member and reports whether it was in the set.
func (z *zset) remove(member []byte) bool {
	p, _, ok := z.locate(member)
	if !ok {
		return false
	}
	if !z.lp {
		delete(z.dict, p.x.member)
		z.size -= memberCost(p.x.member)
		z.sl.remove(p.x)
		return true
	}
	z.size -= memberCost(z.ents[p.i].member)
	z.ents = slices.Delete(z.ents, p.i, p.i+1)
	return true
}

// each calls fn with every member and its score, in order.
func (z *zset) each(fn func(member string, score float64)) {
	if z.lp {
		for _, e := range z.ents {
			fn(e.member, e.score)
		}
		return
	}
	for x := z.sl.first(); x != nil; x = x.lv[0].next {
		fn(x.member, x.score)
	}
}

// at returns the member of 1-based rank r (1 to len).
func (z *zset) at(r int) zent {
	if z.lp {
		return z.ents[r-1]
	}
	x := z.sl.byRank(r)
	return zent{x.member, x.score}
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

// firstIn returns a cursor at the first member in r (rank 0 if none).
func (z *zset) firstIn(r *scoreRange) zcursor {
	none := zcursor{z: z}
	if r.empty() || z.len() == 0 {
		return none
	}
	if z.lp {
		i, _ := slices.BinarySearchFunc(z.ents, r, func(e zent, r *scoreRange) int {
			if r.aboveMin(e.score) {
				return 1
			}
			return -1
		})
		if i == len(z.ents) || !r.belowMax(z.ents[i].score) {
			return none
		}
		return zcursor{z: z, rank: i + 1}
	}
	x, rank := z.sl.firstFrom(func(n *znode) bool { return !r.aboveMin(n.score) })
	if x == nil || !r.belowMax(x.score) {
		return none
	}
	return zcursor{z: z, rank: rank, x: x}
}

// lastIn returns a cursor at the last member in r (rank 0 if none).
func (z *zset) lastIn(r *scoreRange) zcursor {
	none := zcursor{z: z}
	if r.empty() || z.len() == 0 {
		return none
	}
	if z.lp {
		rank, _ := slices.BinarySearchFunc(z.ents, r, func(e zent, r *scoreRange) int {
			if r.belowMax(e.score) {
				return -1
			}
			return 1
		})
		if rank == 0 || !r.aboveMin(z.ents[rank-1].score) {
			return none
		}
		return zcursor{z: z, rank: rank}
	}
	x, rank := z.sl.firstFrom(func(n *znode) bool { return r.belowMax(n.score) })
	if rank--; rank == 0 {
		return none
	}
	if x == nil {
		x = z.sl.tail
	} else {
		x = x.backward
	}
	if !r.aboveMin(x.score) {
		return none
	}
	return zcursor{z: z, rank: rank, x: x}
}

// count returns the number of members in r.
func (z *zset) count(r *scoreRange) int {
	first := z.firstIn(r).rank
	if first == 0 {
		return 0
	}
	return z.lastIn(r).rank - first + 1
}

// removeRange removes the members in r and returns how many it removed.
func (z *zset) removeRange(r *scoreRange) int {
	if r.empty() || z.len() == 0 {
		return 0
	}
	if z.lp {
		first := z.firstIn(r).rank
		if first == 0 {
			return 0
		}
		return z.removeRanks(first, z.lastIn(r).rank)
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
	if z.lp {
		for _, e := range z.ents[start-1 : end] {
			z.size -= memberCost(e.member)
		}
		z.ents = slices.Delete(z.ents, start-1, end)
		return end - start + 1
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

// verify checks the set's form (the listpack's order, or the skiplist and
// its map) and the recorded size.
func (z *zset) verify() error {
	var ents []zent
	if z.lp {
		if z.sl.length != 0 || z.dict != nil {
			return fmt.Errorf("values: listpack zset has a skiplist of %d", z.sl.length)
		}
		seen := make(map[string]bool, len(z.ents))
		for i, e := range z.ents {
			if i > 0 && !zless(z.ents[i-1].score, z.ents[i-1].member, e.score, e.member) {
				return fmt.Errorf("values: listpack zset member %q out of order", e.member)
			}
			if seen[e.member] {
				return fmt.Errorf("values: listpack zset member %q twice", e.member)
			}
			seen[e.member] = true
		}
		ents = z.ents
	} else {
		if z.ents != nil {
			return fmt.Errorf("values: skiplist zset keeps a listpack of %d", len(z.ents))
		}
		nodes, err := z.sl.verify()
		if err != nil {
			return err
		}
		if len(nodes) != len(z.dict) {
			return fmt.Errorf("values: zset of %d nodes maps %d members", len(nodes), len(z.dict))
		}
		for _, x := range nodes {
			if z.dict[x.member] != x {
				return fmt.Errorf("values: zset member %q maps elsewhere", x.member)
			}
			ents = append(ents, zent{x.member, x.score})
		}
	}
	var size int64
	for _, e := range ents {
		if math.IsNaN(e.score) {
			return fmt.Errorf("values: zset member %q has a NaN score", e.member)
		}
		if z.lp && (len(e.member) > zsetListpackValue || (e.score == 0 && math.Signbit(e.score))) {
			return fmt.Errorf("values: listpack zset member %q breaks the listpack's rules", e.member)
		}
		size += memberCost(e.member)
	}
	if z.lp && len(ents) > zsetListpackEntries {
		return fmt.Errorf("values: listpack zset of %d members", len(ents))
	}
	if size != z.size {
		return fmt.Errorf("values: zset members size %d, recorded %d", size, z.size)
	}
	return nil
}
