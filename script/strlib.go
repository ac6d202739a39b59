package script

import (
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// The string library where gopher-lua differs from Lua 5.1 or could be
// made to allocate without bound in one call: numbers given as strings
// are formatted "%.14g"; format is Lua 5.1's (C printf's conversions);
// rep, gsub, format and the concatenation operator refuse a result larger
// than the memory limit before building it; patterns are Lua 5.1's
// (pattern.go); byte refuses more results than Lua's stack holds.

func (st *state) openString() {
	lib := st.globals.RawGetString("string").(*lua.LTable)
	L := st.L
	wrapChecked(L, lib, stringSpecs)
	set := func(name string, fn lua.LGFunction) { lib.RawSetString(name, L.NewFunction(fn)) }
	set("char", st.strChar)
	set("format", st.strFormat)
	set("rep", st.strRep)
	set("byte", strByte)
	set("gsub", st.strGsub)
	set("gmatch", strGmatch)
	set("find", func(L *lua.LState) int { return strFind(L, true) })
	set("match", func(L *lua.LState) int { return strFind(L, false) })
	lib.RawSetString("gfind", lib.RawGetString("gmatch"))
	set("dump", func(L *lua.LState) int {
		L.RaiseError("unable to dump given function")
		return 0
	})
	st.globals.RawSetString(concatName, L.NewFunction(st.concat))
}

// strChar is Lua 5.1's string.char.
func (st *state) strChar(L *lua.LState) int {
	n := L.GetTop()
	b := make([]byte, n)
	for i := 1; i <= n; i++ {
		c := checkInt(L, i, "char")
		if c < 0 || c > 255 {
			argError(L, i, "char", "invalid value")
		}
		b[i-1] = byte(c)
	}
	L.Push(lua.LString(b))
	return 1
}

// raiseMemory fails a library call whose result would pass the memory
// limit.
func (st *state) raiseMemory(L *lua.LState, n int) {
	if msg := st.hook.checkString(n); msg != "" {
		L.RaiseError("%s", msg)
	}
}

func (st *state) strRep(L *lua.LState) int {
	s := checkString(L, 1, "rep")
	n := checkInt(L, 2, "rep")
	if n <= 0 || len(s) == 0 {
		L.Push(lua.LString(""))
		return 1
	}
	if n > int(st.e.cfg.MemoryLimit)/len(s) {
		st.raiseMemory(L, -1)
	}
	L.Push(lua.LString(strings.Repeat(s, n)))
	return 1
}

// strByte is Lua 5.1's string.byte.
func strByte(L *lua.LState) int {
	s := checkString(L, 1, "byte")
	l := len(s)
	posi := strIndex(optInt(L, 2, "byte", 1), l)
	pose := strIndex(optInt(L, 3, "byte", posi), l)
	if posi <= 0 {
		posi = 1
	}
	if pose > l {
		pose = l
	}
	if posi > pose {
		return 0
	}
	n := pose - posi + 1
	if n > maxUnpack {
		L.RaiseError("string slice too long")
	}
	for i := posi; i <= pose; i++ {
		L.Push(lua.LNumber(s[i-1]))
	}
	return n
}

// strIndex is posrelat: a negative position counts from the end.
func strIndex(pos, l int) int {
	if pos < 0 {
		pos += l + 1
	}
	return pos
}

// concat is the .. operator (see compile.go): Lua 5.1's luaV_concat over
// its arguments, right to left, with __concat for what is not a string or
// a number.
func (st *state) concat(L *lua.LState) int {
	total := L.GetTop()
	for total > 1 {
		a, b := L.Get(total-1), L.Get(total)
		_, aok := toStringy(a)
		bs, bok := toStringy(b)
		if !aok || !bok {
			L.Replace(total-1, st.concatMeta(L, a, b, total-1))
			L.SetTop(total - 1)
			total--
			continue
		}
		n, size := 1, len(bs)
		for n < total {
			s, ok := toStringy(L.Get(total - n))
			if !ok {
				break
			}
			size += len(s)
			n++
		}
		st.raiseMemory(L, size)
		var sb strings.Builder
		sb.Grow(size)
		for i := total - n + 1; i <= total; i++ {
			s, _ := toStringy(L.Get(i))
			sb.WriteString(s)
		}
		L.Replace(total-n+1, lua.LString(sb.String()))
		L.SetTop(total - n + 1)
		total -= n - 1
	}
	if total == 1 {
		if s, ok := L.Get(1).(lua.LNumber); ok {
			L.Replace(1, lua.LString(fmtNumber(float64(s))))
		}
	}
	return 1
}

// concatMeta concatenates a and b through a __concat metamethod, or fails
// as Lua 5.1 does.
// a is argument i of the call, b argument i+1.
func (st *state) concatMeta(L *lua.LState, a, b lua.LValue, i int) lua.LValue {
	mm := L.GetMetaField(a, "__concat")
	if mm == lua.LNil {
		mm = L.GetMetaField(b, "__concat")
	}
	if mm == lua.LNil {
		bad := a
		if _, ok := toStringy(a); ok {
			bad, i = b, i+1
		}
		L.RaiseError("attempt to concatenate %s", concatOperandInfo(L, bad, i))
	}
	L.Push(mm)
	L.Push(a)
	L.Push(b)
	L.Call(2, 1)
	v := L.Get(-1)
	L.Pop(1)
	return v
}

// strGmatch is string.gmatch.
func strGmatch(L *lua.LState) int {
	s := checkString(L, 1, "gmatch")
	p := checkString(L, 2, "gmatch")
	pos := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		ms := newMatch(L, s, p)
		for src := pos; src <= len(s); src++ {
			ms.level = 0
			if e := ms.match(src, 0); e >= 0 {
				pos = e
				if e == src {
					pos++
				}
				return ms.pushCaptures(src, e)
			}
		}
		pos = len(s) + 1
		return 0
	}))
	return 1
}

