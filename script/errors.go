package script

import (
	"bytes"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/rlserver/rlserver/values"
)

// How a failed run is answered. Redis runs a script under an error handler
// that turns the error into a table {err=..., source=..., line=...} (a
// string error becomes "ERR " .. tostring(err); a table raised by
// redis.call or error({err=...}) keeps its err), taking the position from
// the function that failed or, when that is a C function, from its caller.
// The reply is then "<err> script: <sha>, on <source>:<line>.".

// errInfo is what the error handler saw.
type errInfo struct {
	set    bool
	msg    string // the error's text, with its code ("ERR ...")
	source string // "@user_script"
	line   string
}

// errorHandler is the handler a run's body is called under.
func (st *state) errorHandler(L *lua.LState) int {
	obj := L.Get(1)
	info := errInfo{set: true, msg: "ERR unknown error"}
	switch {
	case st.hook.err != nil:
		info.msg = "ERR " + st.hook.err.Error()
	case obj.Type() == lua.LTTable:
		if s, ok := toStringy(L.GetField(obj, "err")); ok {
			info.msg = s
		}
	default:
		info.msg = "ERR " + st.errorText(L, obj)
	}
	info.source, info.line = errorPlace(L)
	st.fail = info
	L.Push(obj)
	return 1
}

// errorText is tostring of an error that is not a table, with the
// interpreter's own messages worded as Lua 5.1 words them.
func (st *state) errorText(L *lua.LState, obj lua.LValue) string {
	s := tostring(L, obj)
	if _, ok := obj.(lua.LString); ok {
		return st.luaMessage(L, s)
	}
	return s
}

// errorPlace is the source and line of the function that failed, or of its
// caller when that is a Go function; "" if there is none.
func errorPlace(L *lua.LState) (source, line string) {
	for level := 1; level <= 2; level++ {
		dbg, ok := L.GetStack(level)
		if !ok {
			return "", ""
		}
		fn, err := L.GetInfo("f", dbg, lua.LNil)
		if err != nil {
			return "", ""
		}
		if f, ok := fn.(*lua.LFunction); ok && f.IsG {
			continue
		}
		if _, err := L.GetInfo("Sl", dbg, lua.LNil); err != nil {
			return "", ""
		}
		source = dbg.Source
		if source == userScript {
			source = "@" + userScript
		}
		return source, fmtNumber(float64(dbg.CurrentLine))
	}
	return "", ""
}

// failReply is the reply of a run that failed.
func (st *state) failReply(x *Exec, err error) values.Reply {
	f := st.fail
	if !f.set {
		f = failedHandler(err, st.hook.line)
	}
	msg := []byte(f.msg)
	if f.source != "" && f.line != "" {
		msg = appendWhere(msg, x.SHA, f.source, f.line)
	}
	return errorReply(oneLine(msg))
}

// oneLine replaces line breaks with spaces: an error reply is one line.
// (Redis 7.0 writes a script error's line breaks as they are, which breaks
// the protocol; later versions replace them as here.)
func oneLine(b []byte) []byte {
	if bytes.IndexAny(b, "\r\n") < 0 {
		return b
	}
	out := make([]byte, len(b))
	for i, c := range b {
		if c == '\r' || c == '\n' {
			c = ' '
		}
		out[i] = c
	}
	return out
}

// redisErrHandler is the global __redis__err__handler Redis defines, for
// scripts that call it: the error as the handler shapes it.
func (st *state) redisErrHandler(L *lua.LState) int {
	obj := L.Get(1)
	tb, ok := obj.(*lua.LTable)
	if !ok || st.readonly(tb) {
		tb = L.NewTable()
		tb.RawSetString("err", lua.LString("ERR "+tostring(L, obj)))
	}
	source, line := errorPlace(L)
	if source != "" {
		tb.RawSetString("source", lua.LString(source))
		tb.RawSetString("line", lua.LNumber(atoiOr(line)))
	}
	L.Push(tb)
	return 1
}

func atoiOr(s string) float64 {
	f, _ := str2number(s)
	return f
}

// failedHandler describes an error whose handler could not run because
// the call stack was full: gopher-lua panics ("lua callstack overflow")
// where Lua 5.1 raises "stack overflow" at the line running, which the
// hook saw last.
func failedHandler(err error, line int) errInfo {
	s := overflowMessage(errorObject(err), line)
	info := errInfo{set: true, msg: "ERR " + tostringPlain(s)}
	if str, ok := s.(lua.LString); ok {
		if rest, ok := strings.CutPrefix(string(str), userScript+":"); ok {
			if i := strings.IndexByte(rest, ':'); i > 0 {
				info.source, info.line = "@"+userScript, rest[:i]
			}
		}
	}
	return info
}

// overflowMessage turns gopher-lua's call stack panic into Lua's error.
func overflowMessage(obj lua.LValue, line int) lua.LValue {
	if s, ok := obj.(lua.LString); ok && strings.Contains(string(s), "callstack overflow") {
		return lua.LString(userScript + ":" + fmtNumber(float64(line)) + ": stack overflow")
	}
	return obj
}

// tostringPlain is tostring without metamethods.
func tostringPlain(v lua.LValue) string {
	if s, ok := toStringy(v); ok {
		return s
	}
	return v.String()
}
