package script

import (
	"math"
	"strings"
	"sync"

	lua "github.com/yuin/gopher-lua"
)

// The table, math and coroutine libraries where gopher-lua differs from
// Lua 5.1: table.sort is Lua 5.1's quicksort (equal elements end where
// Redis puts them), table functions refuse the read-only tables and
// table.concat formats numbers "%.14g"; math.huge is infinite and
// math.random is Redis's (see lrand48); a coroutine runs under the hook.

func (st *state) openTable() {
	lib := st.globals.RawGetString("table").(*lua.LTable)
	L := st.L
	set := func(name string, fn lua.LGFunction) { lib.RawSetString(name, L.NewFunction(fn)) }
	set("insert", st.tabInsert)
	set("remove", st.tabRemove)
	set("sort", st.tabSort)
	set("concat", st.tabConcat)
	set("getn", func(L *lua.LState) int {
		L.Push(lua.LNumber(checkTable(L, 1, "getn").Len()))
		return 1
	})
	set("maxn", tabMaxn)
	set("setn", func(L *lua.LState) int {
		L.RaiseError("'setn' is obsolete")
		return 0
	})
	set("foreach", st.tabForeach)
	set("foreachi", tabForeachi)
}

// writable returns the table argument 1 of a function that changes it.
func (st *state) writable(L *lua.LState, fn string) *lua.LTable {
	t := checkTable(L, 1, fn)
	if st.readonly(t) {
		raiseReadonly(L)
	}
	return t
}

func (st *state) tabInsert(L *lua.LState) int {
	t := st.writable(L, "insert")
	e := t.Len() + 1
	pos := e
	switch L.GetTop() {
	case 2:
	case 3:
		pos = checkInt(L, 2, "insert")
		if pos > e {
			e = pos
		}
		for i := e; i > pos; i-- {
			t.RawSetInt(i, t.RawGetInt(i-1))
		}
	default:
		L.RaiseError("wrong number of arguments to 'insert'")
	}
	t.RawSetInt(pos, L.Get(L.GetTop()))
	return 0
}

func (st *state) tabRemove(L *lua.LState) int {
	t := st.writable(L, "remove")
	e := t.Len()
	pos := optInt(L, 2, "remove", e)
	if pos < 1 || pos > e {
		return 0
	}
	v := t.RawGetInt(pos)
	for ; pos < e; pos++ {
		t.RawSetInt(pos, t.RawGetInt(pos+1))
	}
	t.RawSetInt(e, lua.LNil)
	L.Push(v)
	return 1
}

func (st *state) tabConcat(L *lua.LState) int {
	sep := optString(L, 2, "concat", "")
	t := checkTable(L, 1, "concat")
	i := optInt(L, 3, "concat", 1)
	last := 0
	if L.Get(4) == lua.LNil {
		last = t.Len()
	} else {
		last = checkInt(L, 4, "concat")
	}
	size := 0
	for k := i; k <= last; k++ {
		v := t.RawGetInt(k)
		s, ok := toStringy(v)
		if !ok {
			L.RaiseError("invalid value (%s) at index %d in table for 'concat'", v.Type().String(), k)
		}
		size += len(s) + len(sep)
		st.raiseMemory(L, size)
	}
	var b strings.Builder
	b.Grow(size)
	for k := i; k <= last; k++ {
		s, _ := toStringy(t.RawGetInt(k))
		b.WriteString(s)
		if k < last {
			b.WriteString(sep)
		}
	}
	L.Push(lua.LString(b.String()))
	return 1
}

func tabMaxn(L *lua.LState) int {
	t := checkTable(L, 1, "maxn")
	max := 0.0
	for k, _ := t.Next(lua.LNil); k != lua.LNil; k, _ = t.Next(k) {
		if n, ok := k.(lua.LNumber); ok && float64(n) > max {
			max = float64(n)
		}
	}
	L.Push(lua.LNumber(max))
	return 1
}

func (st *state) tabForeach(L *lua.LState) int {
	t := st.contents(checkTable(L, 1, "foreach"))
	fn := L.Get(2)
	if fn.Type() != lua.LTFunction {
		typeError(L, 2, "foreach", "function")
	}
	for _, k := range st.keysInOrder(t) {
		v := t.RawGet(k)
		if v == lua.LNil {
			continue
		}
		L.Push(fn)
		L.Push(k)
		L.Push(v)
		L.Call(2, 1)
		if r := L.Get(-1); r != lua.LNil {
			return 1
		}
		L.Pop(1)
	}
	return 0
}

