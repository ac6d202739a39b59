package values

import (
	"fmt"
	"math/rand/v2"
)

// skiplist keeps a sorted set's members ordered by (score, member), with a
// span on every link (how many nodes it jumps) so that ranks are found in
// O(log n) too: the structure of William Pugh's paper, with the spans and
// backward links Redis adds to it. Nodes removed are kept on a short free
// list for the next insert, so a sliding log that adds one entry and
// trims one per request does not allocate nodes.
type skiplist struct {
	head   znode // sentinel: its links start every level
	tail   *znode
	length int
	level  int
	free   *znode // recycled nodes, linked by backward
	nfree  int
}

// znode is one member.
type znode struct {
	member   string
	score    float64
	backward *znode
	lv       []zlink
}

// zlink is a node's forward link on one level.
type zlink struct {
	next *znode
	span int // nodes from this one to next (to past the tail for nil)
}

const (
	zMaxLevel = 32
	zMaxFree  = 64
)

// randomLevel draws a level: 1, then one more with probability 1/4 each.
func randomLevel() int {
	l := 1
	for l < zMaxLevel && rand.Uint32()&3 == 0 {
		l++
	}
	return l
}

// zless reports whether (s1, m1) orders before (s2, m2).
func zless(s1 float64, m1 string, s2 float64, m2 string) bool {
	return s1 < s2 || (s1 == s2 && m1 < m2)
}

// newNode returns a node with lvl levels, recycled if one is free.
func (sl *skiplist) newNode(lvl int, score float64, member string) *znode {
	x := sl.free
	if x == nil {
		x = &znode{}
	} else {
		sl.free, sl.nfree = x.backward, sl.nfree-1
	}
	if cap(x.lv) >= lvl {
		x.lv = x.lv[:lvl]
		clear(x.lv)
	} else {
		x.lv = make([]zlink, lvl)
	}
	x.member, x.score, x.backward = member, score, nil
	return x
}

// recycle keeps a removed node for a later insert.
func (sl *skiplist) recycle(x *znode) {
	if sl.nfree >= zMaxFree {
		return
	}
	x.member = ""
	clear(x.lv)
	x.backward, sl.free = sl.free, x
	sl.nfree++
}

// insert adds (score, member), which must not be in the list, and returns
// its node.
func (sl *skiplist) insert(score float64, member string) *znode {
	var update [zMaxLevel]*znode
	var rank [zMaxLevel]int
	x := &sl.head
	for i := sl.level - 1; i >= 0; i-- {
		if i < sl.level-1 {
			rank[i] = rank[i+1]
		}
		for n := x.lv[i].next; n != nil && zless(n.score, n.member, score, member); n = x.lv[i].next {
			rank[i] += x.lv[i].span
			x = n
		}
		update[i] = x
	}
	lvl := randomLevel()
	if lvl > sl.level {
		for len(sl.head.lv) < lvl {
			sl.head.lv = append(sl.head.lv, zlink{})
		}
		for i := sl.level; i < lvl; i++ {
			rank[i] = 0
			update[i] = &sl.head
			update[i].lv[i].span = sl.length
		}
		sl.level = lvl
	}
	x = sl.newNode(lvl, score, member)
	for i := 0; i < lvl; i++ {
		x.lv[i].next = update[i].lv[i].next
		update[i].lv[i].next = x
		x.lv[i].span = update[i].lv[i].span - (rank[0] - rank[i])
		update[i].lv[i].span = rank[0] - rank[i] + 1
	}
	for i := lvl; i < sl.level; i++ {
		update[i].lv[i].span++
	}
	if update[0] != &sl.head {
		x.backward = update[0]
	}
	if x.lv[0].next != nil {
		x.lv[0].next.backward = x
	} else {
		sl.tail = x
	}
	sl.length++
	return x
}

// unlink removes x, given update: on each level, the last node before x.
func (sl *skiplist) unlink(x *znode, update *[zMaxLevel]*znode) {
	for i := 0; i < sl.level; i++ {
		if update[i].lv[i].next == x {
			update[i].lv[i].span += x.lv[i].span - 1
			update[i].lv[i].next = x.lv[i].next
		} else {
			update[i].lv[i].span--
		}
	}
	if x.lv[0].next != nil {
		x.lv[0].next.backward = x.backward
	} else {
		sl.tail = x.backward
	}
	for sl.level > 1 && sl.head.lv[sl.level-1].next == nil {
		sl.level--
	}
	sl.length--
}

// findUpdate fills update with, on each level, the last node ordering
// before (score, member).
func (sl *skiplist) findUpdate(score float64, member string, update *[zMaxLevel]*znode) {
	x := &sl.head
	for i := sl.level - 1; i >= 0; i-- {
		for n := x.lv[i].next; n != nil && zless(n.score, n.member, score, member); n = x.lv[i].next {
			x = n
		}
		update[i] = x
	}
}

