package script

import (
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Lua 5.1's patterns, a port of lstrlib.c's matcher (as Redis 7.0 has it),
// for string.find, match, gmatch and gsub: the same matches, captures and
// errors ("malformed pattern (missing ']')", "invalid capture index",
// "unfinished capture"), the pattern read as C reads it (up to a NUL), the
// subject by its length.

const (
	maxCaptures   = 32 // LUA_MAXCAPTURES
	capUnfinished = -1
	capPosition   = -2
	specials      = "^$*+?.([%-"
)

// matchState is lstrlib.c's MatchState.
type matchState struct {
	L       *lua.LState
	src     string
	p       string
	level   int
	capture [maxCaptures]struct{ init, len int }
}

func newMatch(L *lua.LState, src, p string) *matchState {
	if i := strings.IndexByte(p, 0); i >= 0 {
		p = p[:i]
	}
	return &matchState{L: L, src: src, p: p}
}

// pc is the pattern's byte at i, 0 past its end.
func (ms *matchState) pc(i int) byte {
	if i < len(ms.p) {
		return ms.p[i]
	}
	return 0
}

func (ms *matchState) checkCapture(l byte) int {
	i := int(l) - '1'
	if i < 0 || i >= ms.level || ms.capture[i].len == capUnfinished {
		ms.L.RaiseError("invalid capture index")
	}
	return i
}

func (ms *matchState) captureToClose() int {
	for level := ms.level - 1; level >= 0; level-- {
		if ms.capture[level].len == capUnfinished {
			return level
		}
	}
	ms.L.RaiseError("invalid pattern capture")
	return 0
}

// classEnd is classend: where the pattern item at p ends.
func (ms *matchState) classEnd(p int) int {
	c := ms.pc(p)
	p++
	switch c {
	case '%':
		if ms.pc(p) == 0 {
			ms.L.RaiseError("%s", "malformed pattern (ends with '%')")
		}
		return p + 1
	case '[':
		if ms.pc(p) == '^' {
			p++
		}
		for {
			if ms.pc(p) == 0 {
				ms.L.RaiseError("malformed pattern (missing ']')")
			}
			c := ms.pc(p)
			p++
			if c == '%' && ms.pc(p) != 0 {
				p++
			}
			if ms.pc(p) == ']' {
				return p + 1
			}
		}
	}
	return p
}

// matchClass is match_class, with C's <ctype.h> in the C locale.
func matchClass(c, cl byte) bool {
	var res bool
	switch cl | 0x20 {
	case 'a':
		res = isAlphaB(c)
	case 'c':
		res = c < 32 || c == 127
	case 'd':
		res = c >= '0' && c <= '9'
	case 'l':
		res = c >= 'a' && c <= 'z'
	case 'p':
		res = c >= 33 && c <= 126 && !isAlphaB(c) && !(c >= '0' && c <= '9')
	case 's':
		res = c == ' ' || (c >= '\t' && c <= '\r')
	case 'u':
		res = c >= 'A' && c <= 'Z'
	case 'w':
		res = isAlphaB(c) || (c >= '0' && c <= '9')
	case 'x':
		res = hexDigit(c) >= 0
	case 'z':
		res = c == 0
	default:
		return cl == c
	}
	if cl >= 'a' && cl <= 'z' {
		return res
	}
	return !res
}

func isAlphaB(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// matchBracketClass is matchbracketclass; p is the '[' and ec the ']'.
func (ms *matchState) matchBracketClass(c byte, p, ec int) bool {
	sig := true
	if ms.pc(p+1) == '^' {
		sig = false
		p++
	}
	for p++; p < ec; p++ {
		switch {
		case ms.pc(p) == '%':
			p++
			if matchClass(c, ms.pc(p)) {
				return sig
			}
		case ms.pc(p+1) == '-' && p+2 < ec:
			p += 2
			if ms.pc(p-2) <= c && c <= ms.pc(p) {
				return sig
			}
		case ms.pc(p) == c:
			return sig
		}
	}
	return !sig
}

// singleMatch is singlematch for the subject's byte at s.
func (ms *matchState) singleMatch(s, p, ep int) bool {
	if s >= len(ms.src) {
		return false
	}
	c := ms.src[s]
	switch ms.pc(p) {
	case '.':
		return true
	case '%':
		return matchClass(c, ms.pc(p+1))
	case '[':
		return ms.matchBracketClass(c, p, ep-1)
	}
	return ms.pc(p) == c
}

// match is match: the end of the match of the pattern from p at s, -1 if
// there is none.
func (ms *matchState) match(s, p int) int {
	for {
		switch ms.pc(p) {
		case '(':
			if ms.pc(p+1) == ')' {
				return ms.startCapture(s, p+2, capPosition)
			}
			return ms.startCapture(s, p+1, capUnfinished)
		case ')':
			return ms.endCapture(s, p+1)
		case 0:
			return s
		case '$':
			if p+1 == len(ms.p) {
				if s == len(ms.src) {
					return s
				}
				return -1
			}
		case '%':
			switch c := ms.pc(p + 1); {
			case c == 'b':
				if s = ms.matchBalance(s, p+2); s < 0 {
					return -1
				}
				p += 4
				continue
			case c == 'f':
				p += 2
				if ms.pc(p) != '[' {
					ms.L.RaiseError("%s", "missing '[' after '%f' in pattern")
				}
				ep := ms.classEnd(p)
				var prev, cur byte
				if s > 0 {
					prev = ms.src[s-1]
				}
				if s < len(ms.src) {
					cur = ms.src[s]
				}
				if ms.matchBracketClass(prev, p, ep-1) || !ms.matchBracketClass(cur, p, ep-1) {
					return -1
				}
				p = ep
				continue
			case c >= '0' && c <= '9':
				if s = ms.matchCapture(s, c); s < 0 {
					return -1
				}
				p += 2
				continue
			}
		}
		// A single-character class, maybe repeated.
		ep := ms.classEnd(p)
		m := ms.singleMatch(s, p, ep)
		switch ms.pc(ep) {
		case '?':
			if m {
				if res := ms.match(s+1, ep+1); res >= 0 {
					return res
				}
			}
			p = ep + 1
			continue
		case '*':
			return ms.maxExpand(s, p, ep)
		case '+':
			if !m {
				return -1
			}
			return ms.maxExpand(s+1, p, ep)
		case '-':
			return ms.minExpand(s, p, ep)
		}
		if !m {
			return -1
		}
		s, p = s+1, ep
	}
}

func (ms *matchState) matchBalance(s, p int) int {
	if ms.pc(p) == 0 || ms.pc(p+1) == 0 {
		ms.L.RaiseError("unbalanced pattern")
	}
	if s >= len(ms.src) || ms.src[s] != ms.pc(p) {
		return -1
	}
	b, e, cont := ms.pc(p), ms.pc(p+1), 1
	for s++; s < len(ms.src); s++ {
		switch ms.src[s] {
		case e:
			if cont--; cont == 0 {
				return s + 1
			}
		case b:
			cont++
		}
	}
	return -1
}

func (ms *matchState) maxExpand(s, p, ep int) int {
	i := 0
	for ms.singleMatch(s+i, p, ep) {
		i++
	}
	for ; i >= 0; i-- {
		if res := ms.match(s+i, ep+1); res >= 0 {
			return res
		}
	}
	return -1
}

func (ms *matchState) minExpand(s, p, ep int) int {
	for {
		if res := ms.match(s, ep+1); res >= 0 {
			return res
		}
		if !ms.singleMatch(s, p, ep) {
			return -1
		}
		s++
	}
}

func (ms *matchState) startCapture(s, p, what int) int {
	if ms.level >= maxCaptures {
		ms.L.RaiseError("too many captures")
	}
	ms.capture[ms.level].init, ms.capture[ms.level].len = s, what
	ms.level++
	res := ms.match(s, p)
	if res < 0 {
		ms.level--
	}
	return res
}

func (ms *matchState) endCapture(s, p int) int {
	l := ms.captureToClose()
	ms.capture[l].len = s - ms.capture[l].init
	res := ms.match(s, p)
	if res < 0 {
		ms.capture[l].len = capUnfinished
	}
	return res
}

func (ms *matchState) matchCapture(s int, c byte) int {
	l := ms.checkCapture(c)
	n := ms.capture[l].len
	init := ms.capture[l].init
	if len(ms.src)-s >= n && ms.src[init:init+n] == ms.src[s:s+n] {
		return s + n
	}
	return -1
}

// oneCapture is push_onecapture's value: capture i of a match of s..e.
func (ms *matchState) oneCapture(i, s, e int) lua.LValue {
	if i >= ms.level {
		if i == 0 {
			return lua.LString(ms.src[s:e])
		}
		ms.L.RaiseError("invalid capture index")
	}
	l := ms.capture[i].len
	switch l {
	case capUnfinished:
		ms.L.RaiseError("unfinished capture")
	case capPosition:
		return lua.LNumber(ms.capture[i].init + 1)
	}
	init := ms.capture[i].init
	return lua.LString(ms.src[init : init+l])
}

// pushCaptures is push_captures (s < 0: no whole match to push).
func (ms *matchState) pushCaptures(s, e int) int {
	n := ms.level
	if n == 0 && s >= 0 {
		n = 1
	}
	if n > maxUnpack {
		ms.L.RaiseError("stack overflow (too many captures)")
	}
	for i := 0; i < n; i++ {
		ms.L.Push(ms.oneCapture(i, s, e))
	}
	return n
}

// strFind is str_find_aux (find: string.find; else string.match).
func strFind(L *lua.LState, find bool) int {
	fn := "match"
	if find {
		fn = "find"
	}
	s := checkString(L, 1, fn)
	p := checkString(L, 2, fn)
	init := strIndex(optInt(L, 3, fn, 1), len(s)) - 1
	if init < 0 {
		init = 0
	} else if init > len(s) {
		init = len(s)
	}
	cp := p
	if i := strings.IndexByte(cp, 0); i >= 0 {
		cp = cp[:i]
	}
	if find && (lua.LVAsBool(L.Get(4)) || !strings.ContainsAny(cp, specials)) {
		if i := strings.Index(s[init:], p); i >= 0 {
			L.Push(lua.LNumber(init + i + 1))
			L.Push(lua.LNumber(init + i + len(p)))
			return 2
		}
		L.Push(lua.LNil)
		return 1
	}
	ms := newMatch(L, s, p)
	anchor := ms.pc(0) == '^'
	pstart := 0
	if anchor {
		pstart = 1
	}
	for s1 := init; ; s1++ {
		ms.level = 0
		if e := ms.match(s1, pstart); e >= 0 {
			if find {
				L.Push(lua.LNumber(s1 + 1))
				L.Push(lua.LNumber(e))
				return ms.pushCaptures(-1, 0) + 2
			}
			return ms.pushCaptures(s1, e)
		}
		if s1 >= len(s) || anchor {
			break
		}
	}
	L.Push(lua.LNil)
	return 1
}
