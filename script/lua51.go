package script

import (
	"fmt"
	"strings"
)

// A check of a chunk against Lua 5.1's grammar, a port of the error paths
// of llex.c and lparser.c (Lua 5.1.5 as Redis 7.0.15 has it, built
// without LUA_COMPAT_LSTR: a long string does not nest): what Lua 5.1
// refuses is refused with the message Lua 5.1 gives ("user_script:1:
// unexpected symbol near '<eof>'", "'end' expected (to close 'if' at line
// 1) near '<eof>'", "main function has more than 200 local variables"),
// including the limits on syntax levels, locals and upvalues. gopher-lua
// accepts some things Lua 5.1 does not (goto, labels) and words its errors
// otherwise; the check runs before it. It also counts the chunk's tokens,
// which bound what compiling it costs. Code generation limits (registers,
// constants, jump lengths) are not modelled but for the registers of
// argument and expression lists.

// Limits of Lua 5.1 (luaconf.h, lparser.c, lcode.c).
const (
	maxCCalls   = 200 // LUAI_MAXCCALLS: syntax levels
	maxVars     = 200 // LUAI_MAXVARS: locals per function
	maxUpvalues = 60  // LUAI_MAXUPVALUES
	maxStack    = 250 // MAXSTACK: registers per function
	maxSrc      = 80  // MAXSRC: a chunk's name in syntax errors
)

// Tokens above the byte values.
const (
	tkAnd = 257 + iota
	tkBreak
	tkDo
	tkElse
	tkElseif
	tkEnd
	tkFalse
	tkFor
	tkFunction
	tkIf
	tkIn
	tkLocal
	tkNil
	tkNot
	tkOr
	tkRepeat
	tkReturn
	tkThen
	tkTrue
	tkUntil
	tkWhile
	tkConcat
	tkDots
	tkEq
	tkGe
	tkLe
	tkNe
	tkNumber
	tkName
	tkString
	tkEOS
)

var tokenNames = []string{"and", "break", "do", "else", "elseif", "end", "false", "for", "function", "if",
	"in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
	"..", "...", "==", ">=", "<=", "~=", "<number>", "<name>", "<string>", "<eof>"}

var reserved = func() map[string]int {
	m := map[string]int{}
	for i := tkAnd; i <= tkWhile; i++ {
		m[tokenNames[i-tkAnd]] = i
	}
	return m
}()

const eoz = -1

// syntaxError is how the check stops.
type syntaxError struct{ msg string }

// lexer is llex.c's LexState.
type lexer struct {
	src       []byte
	pos       int // index of cur
	cur       int // the current byte, or eoz
	line      int
	lastline  int
	tok       int
	tokName   string // the name of a TK_NAME token
	ahead     int    // lookahead token, tkEOS for none
	aheadNm   string
	buf       []byte
	source    string // the chunk's name in messages
	tokens    int
	maxTokens int
	fs        *funcState
	nCcalls   int
}

// check51 checks code against Lua 5.1's grammar: "" if it parses, else
// Lua 5.1's message, or a message saying the code has more than maxTokens
// tokens.
func check51(code []byte, chunk string, maxTokens int) (msg string) {
	ls := &lexer{src: code, line: 1, source: chunk, ahead: tkEOS, maxTokens: maxTokens}
	defer func() {
		if r := recover(); r != nil {
			se, ok := r.(syntaxError)
			if !ok {
				panic(r)
			}
			msg = se.msg
		}
	}()
	ls.pos = -1
	ls.next()
	fs := &funcState{vararg: true}
	ls.openFunc(fs)
	ls.advance()
	ls.chunk()
	ls.check(tkEOS)
	return ""
}

// next reads the next byte.
func (ls *lexer) next() {
	ls.pos++
	if ls.pos < len(ls.src) {
		ls.cur = int(ls.src[ls.pos])
	} else {
		ls.pos = len(ls.src)
		ls.cur = eoz
	}
}

