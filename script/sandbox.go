package script

import (
	"fmt"

	lua "github.com/yuin/gopher-lua"
)

// The sandbox. Redis 7 makes the globals and every table reachable from
// them read-only ("Attempt to modify a readonly table") and makes reading
// a global that does not exist an error. gopher-lua has no read-only
// tables, so scripts see each protected table through an empty proxy whose
// metatable reads from the real table (__index) and refuses every write
// (__newindex); the functions that bypass metatables (rawset, rawget,
// next, setmetatable, getmetatable, table.insert, ...) are replaced by
// versions that know the proxies. Nothing a script can reach survives its
// run except through these tables, so nothing leaks into the next run.

// Messages of the sandbox, as Redis 7.0 words them.
const (
	msgReadonly       = "Attempt to modify a readonly table"
	msgNoGlobal       = "Script attempted to access nonexistent global variable '%s'"
	msgNoGlobalBadKey = "Second argument to luaProtectedTableError must be a string or number"
)

// Globals that Redis does not have, removed from gopher-lua's base library.
var removedGlobals = []string{"dofile", "loadfile", "print", "require", "module", "setfenv", "getfenv",
	"newproxy", "_printregs", "_GOPHER_LUA_VERSION", "package"}

// Libraries whose tables are made read-only, in the globals.
var protectedLibs = []string{"string", "table", "math", "coroutine", "redis", "cjson", "bit", "struct", "cmsgpack"}

// protect builds the proxies and installs env as the scripts' globals.
func (st *state) protect() {
	L, g := st.L, st.globals
	for _, name := range removedGlobals {
		g.RawSetString(name, lua.LNil)
	}
	for _, name := range protectedLibs {
		if lib, ok := g.RawGetString(name).(*lua.LTable); ok {
			g.RawSetString(name, st.proxy(lib))
		}
	}
	// The string metatable gopher-lua uses for "s:rep(3)" reads the real
	// string table; getmetatable("") shows a read-only view of it.
	strLib := st.ro[g.RawGetString("string").(*lua.LTable)]
	strLib.RawSetString("__index", lua.LNil) // gopher-lua's string table was its own metatable
	strMT := L.NewTable()
	strMT.RawSetString("__index", strLib)
	L.SetMetatable(lua.LString(""), strMT)
	view := L.NewTable()
	view.RawSetString("__index", g.RawGetString("string"))
	st.stringMT = st.proxy(view)

	noGlobal := L.NewTable()
	noGlobal.RawSetString("__index", L.NewFunction(errNoGlobal))
	g.Metatable = noGlobal
	st.globalsMT = st.proxy(noGlobal)
	st.env = st.proxy(g)
	g.RawSetString("_G", st.env)
	L.Env = st.env
}

// proxy returns an empty table that shows tb read-only: reads go to tb,
// writes fail. The proxy's own metatable is hidden from scripts.
func (st *state) proxy(tb *lua.LTable) *lua.LTable {
	L := st.L
	p := L.NewTable()
	mt := L.NewTable()
	mt.RawSetString("__index", tb)
	mt.RawSetString("__newindex", L.NewFunction(errReadonly))
	p.Metatable = mt
	st.ro[p] = tb
	return p
}

// contents returns the table a script means by v: the real table behind a
// proxy, v itself otherwise.
func (st *state) contents(tb *lua.LTable) *lua.LTable {
	if real, ok := st.ro[tb]; ok {
		return real
	}
	return tb
}

// where is Lua 5.1's luaL_where: "chunk:line:" of the function level
// calls up (1: the caller of the running Go function), "" for a Go
// function.
func where(L *lua.LState, level int) string {
	dbg, ok := L.GetStack(level)
	if !ok {
		return ""
	}
	if _, err := L.GetInfo("Sl", dbg, lua.LNil); err != nil || dbg.CurrentLine <= 0 {
		return ""
	}
	return dbg.Source + ":" + fmtNumber(float64(dbg.CurrentLine)) + ":"
}

// runError raises msg without a position, as luaG_runerror does when the
// running function is a C function.
func runError(L *lua.LState, format string, args ...any) {
	L.Error(lua.LString(fmt.Sprintf(format, args...)), 0)
}

// readonly reports whether tb is a proxy, which no write may change.
func (st *state) readonly(tb *lua.LTable) bool {
	_, ok := st.ro[tb]
	return ok
}

// raiseReadonly fails the way Redis's lua_rawset and lua_setmetatable do on
// a read-only table: without a position.
func raiseReadonly(L *lua.LState) {
	L.Error(lua.LString(msgReadonly), 0)
}

// errReadonly is the __newindex of every proxy: a write through the VM,
// which Redis reports with the position.
func errReadonly(L *lua.LState) int {
	L.RaiseError(msgReadonly)
	return 0
}

// errNoGlobal is the __index of the globals.
func errNoGlobal(L *lua.LState) int {
	if L.GetTop() != 2 {
		L.RaiseError("Wrong number of arguments to luaProtectedTableError")
	}
	switch k := L.Get(2).(type) {
	case lua.LString:
		L.RaiseError(msgNoGlobal, string(k))
	case lua.LNumber:
		L.RaiseError(msgNoGlobal, fmtNumber(float64(k)))
	default:
		L.RaiseError(msgNoGlobalBadKey)
	}
	return 0
}
