package script

import (
	"fmt"

	lua "github.com/yuin/gopher-lua"
)

// Argument errors as Lua 5.1 words them: "bad argument #1 to 'sub'
// (string expected, got no value)", the function named as the caller
// named it (getfuncname: 'sub' for string.sub(), 'f' for a local f, '?'
// when the caller is not a Lua function), and the argument counted
// without self for a method call ("calling 'sub' on bad self" for self).
// gopher-lua's library functions that the engine keeps are wrapped by a
// check of their arguments against a spec, which also hands numbers to
// string parameters as Lua 5.1 formats them.

// calleeName is how the function running was called: its name and
// whether as a method, "?" when the caller does not tell (a Go function,
// an expression). ok is false when the engine cannot look (see
// internals.go).
func calleeName(L *lua.LState) (name string, method, ok bool) {
	dbg, found := L.GetStack(1)
	if !found {
		return "?", false, true
	}
	fn, err := L.GetInfo("f", dbg, lua.LNil)
	if lf, isFn := fn.(*lua.LFunction); err != nil || !isFn || lf.IsG {
		return "?", false, true
	}
	f, found := luaFrame(L, 1)
	if !found {
		return "", false, false
	}
	i := f.proto.Code[f.pc]
	switch opCode(i) {
	case lua.OP_CALL, lua.OP_TAILCALL, lua.OP_TFORLOOP:
	default:
		return "?", false, true
	}
	kind, name := f.objName(opA(i), 0)
	if kind == "" {
		return "?", false, true
	}
	return name, kind == "method", true
}

// argError raises Lua 5.1's "bad argument #n to 'fn' (msg)" for the
// function running (fn is its name when the caller's cannot be told).
func argError(L *lua.LState, n int, fn, msg string) {
	name, method, ok := calleeName(L)
	if !ok {
		name = fn
	}
	if method {
		n--
		if n == 0 {
			L.RaiseError("calling '%s' on bad self (%s)", name, msg)
		}
	}
	L.RaiseError("bad argument #%d to '%s' (%s)", n, name, msg)
}

// checkArgs checks the arguments of a library function against spec, one
// letter an argument: s a string (a number is turned into its string), n
// a number (a numeric string is turned into its number), i an integer, t
// a table, f a function, a any value; upper case for an optional one; a
// trailing '*' checks every further argument present against the letter
// before it.
func checkArgs(L *lua.LState, fn, spec string) {
	n, rest := len(spec), byte(0)
	if n > 0 && spec[n-1] == '*' {
		n--
		rest = spec[n-1] | 0x20
	}
	for i := 1; i <= n; i++ {
		c := spec[i-1]
		if c >= 'A' && c <= 'Z' {
			if L.Get(i) == lua.LNil {
				continue
			}
			c += 'a' - 'A'
		}
		checkArg(L, fn, i, c)
	}
	if rest != 0 {
		for i := n + 1; i <= L.GetTop(); i++ {
			checkArg(L, fn, i, rest)
		}
	}
}

// checkArg checks argument i against kind c.
func checkArg(L *lua.LState, fn string, i int, c byte) {
	v := L.Get(i)
	switch c {
	case 's':
		switch v := v.(type) {
		case lua.LString:
		case lua.LNumber:
			L.Replace(i, lua.LString(fmtNumber(float64(v))))
		default:
			typeError(L, i, fn, "string")
		}
	case 'n', 'i':
		switch v := v.(type) {
		case lua.LNumber:
		case lua.LString:
			f, ok := str2number(string(v))
			if !ok {
				typeError(L, i, fn, "number")
			}
			L.Replace(i, lua.LNumber(f))
		default:
			typeError(L, i, fn, "number")
		}
	case 't':
		if v.Type() != lua.LTTable {
			typeError(L, i, fn, "table")
		}
	case 'f':
		if v.Type() != lua.LTFunction {
			typeError(L, i, fn, "function")
		}
	case 'a':
		if i > L.GetTop() {
			argError(L, i, fn, "value expected")
		}
	default:
		panic(fmt.Sprintf("script: bad argument spec %q", c))
	}
}

// checked wraps a library function with a check of its arguments.
func checked(L *lua.LState, fn, spec string, f lua.LGFunction) *lua.LFunction {
	return L.NewFunction(func(L *lua.LState) int {
		checkArgs(L, fn, spec)
		return f(L)
	})
}

// Specs of the gopher-lua functions the engine keeps.
var (
	stringSpecs = map[string]string{"len": "s", "lower": "s", "reverse": "s", "sub": "siI", "upper": "s"}
	mathSpecs   = map[string]string{"abs": "n", "acos": "n", "asin": "n", "atan": "n", "atan2": "nn", "ceil": "n",
		"cos": "n", "cosh": "n", "deg": "n", "exp": "n", "floor": "n", "fmod": "nn", "frexp": "n", "ldexp": "ni",
		"log": "n", "log10": "n", "max": "n*", "min": "n*", "mod": "nn", "modf": "n", "pow": "nn", "rad": "n",
		"sin": "n", "sinh": "n", "sqrt": "n", "tan": "n", "tanh": "n"}
	baseSpecs = map[string]string{"rawequal": "aa", "type": "a", "assert": "a"}
)

// wrapChecked wraps the functions of lib named in specs.
func wrapChecked(L *lua.LState, lib *lua.LTable, specs map[string]string) {
	for name, spec := range specs {
		if f, ok := lib.RawGetString(name).(*lua.LFunction); ok && f.IsG {
			lib.RawSetString(name, checked(L, name, spec, f.GFunction))
		}
	}
}
