package script

import (
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// The base library as Lua 5.1 has it where gopher-lua differs: number
// formatting ("%.14g"), tonumber's C conversions, error's levels, Redis's
// pcall, a collectgarbage that never stops the Go world, and the functions
// that must see through the sandbox's proxies.

// maxUnpack is about how many values Lua 5.1 can push at once
// (LUAI_MAXCSTACK): unpack and string.byte refuse more.
const maxUnpack = 7999

func (st *state) openBase() {
	L, g := st.L, st.globals
	g.RawSetString(tableName, L.NewFunction(st.tableHint))
	set := func(name string, fn lua.LGFunction) { g.RawSetString(name, L.NewFunction(fn)) }
	set("tostring", luaTostring)
	set("tonumber", luaTonumber)
	set("error", luaError)
	set("pcall", st.pcall)
	set("xpcall", st.xpcall)
	set("unpack", luaUnpack)
	set("collectgarbage", st.collectgarbage)
	set("gcinfo", st.gcinfo)
	set("loadstring", st.loadstring)
	set("load", st.load)
	set("rawget", st.rawget)
	set("rawset", st.rawset)
	set("select", luaSelect)
	ipairsAux := L.NewFunction(func(L *lua.LState) int {
		t := checkTable(L, 1, "ipairs")
		i := checkInt(L, 2, "ipairs") + 1
		v := t.RawGetInt(i)
		if v == lua.LNil {
			return 0
		}
		L.Push(lua.LNumber(i))
		L.Push(v)
		return 2
	})
	set("ipairs", func(L *lua.LState) int {
		checkTable(L, 1, "ipairs")
		L.Push(ipairsAux)
		L.Push(L.Get(1))
		L.Push(lua.LNumber(0))
		return 3
	})
	wrapChecked(L, g, baseSpecs)
	set("setmetatable", st.setmetatable)
	set("getmetatable", st.getmetatable)
	next := L.NewFunction(st.next)
	g.RawSetString("next", next)
	g.RawSetString("pairs", L.NewFunction(func(L *lua.LState) int {
		checkTable(L, 1, "pairs")
		L.Push(next)
		L.Push(L.Get(1))
		L.Push(lua.LNil)
		return 3
	}))
}

// typeError raises "bad argument #n to 'fn' (want expected, got type)".
func typeError(L *lua.LState, n int, fn, want string) {
	got := "no value"
	if n <= L.GetTop() {
		got = L.Get(n).Type().String()
	}
	argError(L, n, fn, want+" expected, got "+got)
}

// checkAny is luaL_checkany.
func checkAny(L *lua.LState, n int, fn string) lua.LValue {
	if n > L.GetTop() {
		argError(L, n, fn, "value expected")
	}
	return L.Get(n)
}

// checkTable is luaL_checktype(L, n, LUA_TTABLE).
func checkTable(L *lua.LState, n int, fn string) *lua.LTable {
	tb, ok := L.Get(n).(*lua.LTable)
	if !ok {
		typeError(L, n, fn, "table")
	}
	return tb
}

// checkNumber is luaL_checknumber: a number, or a string that converts.
func checkNumber(L *lua.LState, n int, fn string) float64 {
	switch v := L.Get(n).(type) {
	case lua.LNumber:
		return float64(v)
	case lua.LString:
		if f, ok := str2number(string(v)); ok {
			return f
		}
	}
	typeError(L, n, fn, "number")
	return 0
}

// optNumber is luaL_optnumber.
func optNumber(L *lua.LState, n int, fn string, def float64) float64 {
	if L.Get(n) == lua.LNil {
		return def
	}
	return checkNumber(L, n, fn)
}

// checkInt is luaL_checkint: the number truncated as C casts it.
func checkInt(L *lua.LState, n int, fn string) int {
	return int(toInteger(checkNumber(L, n, fn)))
}

// optInt is luaL_optint.
func optInt(L *lua.LState, n int, fn string, def int) int {
	if L.Get(n) == lua.LNil {
		return def
	}
	return checkInt(L, n, fn)
}

// checkString is luaL_checklstring: a string, or a number as "%.14g".
func checkString(L *lua.LState, n int, fn string) string {
	switch v := L.Get(n).(type) {
	case lua.LString:
		return string(v)
	case lua.LNumber:
		return fmtNumber(float64(v))
	}
	typeError(L, n, fn, "string")
	return ""
}

// optString is luaL_optlstring.
func optString(L *lua.LState, n int, fn, def string) string {
	if L.Get(n) == lua.LNil {
		return def
	}
	return checkString(L, n, fn)
}

// tostring is Lua 5.1's conversion of a value to a string, as tostring
// does it (without __tostring).
func tostring(L *lua.LState, v lua.LValue) string {
	if n, ok := v.(lua.LNumber); ok {
		return fmtNumber(float64(n))
	}
	return L.ToStringMeta(v).String()
}

// toStringy converts v as lua_tolstring does: strings and numbers only.
func toStringy(v lua.LValue) (string, bool) {
	switch v := v.(type) {
	case lua.LString:
		return string(v), true
	case lua.LNumber:
		return fmtNumber(float64(v)), true
	}
	return "", false
}

func luaTostring(L *lua.LState) int {
	v := checkAny(L, 1, "tostring")
	if n, ok := v.(lua.LNumber); ok {
		L.Push(lua.LString(fmtNumber(float64(n))))
		return 1
	}
	L.Push(L.ToStringMeta(v))
	return 1
}

func luaTonumber(L *lua.LState) int {
	base := optInt(L, 2, "tonumber", 10)
	if base == 10 {
		switch v := checkAny(L, 1, "tonumber").(type) {
		case lua.LNumber:
			L.Push(v)
			return 1
		case lua.LString:
			if f, ok := str2number(string(v)); ok {
				L.Push(lua.LNumber(f))
				return 1
			}
		}
		L.Push(lua.LNil)
		return 1
	}
	s := checkString(L, 1, "tonumber")
	if base < 2 || base > 36 {
		argError(L, 2, "tonumber", "base out of range")
	}
	if n, ok := strtoulAll(s, base); ok {
		L.Push(lua.LNumber(n))
		return 1
	}
	L.Push(lua.LNil)
	return 1
}

// luaError is Lua 5.1's error: a string or number message gets the
// position of the level-th caller.
func luaError(L *lua.LState) int {
	level := optInt(L, 2, "error", 1)
	v := L.Get(1)
	if s, ok := toStringy(v); ok && level > 0 {
		if where := where(L, level); where != "" {
			s = where + " " + s
		}
		v = lua.LString(s)
	}
	L.Error(v, 0)
	return 0
}

// luaPcall is Redis's pcall: Lua's, but an error that is a table with an
// err field ({err="ERR ..."}, as redis.call raises) is returned as that
// field's string.
func (st *state) pcall(L *lua.LState) int {
	if L.GetTop() == 0 {
		L.Push(lua.LTrue) // Redis's pcall calls the true it pushed
	}
	if fn := L.Get(1); fn.Type() != lua.LTFunction && L.GetMetaField(fn, "__call").Type() != lua.LTFunction {
		L.SetTop(0)
		L.Push(lua.LFalse)
		L.Push(lua.LString("attempt to call a " + fn.Type().String() + " value"))
		return 2
	}
	if err := L.PCall(L.GetTop()-1, lua.MultRet, st.reword); err != nil {
		obj := overflowMessage(errorObject(err), st.hook.line)
		if tb, ok := obj.(*lua.LTable); ok {
			if e := L.GetField(tb, "err"); e.Type() == lua.LTString || e.Type() == lua.LTNumber {
				obj = e
			}
		}
		L.Push(lua.LFalse)
		L.Push(obj)
		return 2
	}
	L.Insert(lua.LTrue, 1)
	return L.GetTop()
}

// rewordError is the handler pcall and xpcall run under: an error the
// interpreter raised gets Lua 5.1's wording (luamsg.go), while the frames
// that tell which variable failed are still there.
func (st *state) rewordError(L *lua.LState) int {
	obj := L.Get(1)
	if s, ok := obj.(lua.LString); ok {
		obj = lua.LString(st.luaMessage(L, string(s)))
	}
	L.Push(obj)
	return 1
}

// xpcall is Lua 5.1's xpcall, its handler given Lua 5.1's wording.
func (st *state) xpcall(L *lua.LState) int {
	checkAny(L, 2, "xpcall")
	fn, handler := L.Get(1), L.Get(2)
	L.SetTop(0)
	reword := L.NewFunction(func(L *lua.LState) int {
		obj := L.Get(1)
		if s, ok := obj.(lua.LString); ok {
			obj = lua.LString(st.luaMessage(L, string(s)))
		}
		L.Push(handler)
		L.Push(obj)
		L.Call(1, 1)
		return 1
	})
	L.Push(fn)
	if err := L.PCall(0, lua.MultRet, reword); err != nil {
		L.Push(lua.LFalse)
		L.Push(errorObject(err))
		return 2
	}
	L.Insert(lua.LTrue, 1)
	return L.GetTop()
}

// errorObject returns the Lua value an error carries.
func errorObject(err error) lua.LValue {
	if aerr, ok := err.(*lua.ApiError); ok {
		return aerr.Object
	}
	return lua.LString(err.Error())
}

func luaUnpack(L *lua.LState) int {
	tb := checkTable(L, 1, "unpack")
	i := optInt(L, 2, "unpack", 1)
	e := 0
	if L.Get(3) == lua.LNil {
		e = tb.Len()
	} else {
		e = checkInt(L, 3, "unpack")
	}
	if i > e {
		return 0
	}
	n := e - i + 1
	if n <= 0 || n > maxUnpack {
		L.RaiseError("too many results to unpack")
	}
	for k := i; k <= e; k++ {
		L.Push(tb.RawGetInt(k))
	}
	return n
}

// luaSelect is Lua 5.1's select.
func luaSelect(L *lua.LState) int {
	n := L.GetTop()
	if s, ok := L.Get(1).(lua.LString); ok && s == "#" {
		L.Push(lua.LNumber(n - 1))
		return 1
	}
	i := checkInt(L, 1, "select")
	if i < 0 {
		i = n + i
	} else if i > n {
		i = n
	}
	if i < 1 {
		argError(L, 1, "select", "index out of range")
	}
	return n - i
}

// collectgarbage never collects: Go's collector serves every run at once,
// and a script must not be able to stop the server's world. It answers
// with the figures Lua's would have.
func (st *state) collectgarbage(L *lua.LState) int {
	opt := optString(L, 1, "collectgarbage", "collect")
	switch opt {
	case "count":
		L.Push(lua.LNumber(float64(st.hook.lastSize) / 1024))
	case "step":
		L.Push(lua.LTrue)
	case "setpause", "setstepmul":
		L.Push(lua.LNumber(200))
	case "stop", "restart", "collect":
		L.Push(lua.LNumber(0))
	default:
		argError(L, 1, "collectgarbage", "invalid option '"+opt+"'")
	}
	return 1
}

func (st *state) gcinfo(L *lua.LState) int {
	L.Push(lua.LNumber(st.hook.lastSize / 1024))
	return 1
}

// loadstring compiles a chunk at run time, as the script's own body is
// compiled, with the script's globals.
func (st *state) loadstring(L *lua.LState) int {
	s := checkString(L, 1, "loadstring")
	return st.loadChunk(L, s, optString(L, 2, "loadstring", s))
}

// load is loadstring over the pieces a function returns.
func (st *state) load(L *lua.LState) int {
	fn, ok := L.Get(1).(*lua.LFunction)
	if !ok {
		typeError(L, 1, "load", "function")
	}
	name := optString(L, 2, "load", "=(load)")
	var b strings.Builder
	for {
		L.Push(fn)
		L.Call(0, 1)
		piece := L.Get(-1)
		L.Pop(1)
		if piece == lua.LNil {
			break
		}
		s, ok := piece.(lua.LString)
		if !ok {
			L.Push(lua.LNil)
			L.Push(lua.LString("reader function must return a string"))
			return 2
		}
		if len(s) == 0 {
			break
		}
		if err := st.hook.checkString(b.Len() + len(s)); err != "" {
			L.RaiseError("%s", err)
		}
		b.WriteString(string(s))
	}
	return st.loadChunk(L, b.String(), name)
}

// loadChunk compiles code named chunkname and pushes the function, or nil
// and the message.
func (st *state) loadChunk(L *lua.LState, code, chunkname string) int {
	proto, msg := compileChunk([]byte(code), chunkname, st.e.maxTokens())
	if proto == nil {
		L.Push(lua.LNil)
		L.Push(lua.LString(msg))
		return 2
	}
	fn := L.NewFunctionFromProto(proto)
	fn.Env = st.env
	L.Push(fn)
	return 1
}

// tableHint records what the constructor of a table (argument 3) told
// Lua 5.1 to preallocate, and returns the table (see compile.go).
func (st *state) tableHint(L *lua.LState) int {
	t := L.Get(3)
	if tb, ok := t.(*lua.LTable); ok {
		if st.hints == nil {
			st.hints = map[*lua.LTable]*tableHint{}
		}
		h := &tableHint{na: int(lua.LVAsNumber(L.Get(1))), nh: int(lua.LVAsNumber(L.Get(2)))}
		for i := 4; i <= L.GetTop(); i++ {
			if k := L.Get(i); k != lua.LNil {
				h.keys = append(h.keys, k)
			}
		}
		st.hints[tb] = h
	}
	L.Push(t)
	return 1
}

// traversal is a next traversal of a table in Lua 5.1's order.
type traversal struct {
	keys []lua.LValue
	pos  int // the key next returned last
}

// next is Lua's next, in Lua 5.1's order (luaorder.go) when it can tell
// it: next(t, nil) computes the order of t's keys, and the calls that
// follow walk it.
func (st *state) next(L *lua.LState) int {
	tb := st.contents(checkTable(L, 1, "next"))
	k := L.Get(2)
	if k == lua.LNil {
		keys, ok := luaOrder(tb, st.hints[tb])
		if !ok {
			delete(st.orders, tb)
			return st.gopherNext(L, tb, k)
		}
		tr := &traversal{keys: keys, pos: -1}
		if st.orders == nil {
			st.orders = map[*lua.LTable]*traversal{}
		}
		st.orders[tb] = tr
		return st.nextFrom(L, tb, tr, 0)
	}
	tr := st.orders[tb]
	if tr == nil {
		return st.gopherNext(L, tb, k)
	}
	i := tr.pos
	if i < 0 || i >= len(tr.keys) || tr.keys[i] != k {
		for i = 0; i < len(tr.keys) && tr.keys[i] != k; i++ {
		}
		if i == len(tr.keys) {
			return st.gopherNext(L, tb, k)
		}
	}
	return st.nextFrom(L, tb, tr, i+1)
}

// nextFrom returns the first key from keys[i] on that still has a value.
func (st *state) nextFrom(L *lua.LState, tb *lua.LTable, tr *traversal, i int) int {
	for ; i < len(tr.keys); i++ {
		k := tr.keys[i]
		if (k == lua.LString(concatName) || k == lua.LString(tableName)) && tb == st.globals {
			continue
		}
		if v := tb.RawGet(k); v != lua.LNil {
			tr.pos = i
			L.Push(k)
			L.Push(v)
			return 2
		}
	}
	delete(st.orders, tb)
	L.Push(lua.LNil)
	return 1
}

// gopherNext is next in gopher-lua's order.
func (st *state) gopherNext(L *lua.LState, tb *lua.LTable, k lua.LValue) int {
	if k != lua.LNil && tb.RawGet(k) == lua.LNil && !deadKey(tb, k) {
		runError(L, "invalid key to 'next'")
	}
	k, v := tb.Next(k)
	for (k == lua.LString(concatName) || k == lua.LString(tableName)) && tb == st.globals {
		k, v = tb.Next(k)
	}
	if k == lua.LNil {
		L.Push(lua.LNil)
		return 1
	}
	L.Push(k)
	L.Push(v)
	return 2
}

// deadKey reports whether k was a key of tb's hash part, its value since
// set to nil: next accepts it, as Lua 5.1 accepts a dead key.
func deadKey(tb *lua.LTable, k lua.LValue) bool {
	if i, ok := arrayIndex(k); ok && i >= 1 && i <= tb.MaxN() {
		return true
	}
	keys, ok := tableKeys(tb)
	if !ok {
		return true
	}
	for _, dk := range keys {
		if dk == k {
			return true
		}
	}
	return false
}

// keysInOrder returns t's keys in Lua 5.1's order when it can tell it,
// else in gopher-lua's.
func (st *state) keysInOrder(t *lua.LTable) []lua.LValue {
	if keys, ok := luaOrder(t, st.hints[t]); ok {
		return keys
	}
	var keys []lua.LValue
	for k, _ := t.Next(lua.LNil); k != lua.LNil; k, _ = t.Next(k) {
		keys = append(keys, k)
	}
	return keys
}

func (st *state) rawget(L *lua.LState) int {
	tb := st.contents(checkTable(L, 1, "rawget"))
	L.Push(tb.RawGet(checkAny(L, 2, "rawget")))
	return 1
}

func (st *state) rawset(L *lua.LState) int {
	tb := checkTable(L, 1, "rawset")
	k := checkAny(L, 2, "rawset")
	v := checkAny(L, 3, "rawset")
	if st.readonly(tb) {
		raiseReadonly(L)
	}
	checkKey(L, k)
	tb.RawSet(k, v)
	L.SetTop(1)
	return 1
}

// checkKey refuses the keys Lua 5.1 refuses in a table.
func checkKey(L *lua.LState, k lua.LValue) {
	switch k := k.(type) {
	case *lua.LNilType:
		runError(L, "table index is nil")
	case lua.LNumber:
		if k != k {
			runError(L, "table index is NaN")
		}
	}
}

func (st *state) setmetatable(L *lua.LState) int {
	tb := checkTable(L, 1, "setmetatable")
	mt := L.Get(2)
	if mt.Type() != lua.LTNil && mt.Type() != lua.LTTable {
		argError(L, 2, "setmetatable", "nil or table expected")
	}
	if st.readonly(tb) {
		raiseReadonly(L)
	}
	if old, ok := tb.Metatable.(*lua.LTable); ok && old.RawGetString("__metatable") != lua.LNil {
		L.RaiseError("cannot change a protected metatable")
	}
	tb.Metatable = mt
	L.SetTop(1)
	return 1
}

func (st *state) getmetatable(L *lua.LState) int {
	v := checkAny(L, 1, "getmetatable")
	switch v := v.(type) {
	case lua.LString:
		L.Push(st.stringMT)
		return 1
	case *lua.LTable:
		if st.readonly(v) {
			if v == st.env {
				L.Push(st.globalsMT)
			} else {
				L.Push(lua.LNil)
			}
			return 1
		}
	}
	L.Push(L.GetMetatable(v))
	return 1
}
