package script

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

// Compiling. A body is checked against Lua 5.1's grammar first (lua51.go),
// so that what Lua 5.1 refuses is refused with Lua 5.1's message, then
// parsed and compiled by gopher-lua. Between the two the syntax tree is
// rewritten: every concatenation a .. b .. c becomes a call of a hidden
// function, which formats numbers as Lua 5.1 does ("%.14g"; gopher-lua's
// own concatenation prints them as Go does) and checks the size of the
// result against the memory limit before building it; and a table
// constructor with two hash fields or more becomes a call of another,
// which notes the sizes Lua 5.1 would preallocate for it, so that its keys
// iterate in Lua 5.1's order (luaorder.go).

// concatName is the global the rewritten concatenations call, tableName
// the one the rewritten constructors call. No Lua identifier can spell
// them.
const (
	concatName = "\x00concat"
	tableName  = "\x00table"
)

// bytesPerToken is about what gopher-lua's parser and compiler allocate
// for each token of a chunk (measured: 200 to 260 bytes).
const bytesPerToken = 256

// userScript is the chunk name of a script body: positions read
// "user_script:1:", sources "@user_script", as in Redis.
const userScript = "user_script"

// compileChunk compiles code whose chunk name is chunkname, Lua-style: "@x"
// names a file x, "=x" is x as is, anything else is the code itself. It
// returns the message Lua 5.1 would give when it does not compile, or,
// for code of more than maxTokens tokens, a message saying it is too large
// to compile (compiling costs about 200 bytes of memory a token).
func compileChunk(code []byte, chunkname string, maxTokens int) (*lua.FunctionProto, string) {
	name := chunkID(chunkname, luaIDSize)
	if msg := check51(code, chunkID(chunkname, maxSrc), maxTokens); msg != "" {
		return nil, msg
	}
	chunk, err := parse.Parse(bytes.NewReader(code), name)
	if err != nil {
		return nil, parseMessage(err, name)
	}
	rewriteStmts(chunk)
	proto, err := compileSafely(chunk, name)
	if err != nil {
		return nil, fmt.Sprintf("%s: %v", name, err)
	}
	// A chunk is vararg, but without Lua 5.0's arg table (which gopher-lua
	// would build, a table and its hash map, on every call).
	proto.IsVarArg = lua.VarArgIsVarArg
	return proto, ""
}

// compileSafely runs gopher-lua's compiler, which panics on some inputs.
func compileSafely(chunk []ast.Stmt, name string) (proto *lua.FunctionProto, err error) {
	defer func() {
		if r := recover(); r != nil {
			proto, err = nil, fmt.Errorf("%v", r)
		}
	}()
	return lua.Compile(chunk, name)
}

// parseMessage words a gopher-lua parse error that the Lua 5.1 check let
// through: rare, since the check refuses what Lua 5.1 refuses.
func parseMessage(err error, name string) string {
	if pe, ok := err.(*parse.Error); ok {
		line := pe.Pos.Line
		if line < 1 {
			line = 1
		}
		return fmt.Sprintf("%s:%d: %s near '%s'", name, line, strings.TrimSpace(pe.Message), pe.Token)
	}
	return name + ": " + strings.TrimSpace(err.Error())
}

// luaIDSize is LUA_IDSIZE, the room for a chunk's name in runtime
// positions (syntax errors have maxSrc).
const luaIDSize = 60

// chunkID is Lua 5.1's luaO_chunkid: how positions name a chunk whose
// source is source, in a buffer of bufflen bytes.
func chunkID(source string, bufflen int) string {
	switch {
	case strings.HasPrefix(source, "="):
		s := source[1:]
		if len(s) > bufflen-1 {
			s = s[:bufflen-1]
		}
		return s
	case strings.HasPrefix(source, "@"):
		s := source[1:]
		room := bufflen - len(" '...' ") - 1
		if len(s) > room {
			s = "..." + s[len(s)-room:]
		}
		return s
	}
	l := strings.IndexAny(source, "\n\r")
	if l < 0 {
		l = len(source)
	}
	room := bufflen - len(` [string "..."] `) - 1
	if l > room {
		l = room
	}
	if l < len(source) {
		return `[string "` + source[:l] + `..."]`
	}
	return `[string "` + source + `"]`
}

// rewriteStmts rewrites the concatenations in stmts (see concatName).
func rewriteStmts(stmts []ast.Stmt) {
	for _, s := range stmts {
		rewriteStmt(s)
	}
}

