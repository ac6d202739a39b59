package script

import (
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Runtime errors worded as Lua 5.1 words them. gopher-lua says "cannot
// perform add operation between nil and number" where Lua 5.1 says
// "attempt to perform arithmetic on local 'a' (a nil value)": Lua names
// the variable by looking at the bytecode (getobjname and symbexec in
// ldebug.c). This file does the same on gopher-lua's bytecode, whose
// opcodes are Lua 5.1's (plus MOVEN, GETTABLEKS, SETTABLEKS): when an error
// is raised by the interpreter itself (the failing frame is a Lua
// function), the instruction at the failing pc says what was attempted on
// which register, and the instructions before it say where that
// register's value came from. It runs only when a run fails, or when pcall
// catches an error.
//
// gopher-lua does not export a frame's pc; framePc reads it (internals.go).
// If that ever fails, the message keeps gopher-lua's wording.

// gopher-lua's instruction fields (opcode.go).
const (
	opBitRK  = 1 << 8
	opMaxSBx = (1<<18 - 1) >> 1
)

func opCode(i uint32) int { return int(i >> 26) }
func opA(i uint32) int    { return int(i>>18) & 0xff }
func opB(i uint32) int    { return int(i & 0x1ff) }
func opC(i uint32) int    { return int(i>>9) & 0x1ff }
func opBx(i uint32) int   { return int(i & 0x3ffff) }
func opSBx(i uint32) int  { return opBx(i) - opMaxSBx }

// frameAt is a Lua frame's function and the index of the instruction it is
// executing.
type frameAt struct {
	dbg   *lua.Debug
	proto *lua.FunctionProto
	pc    int
}

// luaFrame returns the frame level calls up, if it is a Lua function.
func luaFrame(L *lua.LState, level int) (frameAt, bool) {
	dbg, ok := L.GetStack(level)
	if !ok {
		return frameAt{}, false
	}
	fn, err := L.GetInfo("f", dbg, lua.LNil)
	if err != nil {
		return frameAt{}, false
	}
	f, ok := fn.(*lua.LFunction)
	if !ok || f.IsG || f.Proto == nil {
		return frameAt{}, false
	}
	pc, ok := framePc(dbg)
	if !ok || pc < 1 || pc > len(f.Proto.Code) {
		return frameAt{}, false
	}
	return frameAt{dbg: dbg, proto: f.Proto, pc: pc - 1}, true
}

// reg is the value of register r of the frame.
func (f frameAt) reg(L *lua.LState, r int) lua.LValue {
	name, v := L.GetLocal(f.dbg, r+1)
	if name == "" {
		return lua.LNil
	}
	return v
}

// rk is the value of an RK operand: a register or a constant.
func (f frameAt) rk(L *lua.LState, x int) (lua.LValue, bool) {
	if x&opBitRK != 0 {
		k := x &^ opBitRK
		if k < len(f.proto.Constants) {
			return f.proto.Constants[k], false
		}
		return lua.LNil, false
	}
	return f.reg(L, x), true
}

// luaMessage rewords s, an error the interpreter raised in the function
// one level up, as Lua 5.1 words it; other errors are returned as they
// are.
func (st *state) luaMessage(L *lua.LState, s string) string {
	f, ok := luaFrame(L, 1)
	if !ok {
		return s
	}
	msg := f.describe(L)
	if msg == "" {
		return s
	}
	if i := strings.Index(s, ": "); i >= 0 && strings.HasPrefix(s, f.proto.SourceName+":") {
		return s[:i+2] + msg
	}
	return msg
}

// describe is the Lua 5.1 message for the failing instruction, "" when
// the instruction is not one whose failure it knows.
func (f frameAt) describe(L *lua.LState) string {
	i := f.proto.Code[f.pc]
	a, b, c := opA(i), opB(i), opC(i)
	switch op := opCode(i); op {
	case lua.OP_ADD, lua.OP_SUB, lua.OP_MUL, lua.OP_DIV, lua.OP_MOD, lua.OP_POW:
		vb, rb := f.rk(L, b)
		vc, rc := f.rk(L, c)
		bad, reg, isReg := vb, b, rb
		if _, ok := luaToNumber(vb); ok {
			bad, reg, isReg = vc, c, rc
		}
		if _, ok := luaToNumber(bad); ok {
			return ""
		}
		return "attempt to perform arithmetic on " + f.varinfo(L, bad, reg, isReg)
	case lua.OP_UNM:
		return f.typeErr(L, b, "perform arithmetic on", func(v lua.LValue) bool { _, ok := luaToNumber(v); return !ok })
	case lua.OP_LEN:
		return f.typeErr(L, b, "get length of", func(v lua.LValue) bool { return v.Type() != lua.LTTable && v.Type() != lua.LTString })
	case lua.OP_GETTABLE, lua.OP_GETTABLEKS, lua.OP_SELF:
		return f.typeErr(L, b, "index", notIndexable)
	case lua.OP_SETTABLE, lua.OP_SETTABLEKS:
		return f.typeErr(L, a, "index", notIndexable)
	case lua.OP_CALL, lua.OP_TAILCALL:
		return f.typeErr(L, a, "call", func(v lua.LValue) bool { return v.Type() != lua.LTFunction })
	case lua.OP_TFORLOOP: // Lua calls a copy of the generator, which has no name
		if v := f.reg(L, a); v.Type() != lua.LTFunction {
			return "attempt to call a " + v.Type().String() + " value"
		}
	case lua.OP_LT, lua.OP_LE:
		vb, _ := f.rk(L, b)
		vc, _ := f.rk(L, c)
		return compareMessage(vb, vc)
	case lua.OP_FORPREP, lua.OP_FORLOOP:
		for k, what := range []string{"initial value", "limit", "step"} {
			if _, ok := luaToNumber(f.reg(L, a+k)); !ok {
				return "'for' " + what + " must be a number"
			}
		}
	}
	return ""
}

// typeErr is luaG_typeerror for register r, when bad says its value is
// what failed.
func (f frameAt) typeErr(L *lua.LState, r int, op string, bad func(lua.LValue) bool) string {
	v := f.reg(L, r)
	if !bad(v) {
		return ""
	}
	return "attempt to " + op + " " + f.varinfo(L, v, r, true)
}

func notIndexable(v lua.LValue) bool {
	t := v.Type()
	return t != lua.LTTable && t != lua.LTString && t != lua.LTUserData
}

// compareMessage is luaG_ordererror.
func compareMessage(a, b lua.LValue) string {
	t1, t2 := a.Type().String(), b.Type().String()
	if t1 == t2 {
		if t1 == "number" || t1 == "string" {
			return ""
		}
		return "attempt to compare two " + t1 + " values"
	}
	return "attempt to compare " + t1 + " with " + t2
}

// varinfo is "local 'a' (a nil value)", or "a nil value" when the value
// has no name.
func (f frameAt) varinfo(L *lua.LState, v lua.LValue, r int, isReg bool) string {
	typ := v.Type().String()
	if isReg {
		if kind, name := f.objName(r, 0); kind != "" {
			return fmt.Sprintf("%s '%s' (a %s value)", kind, name, typ)
		}
	}
	return "a " + typ + " value"
}

// objName is getobjname: what register r holds at the frame's pc.
func (f frameAt) objName(r, depth int) (kind, name string) {
	if name := localName(f.proto, r+1, f.pc, 0); name != "" {
		return "local", name
	}
	if depth > 16 {
		return "", ""
	}
	last := symbexec(f.proto, f.pc, r)
	if last < 0 {
		return "", ""
	}
	i := f.proto.Code[last]
	switch opCode(i) {
	case lua.OP_GETGLOBAL:
		if s, ok := f.proto.Constants[opBx(i)].(lua.LString); ok {
			return "global", string(s)
		}
	case lua.OP_MOVE, lua.OP_MOVEN:
		if b := opB(i); b < opA(i) {
			g := f
			g.pc = last
			return g.objName(b, depth+1)
		}
	case lua.OP_GETTABLE, lua.OP_GETTABLEKS:
		return "field", f.kname(opC(i), last)
	case lua.OP_GETUPVAL:
		if b := opB(i); b < len(f.proto.DbgUpvalues) {
			return "upvalue", f.proto.DbgUpvalues[b]
		}
		return "upvalue", "?"
	case lua.OP_SELF:
		return "method", f.kname(opC(i), last)
	}
	return "", ""
}

// kname is the name of a constant string key, "?" otherwise. gopher-lua
// sometimes loads the key into a register first (LOADK), where Lua 5.1
// names the constant: the register's LOADK counts as the constant.
func (f frameAt) kname(c, pc int) string {
	if c&opBitRK != 0 {
		if s, ok := f.proto.Constants[c&^opBitRK].(lua.LString); ok {
			return string(s)
		}
		return "?"
	}
	if last := symbexec(f.proto, pc, c); last >= 0 && opCode(f.proto.Code[last]) == lua.OP_LOADK {
		if s, ok := f.proto.Constants[opBx(f.proto.Code[last])].(lua.LString); ok {
			return string(s)
		}
	}
	return "?"
}

// localName is luaF_getlocalname: the n-th local active at pc.
func localName(p *lua.FunctionProto, n, pc, _ int) string {
	for i, l := range p.DbgLocals {
		if l.StartPc > pc {
			break
		}
		if start, end := localRange(p, i); start <= pc && pc < end {
			n--
			if n == 0 {
				return l.Name
			}
		}
	}
	return ""
}

// localRange is where local i is active, as Lua 5.1 has it. gopher-lua
// gets the locals of loops wrong: it starts a loop's hidden locals ("(for
// generator)" and the like) before the expressions that set them, where
// Lua 5.1 starts them at the loop's FORPREP or at the jump to its
// TFORLOOP, and it ends them too early, and the loop's own variables (and
// the last locals of its body) before they start, where Lua 5.1 ends them
// at the loop's FORLOOP or TFORLOOP.
func localRange(p *lua.FunctionProto, i int) (start, end int) {
	l := p.DbgLocals[i]
	start, end = l.StartPc, l.EndPc
	hidden := strings.HasPrefix(l.Name, "(for ")
	loopVar := i >= 3 && strings.HasPrefix(p.DbgLocals[i-1].Name, "(for ") ||
		i > 3 && loopVarAt(p, i-1) && p.DbgLocals[i-1].StartPc == l.StartPc
	switch {
	case hidden || loopVar:
	case end == 0:
		return start, len(p.Code)
	case end > start:
		return start, end
	}
	sawJump := false
	for pc := l.StartPc; pc < len(p.Code); pc++ {
		in := p.Code[pc]
		switch opCode(in) {
		case lua.OP_FORPREP:
			if hidden {
				start = pc
			}
		case lua.OP_JMP:
			dest := pc + 1 + opSBx(in)
			if hidden && !sawJump && dest > pc && dest < len(p.Code) && opCode(p.Code[dest]) == lua.OP_TFORLOOP {
				start, sawJump = pc, true
			}
		case lua.OP_FORLOOP:
			if hidden {
				return start, pc + 1
			}
			return start, pc
		case lua.OP_TFORLOOP:
			if hidden {
				if !sawJump {
					start = pc - 1
				}
				return start, pc + 2
			}
			return start, pc
		}
	}
	return start, len(p.Code)
}

// loopVarAt reports whether local i is a loop's variable: declared right
// after the loop's hidden locals, or with the one before it.
func loopVarAt(p *lua.FunctionProto, i int) bool {
	for ; i >= 3; i-- {
		if strings.HasPrefix(p.DbgLocals[i-1].Name, "(for ") {
			return true
		}
		if p.DbgLocals[i-1].StartPc != p.DbgLocals[i].StartPc {
			return false
		}
	}
	return false
}

// symbexec returns the last instruction before lastpc that set register
// reg, following forward jumps as Lua 5.1's symbexec does; -1 if none.
func symbexec(p *lua.FunctionProto, lastpc, reg int) int {
	last := -1
	for pc := 0; pc < lastpc; pc++ {
		i := p.Code[pc]
		op, a, b, c := opCode(i), opA(i), opB(i), opC(i)
		if setsA(op) && a == reg {
			last = pc
		}
		switch op {
		case lua.OP_LOADNIL:
			if a <= reg && reg <= b {
				last = pc
			}
		case lua.OP_SELF:
			if reg == a+1 {
				last = pc
			}
		case lua.OP_TFORLOOP:
			if reg >= a+2 {
				last = pc
			}
		case lua.OP_CALL, lua.OP_TAILCALL:
			if reg >= a {
				last = pc
			}
		case lua.OP_JMP, lua.OP_FORLOOP, lua.OP_FORPREP:
			if dest := pc + 1 + opSBx(i); pc < dest && dest <= lastpc {
				pc += opSBx(i)
			}
		case lua.OP_CLOSURE:
			if bx := opBx(i); bx < len(p.FunctionPrototypes) {
				pc += int(p.FunctionPrototypes[bx].NumUpvalues)
			}
		case lua.OP_SETLIST:
			if c == 0 {
				pc++
			}
		}
	}
	return last
}

// setsA reports whether an instruction writes its register A.
func setsA(op int) bool {
	switch op {
	case lua.OP_SETGLOBAL, lua.OP_SETUPVAL, lua.OP_SETTABLE, lua.OP_SETTABLEKS, lua.OP_JMP,
		lua.OP_EQ, lua.OP_LT, lua.OP_LE, lua.OP_RETURN, lua.OP_TFORLOOP, lua.OP_SETLIST,
		lua.OP_CLOSE, lua.OP_NOP:
		return false
	}
	return true
}

// concatOperandInfo names the argument arg (1-based) of the call to the
// concatenation function (compile.go) made one level up: the operand's
// register is the call's A+arg.
func concatOperandInfo(L *lua.LState, v lua.LValue, arg int) string {
	f, ok := luaFrame(L, 1)
	if !ok {
		return "a " + v.Type().String() + " value"
	}
	i := f.proto.Code[f.pc]
	if op := opCode(i); op != lua.OP_CALL && op != lua.OP_TAILCALL {
		return "a " + v.Type().String() + " value"
	}
	return f.varinfo(L, v, opA(i)+arg, true)
}
