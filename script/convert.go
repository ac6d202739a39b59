package script

import (
	"bytes"

	lua "github.com/yuin/gopher-lua"

	"github.com/rlserver/rlserver/values"
)

// Conversions between replies and Lua values, as Redis 7.0 makes them
// (redisProtocolToLuaType and luaReplyToRedisReply in script_lua.c).

// luaStackLimit is LUAI_MAXCSTACK: a result nested deeper than the Lua
// stack allows gets the error "reached lua stack limit" at that depth, as
// in Redis. stackBase is what the stack holds when the conversion starts
// (the error handler and the result).
const (
	luaStackLimit = 8000
	stackBase     = 2
)

// toLua converts a command's reply for the script: a status becomes
// {ok=...}, an error {err=...}, a null false (RESP2) or nil (RESP3), an
// array a table, and RESP3's map, set, double, boolean, big number and
// verbatim string the tables Redis makes of them.
func (st *state) toLua(r values.Reply, depth int) lua.LValue {
	L := st.L
	switch r.Kind {
	case values.Status:
		return field(L, "ok", lua.LString(r.Str))
	case values.Error:
		t := field(L, "err", lua.LString(errorText(r.Str)))
		t.RawSetString("ignore_error_stats_update", lua.LTrue)
		return t
	case values.Int:
		return lua.LNumber(float64(r.Int))
	case values.Bulk:
		return lua.LString(r.Str)
	case values.Nil, values.NilArray:
		if st.x.resp == 3 {
			return lua.LNil
		}
		return lua.LFalse
	case values.Array:
		t := L.CreateTable(len(r.Elems), 0)
		for i, e := range r.Elems {
			if v := st.toLua(e, depth+1); v != lua.LNil {
				t.RawSetInt(i+1, v)
			}
		}
		return t
	case values.Double:
		return field(L, "double", lua.LNumber(r.Float))
	case values.Map:
		m := L.CreateTable(0, len(r.Elems)/2)
		for i := 0; i+1 < len(r.Elems); i += 2 {
			k, v := st.toLua(r.Elems[i], depth+1), st.toLua(r.Elems[i+1], depth+1)
			if k != lua.LNil {
				m.RawSet(k, v)
			}
		}
		return field(L, "map", m)
	case KindSet:
		m := L.CreateTable(0, len(r.Elems))
		for _, e := range r.Elems {
			if k := st.toLua(e, depth+1); k != lua.LNil {
				m.RawSet(k, lua.LTrue)
			}
		}
		return field(L, "set", m)
	case KindBool:
		return lua.LBool(r.Int != 0)
	case KindBigNumber:
		return field(L, "big_number", lua.LString(r.Str))
	case KindVerbatim:
		format, text := "txt", r.Str
		if i := bytes.IndexByte(r.Str, ':'); i >= 0 {
			format, text = string(r.Str[:i]), r.Str[i+1:]
		}
		v := L.NewTable()
		v.RawSetString("string", lua.LString(text))
		v.RawSetString("format", lua.LString(format))
		return field(L, "verbatim_string", v)
	}
	return lua.LNil
}

// field returns the table {name=v}.
func field(L *lua.LState, name string, v lua.LValue) *lua.LTable {
	t := L.CreateTable(0, 1)
	t.RawSetString(name, v)
	return t
}

// toReply converts a script's result for the connection, whose protocol
// is x.RESP; booleans follow the script's own protocol (redis.setresp).
// top is how many values the Lua stack would hold (see luaStackLimit).
func (st *state) toReply(v lua.LValue, top int) values.Reply {
	if top == 0 {
		top = stackBase
	}
	if top+4 > luaStackLimit {
		return errorReply([]byte("ERR reached lua stack limit"))
	}
	switch v := v.(type) {
	case lua.LString:
		return values.Reply{Kind: values.Bulk, Str: []byte(v)}
	case lua.LBool:
		return st.boolReply(bool(v))
	case lua.LNumber:
		return values.Reply{Kind: values.Int, Int: toInteger(float64(v))}
	case *lua.LTable:
		return st.tableReply(v, top)
	}
	return values.Reply{Kind: values.Nil}
}

// boolReply is a boolean result: 1 or null in RESP2 scripts; a boolean
// (1 or 0 for a RESP2 connection) in RESP3 scripts.
func (st *state) boolReply(b bool) values.Reply {
	n := int64(0)
	if b {
		n = 1
	}
	switch {
	case st.x.resp == 2 && b:
		return values.Reply{Kind: values.Int, Int: 1}
	case st.x.resp == 2:
		return values.Reply{Kind: values.Nil}
	case st.x.RESP == 3:
		return values.Reply{Kind: KindBool, Int: n}
	}
	return values.Reply{Kind: values.Int, Int: n}
}

