package script

import (
	"unsafe"

	lua "github.com/yuin/gopher-lua"
)

// Measuring a run's memory. Go cannot say how much one goroutine has
// allocated, so the hook measures what the run's Lua values hold: it walks
// everything reachable from the run's value stack (every frame's
// registers, and so the functions running and their upvalues), KEYS and
// ARGV, counting each table, string, function and coroutine once, with
// Go's sizes for them. The libraries and the read-only globals are the
// state's, not the run's, and are not counted. The walk runs on the run's
// goroutine, between two instructions, so the values hold still.

// Approximate sizes of gopher-lua's objects, in bytes.
const (
	sizeValue  = 16       // an LValue slot: an array entry, a register
	sizeEntry  = 64       // a hash entry: map slot, key slice entry, index
	sizeTable  = 96       // an LTable
	sizeString = 16       // a string header, besides its bytes
	sizeFunc   = 96       // an LFunction
	sizeThread = 32 << 10 // a coroutine's LState with its stacks
	bigString  = 256      // strings at least this long are counted once
)

// walker counts the bytes reachable from a set of roots.
type walker struct {
	st    *state
	seen  map[any]struct{}
	strs  map[*byte]struct{}
	todo  []lua.LValue
	total int64
	limit int64
}

// size measures the run on st, stopping early past limit.
func (st *state) size(limit int64) int64 {
	w := &st.walker
	if w.seen == nil {
		w.st, w.seen, w.strs = st, map[any]struct{}{}, map[*byte]struct{}{}
	}
	w.total, w.limit = 0, limit
	w.add(st.keys)
	w.add(st.argv)
	w.thread(st.L)
	w.drain()
	clear(w.seen)
	clear(w.strs)
	clear(w.todo)
	w.todo = w.todo[:0]
	return w.total
}

// thread adds the roots of a Lua thread: its value stack, which holds
// every frame's registers (and the functions the frames run).
func (w *walker) thread(L *lua.LState) {
	if vals, ok := registryValues(L); ok {
		for _, v := range vals {
			w.add(v)
		}
		return
	}
	for level := 0; level < 64; level++ {
		dbg, ok := L.GetStack(level)
		if !ok {
			break
		}
		if fn, err := L.GetInfo("f", dbg, lua.LNil); err == nil {
			w.add(fn)
		}
		for n := 1; ; n++ {
			name, v := L.GetLocal(dbg, n)
			if name == "" {
				break
			}
			w.add(v)
		}
	}
	for i := 1; i <= L.GetTop(); i++ {
		w.add(L.Get(i))
	}
}

// add counts v, and queues what it refers to.
func (w *walker) add(v lua.LValue) {
	switch v := v.(type) {
	case lua.LString:
		if len(v) >= bigString {
			p := unsafe.StringData(string(v))
			if _, ok := w.strs[p]; ok {
				return
			}
			w.strs[p] = struct{}{}
		}
		w.total += sizeString + int64(len(v))
	case *lua.LTable, *lua.LFunction, *lua.LUserData, *lua.LState:
		if _, ok := w.seen[v]; ok {
			return
		}
		if t, ok := v.(*lua.LTable); ok && (w.st.readonly(t) || t == w.st.globals) {
			return
		}
		w.seen[v] = struct{}{}
		w.todo = append(w.todo, v)
	}
}

// drain walks the queue until it is empty or the limit is passed.
func (w *walker) drain() {
	for len(w.todo) > 0 && w.total <= w.limit {
		v := w.todo[len(w.todo)-1]
		w.todo = w.todo[:len(w.todo)-1]
		switch v := v.(type) {
		case *lua.LTable:
			w.table(v)
		case *lua.LFunction:
			w.total += sizeFunc
			if !v.IsG {
				for _, uv := range v.Upvalues {
					w.add(uv.Value())
				}
			}
		case *lua.LUserData:
			w.total += sizeTable
			w.add(v.Metatable)
		case *lua.LState:
			w.total += sizeThread
			if v != w.st.L {
				w.thread(v)
			}
		}
	}
}

// table counts a table's slots and queues its keys, values and metatable.
func (w *walker) table(t *lua.LTable) {
	n := t.MaxN()
	w.total += sizeTable + arrayCap(n)*sizeValue
	t.ForEach(func(k, v lua.LValue) {
		if kn, ok := k.(lua.LNumber); !ok || float64(kn) != float64(int(kn)) || int(kn) < 1 || int(kn) > n {
			w.total += sizeEntry
			w.add(k)
		}
		w.add(v)
	})
	w.add(t.Metatable)
}

// arrayCap is about the capacity of an array part holding n values:
// gopher-lua starts it at 32 slots and doubles it as it grows.
func arrayCap(n int) int64 {
	if n == 0 {
		return 0
	}
	c := int64(32)
	for c < int64(n) {
		c *= 2
	}
	return c
}