// strGsub is Lua 5.1's string.gsub, its result bounded by the memory
// limit.
func (st *state) strGsub(L *lua.LState) int {
	src := checkString(L, 1, "gsub")
	p := checkString(L, 2, "gsub")
	repl := L.Get(3)
	maxN := optInt(L, 4, "gsub", len(src)+1)
	switch repl.Type() {
	case lua.LTNumber, lua.LTString, lua.LTTable, lua.LTFunction:
	default:
		argError(L, 3, "gsub", "string/function/table expected")
	}
	ms := newMatch(L, src, p)
	pstart := 0
	anchor := ms.pc(0) == '^'
	if anchor {
		pstart = 1
	}
	var b []byte
	n, s := 0, 0
loop:
	for n < maxN {
		ms.level = 0
		e := ms.match(s, pstart)
		if e >= 0 {
			n++
			b = st.gsubValue(L, ms, b, s, e, repl)
			st.raiseMemory(L, len(b)+len(src)-s)
		}
		switch {
		case e > s:
			s = e
		case s < len(src):
			b = append(b, src[s])
			s++
		default:
			break loop
		}
		if anchor {
			break
		}
	}
	b = append(b, src[s:]...)
	L.Push(lua.LString(b))
	L.Push(lua.LNumber(n))
	return 2
}

// gsubValue appends the replacement of the match s..e (add_value).
func (st *state) gsubValue(L *lua.LState, ms *matchState, b []byte, s, e int, repl lua.LValue) []byte {
	var v lua.LValue
	switch r := repl.(type) {
	case lua.LString, lua.LNumber:
		str, _ := toStringy(r)
		return ms.appendRepl(b, str, s, e)
	case *lua.LTable:
		v = L.GetTable(r, ms.oneCapture(0, s, e))
	case *lua.LFunction:
		L.Push(r)
		n := ms.pushCaptures(s, e)
		L.Call(n, 1)
		v = L.Get(-1)
		L.Pop(1)
	}
	if v == lua.LNil || v == lua.LFalse {
		return append(b, ms.src[s:e]...)
	}
	str, ok := toStringy(v)
	if !ok {
		L.RaiseError("invalid replacement value (a %s)", v.Type().String())
	}
	return append(b, str...)
}

// appendRepl is add_s: a replacement string, with %0-%9 and %x.
func (ms *matchState) appendRepl(b []byte, repl string, s, e int) []byte {
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		if c != '%' {
			b = append(b, c)
			continue
		}
		i++
		var d byte
		if i < len(repl) {
			d = repl[i]
		}
		switch {
		case d < '0' || d > '9':
			b = append(b, d)
		case d == '0':
			b = append(b, ms.src[s:e]...)
		default:
			v, _ := toStringy(ms.oneCapture(int(d-'1'), s, e))
			b = append(b, v...)
		}
	}
	return b
}
