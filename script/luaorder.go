package script

import (
	"math"

	lua "github.com/yuin/gopher-lua"
)

// Iteration order as Lua 5.1 has it. A Lua 5.1 table keeps its integer
// keys in an array part and the others in a hash part whose layout comes
// from the keys' hashes, collisions and the history of the table's
// growth; next (and so pairs, cjson.encode's objects, map replies) walks
// the array part then the hash part's nodes in order. gopher-lua walks its
// keys in the order they were added. To give scripts Redis's order, the
// engine replays a table's keys, in the order gopher-lua has them (array
// keys first, then the others as they were added), into a model of Lua
// 5.1's table (ltable.c: main positions, the free pointer, rehash and
// computesizes; string hashes as Redis 7.0's lstring.c computes them) and
// reads the order off the model. The order is Redis's exactly for tables
// filled one key at a time from empty (as scripts, cjson.decode and reply
// conversions fill them); a table constructor with several hash keys
// presizes the table in Lua 5.1, so with colliding keys the order may
// differ. Tables with keys other than strings, numbers and booleans (whose
// hash is their address in Lua) keep gopher-lua's order.

// maxBits is MAXBITS: the array part holds keys up to 2^26.
const maxBits = 26

type lnode struct {
	key  lua.LValue
	next int // the next node of the chain, -1 for none
	used bool
}

// ltable is Lua 5.1's table, keys only.
type ltable struct {
	array    []bool
	nodes    []lnode // nil: the dummy node
	lastfree int
}

// tableHint is what a table constructor told Lua 5.1 to preallocate: na
// array slots and nh hash nodes (see compile.go), and its constant keys
// in the order it set them.
type tableHint struct {
	na, nh int
	keys   []lua.LValue
}

// luaOrder returns t's keys in Lua 5.1's iteration order, or false when
// it cannot tell (a key of another type). hint is the preallocation of a
// table made by a constructor, nil for one that grew from empty.
func luaOrder(t *lua.LTable, hint *tableHint) ([]lua.LValue, bool) {
	var ints, live []lua.LValue
	for k, _ := t.Next(lua.LNil); k != lua.LNil; k, _ = t.Next(k) {
		if !hashable(k) {
			return nil, false
		}
		live = append(live, k)
	}
	if len(live) < 2 {
		return live, true
	}
	for i := 1; i <= t.MaxN(); i++ {
		if t.RawGetInt(i) != lua.LNil {
			ints = append(ints, lua.LNumber(i))
		}
	}
	hashKeys, ok := tableKeys(t) // the dead ones too
	if !ok {
		hashKeys = live[len(ints):]
	}
	var m ltable
	replay := append(append([]lua.LValue(nil), ints...), hashKeys...)
	if hint != nil {
		// A constructor sets its hash fields as it reads them, and its
		// list items at its end, in a preallocated table: its constant
		// keys first, in order, then the others as gopher-lua has them.
		m.resize(fb2int(int2fb(hint.na)), fb2int(int2fb(hint.nh)))
		var listed []lua.LValue
		replay = append([]lua.LValue(nil), hint.keys...)
		for _, k := range ints {
			if int(k.(lua.LNumber)) <= hint.na {
				listed = append(listed, k)
			} else {
				replay = append(replay, k)
			}
		}
		replay = append(append(replay, hashKeys...), listed...)
	}
	for _, k := range replay {
		if !hashable(k) {
			return nil, false
		}
		if !m.has(k) {
			m.set(k)
		}
	}
	out := live[:0]
	for i, used := range m.array {
		if used && t.RawGetInt(i+1) != lua.LNil {
			out = append(out, lua.LNumber(i+1))
		}
	}
	for _, n := range m.nodes {
		if n.used && t.RawGet(n.key) != lua.LNil {
			out = append(out, n.key)
		}
	}
	return out, true
}

// hashable reports whether Lua 5.1 hashes k by its value.
func hashable(k lua.LValue) bool {
	switch k := k.(type) {
	case lua.LString, lua.LBool:
		return true
	case lua.LNumber:
		return k == k
	}
	return false
}

// has reports whether the model holds key k.
func (t *ltable) has(k lua.LValue) bool {
	if i, ok := arrayIndex(k); ok && i >= 1 && i <= len(t.array) {
		return t.array[i-1]
	}
	if len(t.nodes) == 0 {
		return false
	}
	for n := t.mainPosition(k); n >= 0; n = t.nodes[n].next {
		if t.nodes[n].used && t.nodes[n].key == k {
			return true
		}
	}
	return false
}

// int2fb and fb2int are luaO_int2fb and luaO_fb2int, the "floating point
// byte" a constructor's sizes are encoded in.
func int2fb(x int) int {
	e := 0
	for x >= 16 {
		x = (x + 1) >> 1
		e++
	}
	if x < 8 {
		return x
	}
	return (e+1)<<3 | (x - 8)
}

func fb2int(x int) int {
	e := (x >> 3) & 31
	if e == 0 {
		return x
	}
	return (x&7 + 8) << (e - 1)
}