func tabForeachi(L *lua.LState) int {
	t := checkTable(L, 1, "foreachi")
	fn := L.Get(2)
	if fn.Type() != lua.LTFunction {
		typeError(L, 2, "foreachi", "function")
	}
	n := t.Len()
	for i := 1; i <= n; i++ {
		L.Push(fn)
		L.Push(lua.LNumber(i))
		L.Push(t.RawGetInt(i))
		L.Call(2, 1)
		if r := L.Get(-1); r != lua.LNil {
			return 1
		}
		L.Pop(1)
	}
	return 0
}

// sorter is Lua 5.1's auxsort over a table.
type sorter struct {
	L  *lua.LState
	t  *lua.LTable
	fn lua.LValue // the order function, nil for <
}

func (st *state) tabSort(L *lua.LState) int {
	t := st.writable(L, "sort")
	n := t.Len()
	s := sorter{L: L, t: t}
	if fn := L.Get(2); fn != lua.LNil {
		if fn.Type() != lua.LTFunction {
			typeError(L, 2, "sort", "function")
		}
		s.fn = fn
	}
	s.sort(1, n)
	return 0
}

func (s *sorter) less(a, b lua.LValue) bool {
	if s.fn == nil {
		return lessThan(s.L, a, b)
	}
	s.L.Push(s.fn)
	s.L.Push(a)
	s.L.Push(b)
	s.L.Call(2, 1)
	r := lua.LVAsBool(s.L.Get(-1))
	s.L.Pop(1)
	return r
}

func (s *sorter) get(i int) lua.LValue    { return s.t.RawGetInt(i) }
func (s *sorter) set(i int, v lua.LValue) { s.t.RawSetInt(i, v) }

func (s *sorter) sort(l, u int) {
	for l < u {
		if a, b := s.get(l), s.get(u); s.less(b, a) {
			s.set(l, b)
			s.set(u, a)
		}
		if u-l == 1 {
			return
		}
		i := (l + u) / 2
		if ai, al := s.get(i), s.get(l); s.less(ai, al) {
			s.set(i, al)
			s.set(l, ai)
		} else if au := s.get(u); s.less(au, ai) {
			s.set(i, au)
			s.set(u, ai)
		}
		if u-l == 2 {
			return
		}
		p := s.get(i)
		s.set(i, s.get(u-1))
		s.set(u-1, p)
		i = s.partition(l, u, p)
		if i-l < u-i {
			s.sort(l, i-1)
			l = i + 1
		} else {
			s.sort(i+1, u)
			u = i - 1
		}
	}
}

// partition moves what is below the pivot p (at u-1) to its left and
// returns the pivot's place.
func (s *sorter) partition(l, u int, p lua.LValue) int {
	i, j := l, u-1
	for {
		var ai, aj lua.LValue
		for {
			i++
			ai = s.get(i)
			if !s.less(ai, p) {
				break
			}
			if i > u {
				s.L.RaiseError("invalid order function for sorting")
			}
		}
		for {
			j--
			aj = s.get(j)
			if !s.less(p, aj) {
				break
			}
			if j < l {
				s.L.RaiseError("invalid order function for sorting")
			}
		}
		if j < i {
			break
		}
		s.set(i, aj)
		s.set(j, ai)
	}
	s.set(u-1, s.get(i))
	s.set(i, p)
	return i
}

// lessThan is Lua 5.1's a < b.
func lessThan(L *lua.LState, a, b lua.LValue) bool {
	switch a := a.(type) {
	case lua.LNumber:
		if b, ok := b.(lua.LNumber); ok {
			return a < b
		}
	case lua.LString:
		if b, ok := b.(lua.LString); ok {
			return a < b
		}
	}
	if a.Type() == b.Type() {
		mm := L.GetMetaField(a, "__lt")
		if mm != lua.LNil && lua.LVAsBool(mm) {
			L.Push(mm)
			L.Push(a)
			L.Push(b)
			L.Call(2, 1)
			r := lua.LVAsBool(L.Get(-1))
			L.Pop(1)
			return r
		}
	}
	orderError(L, a, b)
	return false
}

// orderError is luaG_ordererror.
func orderError(L *lua.LState, a, b lua.LValue) {
	t1, t2 := a.Type().String(), b.Type().String()
	if t1[2] == t2[2] {
		runError(L, "attempt to compare two %s values", t1)
	}
	runError(L, "attempt to compare %s with %s", t1, t2)
}