// remove unlinks x (in the list) and recycles it.
func (sl *skiplist) remove(x *znode) {
	var update [zMaxLevel]*znode
	sl.findUpdate(x.score, x.member, &update)
	sl.unlink(x, &update)
	sl.recycle(x)
}

// updateScore moves x to score, in place when its neighbours allow it,
// and returns its node (x itself, relinked if it moved).
func (sl *skiplist) updateScore(x *znode, score float64) *znode {
	prev, next := x.backward, x.lv[0].next
	if (prev == nil || zless(prev.score, prev.member, score, x.member)) &&
		(next == nil || zless(score, x.member, next.score, next.member)) {
		x.score = score
		return x
	}
	member := x.member
	var update [zMaxLevel]*znode
	sl.findUpdate(x.score, member, &update)
	sl.unlink(x, &update)
	sl.recycle(x)
	return sl.insert(score, member)
}

// rank returns x's 1-based rank.
func (sl *skiplist) rank(x *znode) int {
	r := 0
	n := &sl.head
	for i := sl.level - 1; i >= 0; i-- {
		for f := n.lv[i].next; f != nil && !zless(x.score, x.member, f.score, f.member); f = n.lv[i].next {
			r += n.lv[i].span
			n = f
		}
		if n == x {
			return r
		}
	}
	return r
}

// byRank returns the node of 1-based rank r (1 <= r <= length).
func (sl *skiplist) byRank(r int) *znode {
	traversed := 0
	x := &sl.head
	for i := sl.level - 1; i >= 0; i-- {
		for x.lv[i].next != nil && traversed+x.lv[i].span <= r {
			traversed += x.lv[i].span
			x = x.lv[i].next
		}
		if traversed == r {
			return x
		}
	}
	return nil
}

// firstFrom returns the first node for which below is false, and its
// 1-based rank (nil and length+1 if none); below must be true for a
// prefix of the list and false after it.
func (sl *skiplist) firstFrom(below func(*znode) bool) (*znode, int) {
	r := 0
	x := &sl.head
	for i := sl.level - 1; i >= 0; i-- {
		for n := x.lv[i].next; n != nil && below(n); n = x.lv[i].next {
			r += x.lv[i].span
			x = n
		}
	}
	return x.lv0(), r + 1
}

// updateBefore fills update as findUpdate does, for the first node for
// which below is false.
func (sl *skiplist) updateBefore(below func(*znode) bool, update *[zMaxLevel]*znode) {
	x := &sl.head
	for i := sl.level - 1; i >= 0; i-- {
		for n := x.lv[i].next; n != nil && below(n); n = x.lv[i].next {
			x = n
		}
		update[i] = x
	}
}

// first returns the first node (nil for an empty list).
func (sl *skiplist) first() *znode { return sl.head.lv0() }

func (x *znode) lv0() *znode {
	if len(x.lv) == 0 {
		return nil
	}
	return x.lv[0].next
}

// verify checks order, backward links and spans, and returns the nodes.
func (sl *skiplist) verify() ([]*znode, error) {
	var nodes []*znode
	var prev *znode
	for x := sl.first(); x != nil; x = x.lv[0].next {
		if x.backward != prev {
			return nil, fmt.Errorf("values: zset member %q: wrong backward link", x.member)
		}
		if prev != nil && !zless(prev.score, prev.member, x.score, x.member) {
			return nil, fmt.Errorf("values: zset members %q and %q out of order", prev.member, x.member)
		}
		nodes, prev = append(nodes, x), x
	}
	if len(nodes) != sl.length || sl.tail != prev {
		return nil, fmt.Errorf("values: zset of %d nodes records %d", len(nodes), sl.length)
	}
	rank := make(map[*znode]int, len(nodes)+1)
	rank[&sl.head] = 0
	for i, x := range nodes {
		rank[x] = i + 1
	}
	for x := &sl.head; x != nil; x = x.lv0() {
		for i := 0; i < len(x.lv) && i < sl.level; i++ {
			n := x.lv[i].next // spans of nil links are never read
			if n != nil && x.lv[i].span != rank[n]-rank[x] {
				return nil, fmt.Errorf("values: zset span on level %d after rank %d is %d, want %d", i, rank[x], x.lv[i].span, rank[n]-rank[x])
			}
		}
	}
	return nodes, nil
}

// lastWhile returns the last node for which while is true, nil if none;
// while must be true for a prefix of the list and false after it.
func (sl *skiplist) lastWhile(while func(*znode) bool) *znode {
	x := &sl.head
	for i := sl.level - 1; i >= 0; i-- {
		for n := x.lv[i].next; n != nil && while(n); n = x.lv[i].next {
			x = n
		}
	}
	if x == &sl.head {
		return nil
	}
	return x
}