// arrayIndex is arrayindex: k as an int, if it is an integer.
func arrayIndex(k lua.LValue) (int, bool) {
	n, ok := k.(lua.LNumber)
	if !ok || float64(n) != math.Trunc(float64(n)) || math.Abs(float64(n)) >= 1<<31 {
		return 0, false
	}
	return int(n), true
}

// set adds key k (not yet in the table), as luaH_set does.
func (t *ltable) set(k lua.LValue) {
	if i, ok := arrayIndex(k); ok && i >= 1 && i <= len(t.array) {
		t.array[i-1] = true
		return
	}
	t.newkey(k)
}

// mainPosition is mainposition.
func (t *ltable) mainPosition(k lua.LValue) int {
	size := len(t.nodes)
	switch k := k.(type) {
	case lua.LString:
		return int(luaStringHash(string(k)) & uint32(size-1))
	case lua.LBool:
		if k {
			return 1 & (size - 1)
		}
		return 0
	case lua.LNumber:
		if k == 0 {
			return 0
		}
		bits := math.Float64bits(float64(k))
		a := uint32(bits) + uint32(bits>>32)
		return int(a % uint32((size-1)|1))
	}
	return 0
}

// luaStringHash is Redis 7.0's luaS_newlstr hash (every byte hashed).
func luaStringHash(s string) uint32 {
	h := uint32(len(s))
	for l := len(s); l >= 1; l-- {
		h ^= (h << 5) + (h >> 2) + uint32(s[l-1])
	}
	return h
}

// newkey is newkey.
func (t *ltable) newkey(k lua.LValue) {
	if len(t.nodes) == 0 {
		t.rehash(k)
		t.set(k)
		return
	}
	mp := t.mainPosition(k)
	if t.nodes[mp].used {
		n := t.freePos()
		if n < 0 {
			t.rehash(k)
			t.set(k)
			return
		}
		other := t.mainPosition(t.nodes[mp].key)
		if other != mp {
			for t.nodes[other].next != mp {
				other = t.nodes[other].next
			}
			t.nodes[other].next = n
			t.nodes[n] = t.nodes[mp]
			t.nodes[mp] = lnode{next: -1}
		} else {
			t.nodes[n].next = t.nodes[mp].next
			t.nodes[mp].next = n
			mp = n
		}
	}
	t.nodes[mp].key, t.nodes[mp].used = k, true
}

// freePos is getfreepos.
func (t *ltable) freePos() int {
	for t.lastfree > 0 {
		t.lastfree--
		if !t.nodes[t.lastfree].used && t.nodes[t.lastfree].key == nil {
			return t.lastfree
		}
	}
	return -1
}

// ceilLog2 is ceillog2: the smallest l with 2^l >= x.
func ceilLog2(x int) int {
	l := 0
	for (1 << l) < x {
		l++
	}
	return l
}

// countInt is countint.
func countInt(k lua.LValue, nums *[maxBits + 1]int) int {
	if i, ok := arrayIndex(k); ok && i > 0 && i <= 1<<maxBits {
		nums[ceilLog2(i)]++
		return 1
	}
	return 0
}

// rehash is rehash, for the extra key ek.
func (t *ltable) rehash(ek lua.LValue) {
	var nums [maxBits + 1]int
	nasize := 0
	for i, used := range t.array {
		if used {
			nums[ceilLog2(i+1)]++
			nasize++
		}
	}
	total := nasize
	for _, n := range t.nodes {
		if n.used {
			nasize += countInt(n.key, &nums)
			total++
		}
	}
	nasize += countInt(ek, &nums)
	total++
	na := computeSizes(&nums, &nasize)
	t.resize(nasize, total-na)
}

// computeSizes is computesizes.
func computeSizes(nums *[maxBits + 1]int, narray *int) int {
	a, na, n := 0, 0, 0
	for i, twotoi := 0, 1; twotoi/2 < *narray; i, twotoi = i+1, twotoi*2 {
		if i > maxBits {
			break
		}
		if nums[i] > 0 {
			a += nums[i]
			if a > twotoi/2 {
				n, na = twotoi, a
			}
		}
		if a == *narray {
			break
		}
	}
	*narray = n
	return na
}

// resize is resize.
func (t *ltable) resize(nasize, nhsize int) {
	oldArray, oldNodes := t.array, t.nodes
	if nasize > len(oldArray) {
		t.array = append(append([]bool(nil), oldArray...), make([]bool, nasize-len(oldArray))...)
	}
	t.nodes, t.lastfree = nil, 0
	if nhsize > 0 {
		size := 1 << ceilLog2(nhsize)
		t.nodes = make([]lnode, size)
		for i := range t.nodes {
			t.nodes[i].next = -1
		}
		t.lastfree = size
	}
	if nasize < len(oldArray) {
		t.array = oldArray[:nasize:nasize]
		for i := nasize; i < len(oldArray); i++ {
			if oldArray[i] {
				t.set(lua.LNumber(i + 1))
			}
		}
	}
	for i := len(oldNodes) - 1; i >= 0; i-- {
		if oldNodes[i].used {
			t.set(oldNodes[i].key)
		}
	}
}