// lrand48 is Redis's math.random generator (rand.c): the 48-bit linear
// congruential generator of lrand48, one per server, seeded by
// math.randomseed. Safe for concurrent use.
type lrand48 struct {
	mu sync.Mutex
	x  uint64
}

const (
	lrandA    = 0x5DEECE66D
	lrandC    = 0xB
	lrandMask = 1<<48 - 1
	lrandMax  = 2147483647 // REDIS_LRAND48_MAX
)

// reset is the state before any seed (X0, X1, X2 of rand.c).
func (r *lrand48) reset() {
	r.mu.Lock()
	r.x = 0x1234ABCD330E
	r.mu.Unlock()
}

// seed is redisSrand48.
func (r *lrand48) seed(s int32) {
	r.mu.Lock()
	r.x = 0x330E | uint64(uint16(s))<<16 | uint64(uint16(uint32(s)>>16))<<32
	r.mu.Unlock()
}

// next is redisLrand48.
func (r *lrand48) next() int32 {
	r.mu.Lock()
	r.x = (lrandA*r.x + lrandC) & lrandMask
	v := int32(r.x >> 17)
	r.mu.Unlock()
	return v
}

func (st *state) openMath() {
	lib := st.globals.RawGetString("math").(*lua.LTable)
	L := st.L
	wrapChecked(L, lib, mathSpecs)
	lib.RawSetString("huge", lua.LNumber(math.Inf(1)))
	lib.RawSetString("random", L.NewFunction(st.mathRandom))
	lib.RawSetString("randomseed", L.NewFunction(func(L *lua.LState) int {
		st.e.rand.seed(int32(checkInt(L, 1, "randomseed")))
		return 0
	}))
}

func (st *state) mathRandom(L *lua.LState) int {
	r := float64(st.e.rand.next()%lrandMax) / lrandMax
	switch L.GetTop() {
	case 0:
		L.Push(lua.LNumber(r))
	case 1:
		u := int32(checkInt(L, 1, "random"))
		if u < 1 {
			argError(L, 1, "random", "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(r*float64(u)) + 1))
	case 2:
		l := int32(checkInt(L, 1, "random"))
		u := int32(checkInt(L, 2, "random"))
		if l > u {
			argError(L, 2, "random", "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(r*(float64(u)-float64(l)+1)) + float64(l)))
	default:
		L.RaiseError("wrong number of arguments")
	}
	return 1
}

// openCoroutine makes coroutines run under the state's hook, so that the
// time limit, SCRIPT KILL and the memory limit reach into them.
func (st *state) openCoroutine() {
	lib := st.globals.RawGetString("coroutine").(*lua.LTable)
	L := st.L
	create := lib.RawGetString("create").(*lua.LFunction).GFunction
	resume := lib.RawGetString("resume").(*lua.LFunction).GFunction
	newThread := func(L *lua.LState) *lua.LState {
		if fn, ok := L.Get(1).(*lua.LFunction); !ok || fn.IsG {
			argError(L, 1, "create", "Lua function expected")
		}
		L.SetTop(1)
		create(L)
		th := L.Get(-1).(*lua.LState)
		th.SetContext(&st.hook)
		return th
	}
	for _, name := range []string{"resume", "status"} {
		f := lib.RawGetString(name).(*lua.LFunction).GFunction
		name := name
		lib.RawSetString(name, L.NewFunction(func(L *lua.LState) int {
			if _, ok := L.Get(1).(*lua.LState); !ok {
				argError(L, 1, name, "coroutine expected")
			}
			return f(L)
		}))
	}
	lib.RawSetString("create", L.NewFunction(func(L *lua.LState) int {
		newThread(L)
		return 1
	}))
	lib.RawSetString("wrap", L.NewFunction(func(L *lua.LState) int {
		th := newThread(L)
		L.Push(L.NewFunction(func(L *lua.LState) int {
			L.Insert(th, 1)
			n := resume(L)
			top := L.GetTop()
			if !lua.LVAsBool(L.Get(top - n + 1)) {
				msg := L.Get(top)
				if s, ok := toStringy(msg); ok {
					if where := where(L, 1); where != "" {
						msg = lua.LString(where + " " + s)
					}
				}
				L.Error(msg, 0)
			}
			return n - 1
		}))
		return 1
	}))
}