// tableReply converts a table: {err=...}, {ok=...}, {double=...},
// {big_number=...}, {verbatim_string=...}, {map=...}, {set=...}, or an
// array up to its first nil.
func (st *state) tableReply(t *lua.LTable, top int) values.Reply {
	if s, ok := t.RawGetString("err").(lua.LString); ok {
		return errorReply(mapLineBreaks(bytes.TrimRight([]byte(s), "\r\n")))
	}
	if s, ok := t.RawGetString("ok").(lua.LString); ok {
		return values.Reply{Kind: values.Status, Str: mapLineBreaks([]byte(s))}
	}
	if n, ok := t.RawGetString("double").(lua.LNumber); ok {
		return st.doubleReply(float64(n))
	}
	if s, ok := t.RawGetString("big_number").(lua.LString); ok {
		kind := KindBigNumber
		if st.x.RESP != 3 {
			kind = values.Bulk
		}
		return values.Reply{Kind: kind, Str: mapLineBreaks([]byte(s))}
	}
	if r, ok := st.verbatimReply(t); ok {
		return r
	}
	if m, ok := t.RawGetString("map").(*lua.LTable); ok {
		return st.mapReply(m, top+1)
	}
	if s, ok := t.RawGetString("set").(*lua.LTable); ok {
		return st.setReply(s, top+1)
	}
	var elems []values.Reply
	if n := t.MaxN(); n > 0 {
		// Room for a usual reply at once, in the memory the Caller lends
		// (Exec.Elems) or one allocation; not more than 256 ahead of the
		// elements, since the array ends at its first nil.
		elems = st.x.Elems(min(n, 256))[:0]
	}
	for j := 1; ; j++ {
		v := t.RawGetInt(j)
		if v == lua.LNil {
			break
		}
		elems = append(elems, st.toReply(v, top+1))
	}
	return values.Reply{Kind: values.Array, Elems: elems}
}

// doubleReply is addReplyDouble: a RESP3 double, or its "%.17g" text in
// a bulk string for RESP2.
func (st *state) doubleReply(f float64) values.Reply {
	if st.x.RESP == 3 {
		return values.Reply{Kind: values.Double, Float: f}
	}
	return values.Reply{Kind: values.Bulk, Str: appendG(nil, f, 17, false, false)}
}

// verbatimReply converts {verbatim_string={format=..., string=...}}.
func (st *state) verbatimReply(t *lua.LTable) (values.Reply, bool) {
	v, ok := t.RawGetString("verbatim_string").(*lua.LTable)
	if !ok {
		return values.Reply{}, false
	}
	format, ok := v.RawGetString("format").(lua.LString)
	if !ok {
		return values.Reply{}, false
	}
	text, ok := v.RawGetString("string").(lua.LString)
	if !ok {
		return values.Reply{}, false
	}
	if st.x.RESP != 3 {
		return values.Reply{Kind: values.Bulk, Str: []byte(text)}, true
	}
	f := []byte(format + "\x00\x00\x00")[:3]
	return values.Reply{Kind: KindVerbatim, Str: append(append(f, ':'), text...)}, true
}

// mapReply converts a map's pairs in the table's order: a RESP3 map, a
// flat array for RESP2.
func (st *state) mapReply(m *lua.LTable, top int) values.Reply {
	var elems []values.Reply
	for _, k := range st.keysInOrder(m) {
		elems = append(elems, st.toReply(k, top+3), st.toReply(m.RawGet(k), top+2))
	}
	kind := values.Map
	if st.x.RESP != 3 {
		kind = values.Array
	}
	return values.Reply{Kind: kind, Elems: elems}
}

// setReply converts a set's members (its keys).
func (st *state) setReply(s *lua.LTable, top int) values.Reply {
	var elems []values.Reply
	for _, k := range st.keysInOrder(s) {
		elems = append(elems, st.toReply(k, top+2))
	}
	kind := KindSet
	if st.x.RESP != 3 {
		kind = values.Array
	}
	return values.Reply{Kind: kind, Elems: elems}
}

// mapLineBreaks replaces \r and \n with spaces, as Redis does in status
// and error replies of scripts.
func mapLineBreaks(b []byte) []byte {
	for i, c := range b {
		if c == '\r' || c == '\n' {
			b[i] = ' '
		}
	}
	return b
}
