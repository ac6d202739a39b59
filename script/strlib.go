package script

import (
	"strings"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/pm"
)

// The string library where gopher-lua differs from Lua 5.1 or could be
// made to allocate without bound in one call: numbers given as strings
// are formatted "%.14g"; format is Lua 5.1's (C printf's conversions);
// rep, gsub, format and the concatenation operator refuse a result larger
// than the memory limit before building it; gsub and gmatch find one
// match at a time instead of all at once; byte refuses more results than
// Lua's stack holds.

func (st *state) openString() {
	lib := st.globals.RawGetString("string").(*lua.LTable)
	L := st.L
	// Functions whose string arguments (at these positions) may be numbers.
	for name, pos := range map[string][]int{
		"len": {1}, "sub": {1}, "upper": {1}, "lower": {1}, "reverse": {1},
		"find": {1, 2}, "match": {1, 2},
	} {
		lib.RawSetString(name, numbersAsStrings(L, lib.RawGetString(name).(*lua.LFunction), pos))
	}
	set := func(name string, fn lua.LGFunction) { lib.RawSetString(name, L.NewFunction(fn)) }
	set("format", st.strFormat)
	set("rep", st.strRep)
	set("byte", strByte)
	set("gsub", st.strGsub)
	set("gmatch", strGmatch)
	lib.RawSetString("gfind", lib.RawGetString("gmatch"))
	set("dump", func(L *lua.LState) int {
		L.RaiseError("unable to dump given function")
		return 0
	})
	st.globals.RawSetString(concatName, L.NewFunction(st.concat))
}

// numbersAsStrings wraps fn so that numbers at the positions pos reach it
// as Lua 5.1 formats them.
func numbersAsStrings(L *lua.LState, fn *lua.LFunction, pos []int) *lua.LFunction {
	g := fn.GFunction
	return L.NewFunction(func(L *lua.LState) int {
		for _, p := range pos {
			if n, ok := L.Get(p).(lua.LNumber); ok {
				L.Replace(p, lua.LString(fmtNumber(float64(n))))
			}
		}
		return g(L)
	})
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

// strGmatch is string.gmatch, finding one match per call of its iterator.
func strGmatch(L *lua.LState) int {
	s := checkString(L, 1, "gmatch")
	p := checkString(L, 2, "gmatch")
	src := []byte(s)
	pos := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		for pos <= len(s) {
			mds, err := pm.Find(p, src, pos, 1)
			if err != nil {
				L.RaiseError("%s", err.Error())
			}
			if len(mds) == 0 {
				pos = len(s) + 1
				return 0
			}
			m := mds[0]
			start, end := m.Capture(0), m.Capture(1)
			pos = end
			if end == start {
				pos++
			}
			return pushCaptures(L, m, s, true)
		}
		return 0
	}))
	return 1
}

// pushCaptures pushes a match's captures (or the whole match when it has
// none and whole is set) and returns how many.
func pushCaptures(L *lua.LState, m *pm.MatchData, s string, whole bool) int {
	if m.CaptureLength() == 2 {
		if !whole {
			return 0
		}
		L.Push(lua.LString(s[m.Capture(0):m.Capture(1)]))
		return 1
	}
	n := 0
	for i := 2; i < m.CaptureLength(); i += 2 {
		if m.IsPosCapture(i) {
			L.Push(lua.LNumber(m.Capture(i) + 1))
		} else {
			L.Push(lua.LString(s[m.Capture(i):m.Capture(i+1)]))
		}
		n++
	}
	return n
}

// strGsub is Lua 5.1's string.gsub, in one pass, its result bounded by
// the memory limit.
func (st *state) strGsub(L *lua.LState) int {
	src := checkString(L, 1, "gsub")
	p := checkString(L, 2, "gsub")
	repl := L.Get(3)
	switch repl.Type() {
	case lua.LTNumber, lua.LTString, lua.LTTable, lua.LTFunction:
	default:
		argError(L, 3, "gsub", "string/function/table expected")
	}
	maxN := optInt(L, 4, "gsub", len(src)+1)
	anchor := strings.HasPrefix(p, "^")
	srcBytes := []byte(src)
	var b []byte
	n, pos := 0, 0
	for n < maxN {
		mds, err := pm.Find(p, srcBytes, pos, 1)
		if err != nil {
			L.RaiseError("%s", err.Error())
		}
		if len(mds) == 0 || (anchor && mds[0].Capture(0) != pos) {
			break
		}
		m := mds[0]
		start, end := m.Capture(0), m.Capture(1)
		b = append(b, src[pos:start]...)
		n++
		b = st.gsubValue(L, b, m, src, repl)
		st.raiseMemory(L, len(b)+len(src)-end)
		switch {
		case end > start:
			pos = end
		case start < len(src):
			b = append(b, src[start])
			pos = start + 1
		default:
			pos = start + 1
		}
		if anchor || pos > len(src) {
			break
		}
	}
	if pos < len(src) {
		b = append(b, src[pos:]...)
	}
	L.Push(lua.LString(b))
	L.Push(lua.LNumber(n))
	return 2
}

// gsubValue appends the replacement of match m (add_value in lstrlib.c).
func (st *state) gsubValue(L *lua.LState, b []byte, m *pm.MatchData, src string, repl lua.LValue) []byte {
	whole := src[m.Capture(0):m.Capture(1)]
	var v lua.LValue
	switch r := repl.(type) {
	case lua.LString, lua.LNumber:
		s, _ := toStringy(r)
		return appendGsubString(L, b, m, src, s)
	case *lua.LTable:
		v = L.GetTable(r, firstCapture(m, src))
	case *lua.LFunction:
		L.Push(r)
		n := pushCaptures(L, m, src, true)
		L.Call(n, 1)
		v = L.Get(-1)
		L.Pop(1)
	}
	if v == lua.LNil || v == lua.LFalse {
		return append(b, whole...)
	}
	s, ok := toStringy(v)
	if !ok {
		L.RaiseError("invalid replacement value (a %s)", v.Type().String())
	}
	return append(b, s...)
}

// firstCapture is the first capture of m, or the whole match.
func firstCapture(m *pm.MatchData, src string) lua.LValue {
	if m.CaptureLength() == 2 {
		return lua.LString(src[m.Capture(0):m.Capture(1)])
	}
	if m.IsPosCapture(2) {
		return lua.LNumber(m.Capture(2) + 1)
	}
	return lua.LString(src[m.Capture(2):m.Capture(3)])
}

// appendGsubString appends a replacement string, with %0-%9 and %%.
func appendGsubString(L *lua.LState, b []byte, m *pm.MatchData, src, repl string) []byte {
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		if c != '%' || i+1 == len(repl) {
			b = append(b, c)
			continue
		}
		i++
		d := repl[i]
		if d < '0' || d > '9' {
			b = append(b, d)
			continue
		}
		if d == '0' {
			b = append(b, src[m.Capture(0):m.Capture(1)]...)
			continue
		}
		idx := 2 * int(d-'0')
		if idx >= m.CaptureLength() {
			if idx == 2 && m.CaptureLength() == 2 {
				b = append(b, src[m.Capture(0):m.Capture(1)]...)
				continue
			}
			L.RaiseError("invalid capture index")
		}
		if m.IsPosCapture(idx) {
			b = append(b, fmtNumber(float64(m.Capture(idx)+1))...)
		} else {
			b = append(b, src[m.Capture(idx):m.Capture(idx+1)]...)
		}
	}
	return b
}