func rewriteStmt(s ast.Stmt) {
	switch s := s.(type) {
	case *ast.AssignStmt:
		rewriteExprs(s.Lhs)
		rewriteExprs(s.Rhs)
	case *ast.LocalAssignStmt:
		rewriteExprs(s.Exprs)
	case *ast.FuncCallStmt:
		s.Expr = rewriteExpr(s.Expr)
	case *ast.DoBlockStmt:
		rewriteStmts(s.Stmts)
	case *ast.WhileStmt:
		s.Condition = rewriteExpr(s.Condition)
		rewriteStmts(s.Stmts)
	case *ast.RepeatStmt:
		s.Condition = rewriteExpr(s.Condition)
		rewriteStmts(s.Stmts)
	case *ast.IfStmt:
		s.Condition = rewriteExpr(s.Condition)
		rewriteStmts(s.Then)
		rewriteStmts(s.Else)
	case *ast.NumberForStmt:
		s.Init, s.Limit = rewriteExpr(s.Init), rewriteExpr(s.Limit)
		if s.Step != nil {
			s.Step = rewriteExpr(s.Step)
		}
		rewriteStmts(s.Stmts)
	case *ast.GenericForStmt:
		rewriteExprs(s.Exprs)
		rewriteStmts(s.Stmts)
	case *ast.FuncDefStmt:
		if s.Name != nil {
			s.Name.Func = rewriteExpr(s.Name.Func)
			if s.Name.Receiver != nil {
				s.Name.Receiver = rewriteExpr(s.Name.Receiver)
			}
		}
		rewriteStmts(s.Func.Stmts)
	case *ast.ReturnStmt:
		rewriteExprs(s.Exprs)
	}
}

func rewriteExprs(es []ast.Expr) {
	for i, e := range es {
		es[i] = rewriteExpr(e)
	}
}

func rewriteExpr(e ast.Expr) ast.Expr {
	switch e := e.(type) {
	case *ast.StringConcatOpExpr:
		return concatCall(e)
	case *ast.AttrGetExpr:
		e.Object, e.Key = rewriteExpr(e.Object), rewriteExpr(e.Key)
	case *ast.TableExpr:
		na, nh := 0, 0
		for _, f := range e.Fields {
			if f.Key != nil {
				f.Key = rewriteExpr(f.Key)
				nh++
			} else {
				na++
			}
			f.Value = rewriteExpr(f.Value)
		}
		if nh >= 2 {
			return hintCall(e, na, nh)
		}
	case *ast.FuncCallExpr:
		if e.Func != nil {
			e.Func = rewriteExpr(e.Func)
		}
		if e.Receiver != nil {
			e.Receiver = rewriteExpr(e.Receiver)
		}
		rewriteExprs(e.Args)
	case *ast.LogicalOpExpr:
		e.Lhs, e.Rhs = rewriteExpr(e.Lhs), rewriteExpr(e.Rhs)
	case *ast.RelationalOpExpr:
		e.Lhs, e.Rhs = rewriteExpr(e.Lhs), rewriteExpr(e.Rhs)
	case *ast.ArithmeticOpExpr:
		e.Lhs, e.Rhs = rewriteExpr(e.Lhs), rewriteExpr(e.Rhs)
	case *ast.UnaryMinusOpExpr:
		e.Expr = rewriteExpr(e.Expr)
	case *ast.UnaryNotOpExpr:
		e.Expr = rewriteExpr(e.Expr)
	case *ast.UnaryLenOpExpr:
		e.Expr = rewriteExpr(e.Expr)
	case *ast.FunctionExpr:
		rewriteStmts(e.Stmts)
	}
	return e
}

// concatCall turns a .. b .. c (a chain down the right-hand sides, as
// Lua compiles it into one instruction) into (concat(a, b, c)): one value,
// never a tail call.
func concatCall(e *ast.StringConcatOpExpr) ast.Expr {
	var args []ast.Expr
	var cur ast.Expr = e
	for {
		c, ok := cur.(*ast.StringConcatOpExpr)
		if !ok {
			args = append(args, rewriteExpr(cur))
			break
		}
		args = append(args, rewriteExpr(c.Lhs))
		cur = c.Rhs
	}
	fn := &ast.IdentExpr{Value: concatName}
	fn.SetLine(e.Line())
	fn.SetLastLine(e.LastLine())
	call := &ast.FuncCallExpr{Func: fn, Args: args, AdjustRet: true}
	call.SetLine(e.Line())
	call.SetLastLine(e.LastLine())
	return call
}

// hintCall turns a constructor into (table(na, nh, {...}, keys...)).
func hintCall(e *ast.TableExpr, na, nh int) ast.Expr {
	if n := len(e.Fields); n > 0 && e.Fields[n-1].Key == nil {
		switch e.Fields[n-1].Value.(type) {
		case *ast.FuncCallExpr, *ast.Comma3Expr:
			na-- // a call or ... at the end is not counted
		}
	}
	fn := &ast.IdentExpr{Value: tableName}
	fn.SetLine(e.Line())
	args := []ast.Expr{&ast.NumberExpr{Value: strconv.Itoa(na)}, &ast.NumberExpr{Value: strconv.Itoa(nh)}, e}
	// The constant keys, in the order the constructor sets them (nil
	// stands for a key computed at run time).
	for _, f := range e.Fields {
		switch k := f.Key.(type) {
		case *ast.StringExpr:
			args = append(args, &ast.StringExpr{Value: k.Value})
		case *ast.NumberExpr:
			args = append(args, &ast.NumberExpr{Value: k.Value})
		case *ast.TrueExpr:
			args = append(args, &ast.TrueExpr{})
		case *ast.FalseExpr:
			args = append(args, &ast.FalseExpr{})
		case nil:
		default:
			args = append(args, &ast.NilExpr{})
		}
	}
	for _, a := range args {
		if a != e {
			a.SetLine(e.Line())
		}
	}
	call := &ast.FuncCallExpr{Func: fn, Args: args, AdjustRet: true}
	call.SetLine(e.Line())
	call.SetLastLine(e.LastLine())
	return call
}