func (ls *lexer) save(c int)      { ls.buf = append(ls.buf, byte(c)) }
func (ls *lexer) saveAndNext()    { ls.save(ls.cur); ls.next() }
func (ls *lexer) isNewline() bool { return ls.cur == '\n' || ls.cur == '\r' }
func isAlpha(c int) bool          { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigitI(c int) bool         { return c >= '0' && c <= '9' }
func isAlnumI(c int) bool         { return isAlpha(c) || isDigitI(c) }
func isSpaceI(c int) bool         { return c == ' ' || (c >= '\t' && c <= '\r') }
func (ls *lexer) checkNext(set string) bool {
	if ls.cur == eoz || strings.IndexByte(set, byte(ls.cur)) < 0 {
		return false
	}
	ls.saveAndNext()
	return true
}

// token2str is luaX_token2str.
func token2str(tok int) string {
	if tok < tkAnd {
		if tok < 32 || tok == 127 {
			return fmt.Sprintf("char(%d)", tok)
		}
		return string([]byte{byte(tok)})
	}
	return tokenNames[tok-tkAnd]
}

// txtToken is the text an error shows for a token: the buffer for names,
// strings and numbers (up to a NUL, as C reads it).
func (ls *lexer) txtToken(tok int) string {
	switch tok {
	case tkName, tkString, tkNumber:
		s := string(ls.buf)
		if i := strings.IndexByte(s, 0); i >= 0 {
			s = s[:i]
		}
		return s
	}
	return token2str(tok)
}

// lexError is luaX_lexerror (tok 0: no "near").
func (ls *lexer) lexError(msg string, tok int) {
	msg = fmt.Sprintf("%s:%d: %s", ls.source, ls.line, msg)
	if tok != 0 {
		msg = fmt.Sprintf("%s near '%s'", msg, ls.txtToken(tok))
	}
	panic(syntaxError{msg})
}

func (ls *lexer) syntaxError(msg string) { ls.lexError(msg, ls.tok) }

func (ls *lexer) incLine() {
	old := ls.cur
	ls.next()
	if ls.isNewline() && ls.cur != old {
		ls.next()
	}
	ls.line++
}

// advance is luaX_next.
func (ls *lexer) advance() {
	ls.lastline = ls.line
	if ls.ahead != tkEOS {
		ls.tok, ls.tokName = ls.ahead, ls.aheadNm
		ls.ahead = tkEOS
		return
	}
	ls.tok, ls.tokName = ls.llex()
}

// lookahead is luaX_lookahead.
func (ls *lexer) lookahead() { ls.ahead, ls.aheadNm = ls.llex() }

// llex reads one token.
func (ls *lexer) llex() (int, string) {
	ls.tokens++
	if ls.tokens > ls.maxTokens {
		panic(syntaxError{fmt.Sprintf("%s: script too large to compile: more than %d tokens", ls.source, ls.maxTokens)})
	}
	ls.buf = ls.buf[:0]
	for {
		switch c := ls.cur; {
		case c == '\n' || c == '\r':
			ls.incLine()
		case c == '-':
			ls.next()
			if ls.cur != '-' {
				return '-', ""
			}
			ls.comment()
		case c == '[':
			sep := ls.skipSep()
			if sep >= 0 {
				ls.longString(true, sep)
				return tkString, ""
			} else if sep == -1 {
				return '[', ""
			}
			ls.lexError("invalid long string delimiter", tkString)
		case c == '=' || c == '<' || c == '>' || c == '~':
			ls.next()
			if ls.cur != '=' {
				return c, ""
			}
			ls.next()
			switch c {
			case '=':
				return tkEq, ""
			case '<':
				return tkLe, ""
			case '>':
				return tkGe, ""
			}
			return tkNe, ""
		case c == '"' || c == '\'':
			ls.readString(c)
			return tkString, ""
		case c == '.':
			ls.saveAndNext()
			if ls.checkNext(".") {
				if ls.checkNext(".") {
					return tkDots, ""
				}
				return tkConcat, ""
			} else if !isDigitI(ls.cur) {
				return '.', ""
			}
			ls.readNumeral()
			return tkNumber, ""
		case c == eoz:
			return tkEOS, ""
		case isSpaceI(c):
			ls.next()
		case isDigitI(c):
			ls.readNumeral()
			return tkNumber, ""
		case isAlpha(c) || c == '_':
			for isAlnumI(ls.cur) || ls.cur == '_' {
				ls.saveAndNext()
			}
			if r, ok := reserved[string(ls.buf)]; ok {
				return r, ""
			}
			return tkName, string(ls.buf)
		default:
			ls.next()
			return c, ""
		}
	}
}

// comment skips a comment after "--".
func (ls *lexer) comment() {
	ls.next()
	if ls.cur == '[' {
		sep := ls.skipSep()
		ls.buf = ls.buf[:0]
		if sep >= 0 {
			ls.longString(false, sep)
			ls.buf = ls.buf[:0]
			return
		}
	}
	for !ls.isNewline() && ls.cur != eoz {
		ls.next()
	}
}

func (ls *lexer) skipSep() int {
	count := 0
	s := ls.cur
	ls.saveAndNext()
	for ls.cur == '=' {
		ls.saveAndNext()
		count++
	}
	if ls.cur == s {
		return count
	}
	return -count - 1
}

// longString is read_long_string (keep: a string, not a comment).
func (ls *lexer) longString(keep bool, sep int) {
	ls.saveAndNext()
	if ls.isNewline() {
		ls.incLine()
	}
	for {
		switch ls.cur {
		case eoz:
			if keep {
				ls.lexError("unfinished long string", tkEOS)
			}
			ls.lexError("unfinished long comment", tkEOS)
		case ']':
			if ls.skipSep() == sep {
				ls.saveAndNext()
				return
			}
		case '\n', '\r':
			ls.save('\n')
			ls.incLine()
			if !keep {
				ls.buf = ls.buf[:0]
			}
		default:
			if keep {
				ls.saveAndNext()
			} else {
				ls.next()
			}
		}
	}
}

// readString is read_string.
func (ls *lexer) readString(del int) {
	ls.saveAndNext()
	for ls.cur != del {
		switch ls.cur {
		case eoz:
			ls.lexError("unfinished string", tkEOS)
		case '\n', '\r':
			ls.lexError("unfinished string", tkString)
		case '\\':
			ls.escape()
		default:
			ls.saveAndNext()
		}
	}
	ls.saveAndNext()
}

// escape reads an escape sequence in a string.
func (ls *lexer) escape() {
	ls.next()
	switch c := ls.cur; {
	case luaEscape(c) != 0:
		ls.save(luaEscape(c))
		ls.next()
	case c == '\n' || c == '\r':
		ls.save('\n')
		ls.incLine()
	case c == eoz:
	case !isDigitI(c):
		ls.saveAndNext()
	default:
		v := 0
		for i := 0; i < 3 && isDigitI(ls.cur); i++ {
			v = 10*v + ls.cur - '0'
			ls.next()
		}
		if v > 255 {
			ls.lexError("escape sequence too large", tkString)
		}
		ls.save(v)
	}
}

// luaEscape is what a backslash and c stand for, 0 if c is not one of
// the letters of an escape.
func luaEscape(c int) int {
	switch c {
	case 'a':
		return '\a'
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'v':
		return '\v'
	}
	return 0
}

// readNumeral is read_numeral.
func (ls *lexer) readNumeral() {
	for isDigitI(ls.cur) || ls.cur == '.' {
		ls.saveAndNext()
	}
	if ls.checkNext("Ee") {
		ls.checkNext("+-")
	}
	for isAlnumI(ls.cur) || ls.cur == '_' {
		ls.saveAndNext()
	}
	if _, ok := str2number(string(ls.buf)); !ok {
		ls.lexError("malformed number", tkNumber)
	}
}

// Expression kinds (lparser.h's expkind, as far as the checks need them).
const (
	eVoid = iota
	eConst
	eLocal
	eUpval
	eGlobal
	eIndexed
	eValue // a computed value
	eCall
	eVararg
)

// funcState is the part of FuncState the checks need.
type funcState struct {
	prev        *funcState
	actvar      []string // active locals, innermost last
	pending     []string // locals declared, not yet active
	upvals      []upval
	bl          *block
	vararg      bool
	linedefined int
	freereg     int
}

type upval struct {
	kind, info int
}

type block struct {
	prev      *block
	nactvar   int
	breakable bool
}

func (ls *lexer) openFunc(fs *funcState) {
	fs.prev = ls.fs
	ls.fs = fs
}

func (ls *lexer) closeFunc() { ls.fs = ls.fs.prev }

func (ls *lexer) testNext(c int) bool {
	if ls.tok == c {
		ls.advance()
		return true
	}
	return false
}

func (ls *lexer) check(c int) {
	if ls.tok != c {
		ls.syntaxError(fmt.Sprintf("'%s' expected", token2str(c)))
	}
}

func (ls *lexer) checkNextTok(c int) {
	ls.check(c)
	ls.advance()
}

func (ls *lexer) checkMatch(what, who, where int) {
	if ls.testNext(what) {
		return
	}
	if where == ls.line {
		ls.check(what)
	}
	ls.syntaxError(fmt.Sprintf("'%s' expected (to close '%s' at line %d)", token2str(what), token2str(who), where))
}

func (ls *lexer) checkName() string {
	ls.check(tkName)
	name := ls.tokName
	ls.advance()
	return name
}

func (ls *lexer) errorLimit(limit int, what string) {
	fs := ls.fs
	msg := fmt.Sprintf("main function has more than %d %s", limit, what)
	if fs.linedefined != 0 {
		msg = fmt.Sprintf("function at line %d has more than %d %s", fs.linedefined, limit, what)
	}
	ls.lexError(msg, 0)
}

func (ls *lexer) enterLevel() {
	ls.nCcalls++
	if ls.nCcalls > maxCCalls {
		ls.lexError("chunk has too many syntax levels", 0)
	}
}

func (ls *lexer) leaveLevel() { ls.nCcalls-- }

// newLocalvar declares the n-th of the locals being declared.
func (ls *lexer) newLocalvar(name string, n int) {
	fs := ls.fs
	if len(fs.actvar)+n+1 > maxVars {
		ls.errorLimit(maxVars, "local variables")
	}
	fs.pending = append(fs.pending[:n], name)
}

// adjustLocalvars activates the n locals declared last.
func (ls *lexer) adjustLocalvars(n int) {
	fs := ls.fs
	fs.actvar = append(fs.actvar, fs.pending[:n]...)
	fs.pending = fs.pending[:0]
}

func (ls *lexer) removeVars(to int) { ls.fs.actvar = ls.fs.actvar[:to] }

func (ls *lexer) reserveRegs(n int) {
	fs := ls.fs
	if fs.freereg+n >= maxStack {
		ls.syntaxError("function or expression too complex")
	}
	fs.freereg += n
}

// singlevar resolves a name: local, upvalue or global.
func (ls *lexer) singlevar() int {
	name := ls.checkName()
	kind, _ := ls.singlevarAux(ls.fs, name, true)
	return kind
}

func (ls *lexer) singlevarAux(fs *funcState, name string, base bool) (int, int) {
	if fs == nil {
		return eGlobal, 0
	}
	for i := len(fs.actvar) - 1; i >= 0; i-- {
		if fs.actvar[i] == name {
			return eLocal, i
		}
	}
	kind, info := ls.singlevarAux(fs.prev, name, false)
	if kind == eGlobal {
		return eGlobal, 0
	}
	return eUpval, ls.indexUpvalue(fs, kind, info)
}

func (ls *lexer) indexUpvalue(fs *funcState, kind, info int) int {
	for i, u := range fs.upvals {
		if u.kind == kind && u.info == info {
			return i
		}
	}
	if len(fs.upvals)+1 > maxUpvalues {
		saved := ls.fs
		ls.fs = fs
		ls.errorLimit(maxUpvalues, "upvalues")
		ls.fs = saved
	}
	fs.upvals = append(fs.upvals, upval{kind, info})
	return len(fs.upvals) - 1
}

func (ls *lexer) enterBlock(breakable bool) {
	fs := ls.fs
	fs.bl = &block{prev: fs.bl, nactvar: len(fs.actvar), breakable: breakable}
}

func (ls *lexer) leaveBlock() {
	fs := ls.fs
	ls.removeVars(fs.bl.nactvar)
	fs.bl = fs.bl.prev
	fs.freereg = len(fs.actvar)
}

func blockFollow(tok int) bool {
	switch tok {
	case tkElse, tkElseif, tkEnd, tkUntil, tkEOS:
		return true
	}
	return false
}

// chunk -> { stat [';'] }
func (ls *lexer) chunk() {
	ls.enterLevel()
	for last := false; !last && !blockFollow(ls.tok); {
		last = ls.statement()
		ls.testNext(';')
		ls.fs.freereg = len(ls.fs.actvar)
	}
	ls.leaveLevel()
}

func (ls *lexer) block() {
	ls.enterBlock(false)
	ls.chunk()
	ls.leaveBlock()
}

func (ls *lexer) statement() bool {
	line := ls.line
	switch ls.tok {
	case tkIf:
		ls.ifStat(line)
	case tkWhile:
		ls.advance()
		ls.expr()
		ls.enterBlock(true)
		ls.checkNextTok(tkDo)
		ls.block()
		ls.checkMatch(tkEnd, tkWhile, line)
		ls.leaveBlock()
	case tkDo:
		ls.advance()
		ls.block()
		ls.checkMatch(tkEnd, tkDo, line)
	case tkFor:
		ls.forStat(line)
	case tkRepeat:
		ls.enterBlock(true)
		ls.enterBlock(false)
		ls.advance()
		ls.chunk()
		ls.checkMatch(tkUntil, tkRepeat, line)
		ls.expr()
		ls.leaveBlock()
		ls.leaveBlock()
	case tkFunction:
		ls.advance()
		needself := ls.funcName()
		ls.body(needself, line)
	case tkLocal:
		ls.advance()
		if ls.testNext(tkFunction) {
			ls.newLocalvar(ls.checkName(), 0)
			ls.reserveRegs(1)
			ls.adjustLocalvars(1)
			ls.body(false, ls.line)
		} else {
			ls.localStat()
		}
	case tkReturn:
		ls.advance()
		if !blockFollow(ls.tok) && ls.tok != ';' {
			ls.explist()
		}
		return true
	case tkBreak:
		ls.advance()
		bl := ls.fs.bl
		for bl != nil && !bl.breakable {
			bl = bl.prev
		}
		if bl == nil {
			ls.syntaxError("no loop to break")
		}
		return true
	default:
		ls.exprStat()
	}
	return false
}

func (ls *lexer) ifStat(line int) {
	ls.testThenBlock()
	for ls.tok == tkElseif {
		ls.testThenBlock()
	}
	if ls.tok == tkElse {
		ls.advance()
		ls.block()
	}
	ls.checkMatch(tkEnd, tkIf, line)
}

func (ls *lexer) testThenBlock() {
	ls.advance()
	ls.expr()
	ls.checkNextTok(tkThen)
	ls.block()
}

func (ls *lexer) forStat(line int) {
	ls.enterBlock(true)
	ls.advance()
	name := ls.checkName()
	switch ls.tok {
	case '=':
		ls.forNum(name, line)
	case ',', tkIn:
		ls.forList(name)
	default:
		ls.syntaxError("'=' or 'in' expected")
	}
	ls.checkMatch(tkEnd, tkFor, line)
	ls.leaveBlock()
}

func (ls *lexer) forNum(name string, line int) {
	for i, n := range []string{"(for index)", "(for limit)", "(for step)", name} {
		ls.newLocalvar(n, i)
	}
	ls.checkNextTok('=')
	ls.exp1()
	ls.checkNextTok(',')
	ls.exp1()
	if ls.testNext(',') {
		ls.exp1()
	} else {
		ls.reserveRegs(1)
	}
	ls.forBody(1)
}

func (ls *lexer) forList(name string) {
	n := 0
	for _, v := range []string{"(for generator)", "(for state)", "(for control)", name} {
		ls.newLocalvar(v, n)
		n++
	}
	for ls.testNext(',') {
		ls.newLocalvar(ls.checkName(), n)
		n++
	}
	ls.checkNextTok(tkIn)
	nexps, last := ls.explist()
	ls.adjustAssign(3, nexps, last)
	ls.forBody(n - 3)
}

// exp1 is an expression put in the next register.
func (ls *lexer) exp1() {
	ls.expr()
	ls.reserveRegs(1)
}

func (ls *lexer) forBody(nvars int) {
	ls.adjustLocalvars(3 + nvars)
	ls.checkNextTok(tkDo)
	ls.enterBlock(false)
	ls.reserveRegs(nvars)
	ls.block()
	ls.leaveBlock()
}

func (ls *lexer) funcName() bool {
	ls.singlevar()
	for ls.tok == '.' {
		ls.advance()
		ls.checkName()
	}
	if ls.tok == ':' {
		ls.advance()
		ls.checkName()
		return true
	}
	return false
}

func (ls *lexer) localStat() {
	n := 0
	for {
		ls.newLocalvar(ls.checkName(), n)
		n++
		if !ls.testNext(',') {
			break
		}
	}
	nexps, last := 0, eVoid
	if ls.testNext('=') {
		nexps, last = ls.explist()
	}
	ls.adjustAssign(n, nexps, last)
	ls.adjustLocalvars(n)
}

// adjustAssign reserves the registers of nvars values from nexps
// expressions.
func (ls *lexer) adjustAssign(nvars, nexps, last int) {
	extra := nvars - nexps
	if last == eCall || last == eVararg {
		extra++
		if extra < 0 {
			extra = 0
		}
		if extra > 1 {
			ls.reserveRegs(extra - 1)
		}
		return
	}
	if last != eVoid {
		ls.reserveRegs(1)
	}
	if extra > 0 {
		ls.reserveRegs(extra)
	}
}

func (ls *lexer) exprStat() {
	kind := ls.primaryExp()
	if kind != eCall {
		ls.assignment(kind, 1)
	}
}

func (ls *lexer) assignment(kind, nvars int) {
	if kind < eLocal || kind > eIndexed {
		ls.syntaxError("syntax error")
	}
	if ls.testNext(',') {
		next := ls.primaryExp()
		if nvars > maxCCalls-ls.nCcalls {
			ls.errorLimit(maxCCalls-ls.nCcalls, "variables in assignment")
		}
		ls.assignment(next, nvars+1)
		return
	}
	ls.checkNextTok('=')
	ls.explist()
}

// body -> '(' parlist ')' chunk END
func (ls *lexer) body(needself bool, line int) {
	fs := &funcState{linedefined: line}
	ls.openFunc(fs)
	ls.checkNextTok('(')
	if needself {
		ls.newLocalvar("self", 0)
		ls.adjustLocalvars(1)
	}
	ls.parlist()
	ls.checkNextTok(')')
	ls.chunk()
	ls.checkMatch(tkEnd, tkFunction, line)
	ls.closeFunc()
}

func (ls *lexer) parlist() {
	fs := ls.fs
	n := 0
	if ls.tok != ')' {
		for {
			switch ls.tok {
			case tkName:
				ls.newLocalvar(ls.checkName(), n)
				n++
			case tkDots:
				ls.advance()
				ls.newLocalvar("arg", n) // LUA_COMPAT_VARARG
				n++
				fs.vararg = true
			default:
				ls.syntaxError("<name> or '...' expected")
			}
			if fs.vararg || !ls.testNext(',') {
				break
			}
		}
	}
	ls.adjustLocalvars(n)
	ls.reserveRegs(len(fs.actvar))
}

// explist -> expr { ',' expr }: the count and the kind of the last.
func (ls *lexer) explist() (int, int) {
	n := 1
	kind := ls.expr()
	for ls.testNext(',') {
		ls.reserveRegs(1)
		kind = ls.expr()
		n++
	}
	return n, kind
}

func (ls *lexer) funcArgs() {
	line := ls.line
	switch ls.tok {
	case '(':
		if line != ls.lastline {
			ls.syntaxError("ambiguous syntax (function call x new statement)")
		}
		ls.advance()
		if ls.tok != ')' {
			ls.explist()
		}
		ls.checkMatch(')', '(', line)
	case '{':
		ls.constructor()
	case tkString:
		ls.advance()
	default:
		ls.syntaxError("function arguments expected")
	}
}

func (ls *lexer) prefixExp() int {
	switch ls.tok {
	case '(':
		line := ls.line
		ls.advance()
		ls.expr()
		ls.checkMatch(')', '(', line)
		return eValue
	case tkName:
		return ls.singlevar()
	}
	ls.syntaxError("unexpected symbol")
	return eVoid
}

func (ls *lexer) primaryExp() int {
	base := ls.fs.freereg
	kind := ls.prefixExp()
	for {
		switch ls.tok {
		case '.':
			ls.advance()
			ls.checkName()
			kind = eIndexed
		case '[':
			ls.advance()
			ls.expr()
			ls.checkNextTok(']')
			kind = eIndexed
		case ':':
			ls.advance()
			ls.checkName()
			ls.reserveRegs(2)
			ls.funcArgs()
			ls.fs.freereg = base + 1
			kind = eCall
		case '(', tkString, '{':
			ls.reserveRegs(1)
			ls.funcArgs()
			ls.fs.freereg = base + 1
			kind = eCall
		default:
			return kind
		}
	}
}

func (ls *lexer) simpleExp() int {
	switch ls.tok {
	case tkNumber, tkString, tkNil, tkTrue, tkFalse:
		ls.advance()
		return eConst
	case tkDots:
		if !ls.fs.vararg {
			ls.syntaxError("cannot use '...' outside a vararg function")
		}
		ls.advance()
		return eVararg
	case '{':
		ls.constructor()
		return eValue
	case tkFunction:
		ls.advance()
		ls.body(false, ls.line)
		return eValue
	}
	return ls.primaryExp()
}

func (ls *lexer) constructor() {
	line := ls.line
	base := ls.fs.freereg
	ls.reserveRegs(1)
	ls.checkNextTok('{')
	pending := 0
	for {
		if ls.tok == '}' {
			break
		}
		if pending == 50 { // LFIELDS_PER_FLUSH
			ls.fs.freereg -= pending
			pending = 0
		}
		switch {
		case ls.tok == tkName:
			ls.lookahead()
			if ls.ahead != '=' {
				ls.listField(&pending)
			} else {
				ls.recField()
			}
		case ls.tok == '[':
			ls.recField()
		default:
			ls.listField(&pending)
		}
		if !ls.testNext(',') && !ls.testNext(';') {
			break
		}
	}
	ls.checkMatch('}', '{', line)
	ls.fs.freereg = base + 1
}

func (ls *lexer) listField(pending *int) {
	ls.expr()
	ls.reserveRegs(1)
	*pending++
}

func (ls *lexer) recField() {
	reg := ls.fs.freereg
	if ls.tok == tkName {
		ls.checkName()
	} else {
		ls.advance()
		ls.expr()
		ls.checkNextTok(']')
	}
	ls.checkNextTok('=')
	ls.expr()
	ls.fs.freereg = reg
}

// Binary operators and their priorities (left, right).
var binPriority = map[int][2]int{
	'+': {6, 6}, '-': {6, 6}, '*': {7, 7}, '/': {7, 7}, '%': {7, 7},
	'^': {10, 9}, tkConcat: {5, 4},
	tkNe: {3, 3}, tkEq: {3, 3}, '<': {3, 3}, tkLe: {3, 3}, '>': {3, 3}, tkGe: {3, 3},
	tkAnd: {2, 2}, tkOr: {1, 1},
}

const unaryPriority = 8

func (ls *lexer) expr() int {
	kind, _ := ls.subexpr(0)
	return kind
}

// subexpr -> (simpleexp | unop subexpr) { binop subexpr }
func (ls *lexer) subexpr(limit int) (int, int) {
	ls.enterLevel()
	kind := eValue
	if ls.tok == tkNot || ls.tok == '-' || ls.tok == '#' {
		ls.advance()
		ls.subexpr(unaryPriority)
	} else {
		kind = ls.simpleExp()
	}
	op := ls.tok
	for {
		p, ok := binPriority[op]
		if !ok || p[0] <= limit {
			break
		}
		ls.advance()
		_, op = ls.subexpr(p[1])
		kind = eValue
	}
	ls.leaveLevel()
	return kind, op
}
