package script

import (
	"runtime"
	"sync"

	lua "github.com/yuin/gopher-lua"

	"github.com/rlserver/rlserver/values"
)

// Interpreter limits. Lua 5.1 allows about 8000 values on the C stack and
// (as Redis builds it) 16390 nested calls of a Lua function from a script;
// a state here grows its stacks on demand up to these.
const (
	callStackSize   = 16391   // nested Lua calls: "stack overflow" past it, as in Redis
	registryInitial = 1024    // value stack slots, to start with
	registryMax     = 1 << 18 // value stack slots at most (4 MiB)
	maxFnCache      = 256     // compiled closures kept per state
)

// maxArrayIndex bounds the array part of gopher-lua's tables (lua.MaxArrayIndex,
// 64M by default): t[n] = v fills the array up to n with nils in one
// instruction, so with the default a script could allocate 1 GiB at once.
// Integer keys past it go to the table's hash part. 4M entries are 64 MiB,
// the default memory limit: a table that needed more would be over it. The
// setting is gopher-lua's, for the whole process.
const maxArrayIndex = 1 << 22

func init() { lua.MaxArrayIndex = maxArrayIndex }

// state is one Lua interpreter with Redis's libraries, its read-only
// globals, and the tables it reuses between runs. A state runs one script
// at a time; statePool hands states out.
type state struct {
	e       *Engine
	L       *lua.LState
	globals *lua.LTable // the globals' contents; scripts see env
	env     *lua.LTable // the read-only proxy scripts see as _G

	// ro maps each read-only proxy, and each read-only view of a
	// metatable, to the table whose contents it shows.
	ro        map[*lua.LTable]*lua.LTable
	globalsMT *lua.LTable // view getmetatable(_G) returns
	stringMT  *lua.LTable // view getmetatable("") returns

	keys, argv *lua.LTable
	handler    *lua.LFunction // the error handler of a run
	reword     *lua.LFunction // the error handler of pcall
	fns        map[*lua.FunctionProto]*lua.LFunction

	hook     hook
	walker   walker                     // measures the run's memory (memwalk.go)
	orders   map[*lua.LTable]*traversal // next's traversals in progress
	hints    map[*lua.LTable]*tableHint // tables made by constructors, this run
	x        *Exec                      // the run in progress
	fail     errInfo                    // what the error handler saw
	args     [][]byte
	argBuf   []byte
	argEnds  []int
	json     jsonConfig
	jsonNull *lua.LUserData
}

// statePool keeps idle states for reuse. New states are built on demand;
// at most max idle ones are kept.
type statePool struct {
	e    *Engine
	mu   sync.Mutex
	idle []*state
	max  int
}

func (p *statePool) init(e *Engine, max int) {
	if max <= 0 {
		max = 2 * runtime.GOMAXPROCS(0)
	}
	p.e, p.max = e, max
}

// get returns an idle state, or a new one.
func (p *statePool) get() *state {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		st := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return st
	}
	p.mu.Unlock()
	return newState(p.e)
}

// put returns st for reuse, or drops it if enough are idle.
func (p *statePool) put(st *state) {
	p.mu.Lock()
	keep := len(p.idle) < p.max
	if keep {
		p.idle = append(p.idle, st)
	}
	p.mu.Unlock()
	if !keep {
		p.e.watch.remove(st)
	}
}

// newState builds an interpreter: the libraries Redis loads, the redis
// table, the sandbox.
func newState(e *Engine) *state {
	L := lua.NewState(lua.Options{
		SkipOpenLibs:        true,
		CallStackSize:       callStackSize,
		RegistrySize:        registryInitial,
		RegistryMaxSize:     registryMax,
		MinimizeStackMemory: true,
	})
	st := &state{e: e, L: L, ro: map[*lua.LTable]*lua.LTable{}, fns: map[*lua.FunctionProto]*lua.LFunction{}}
	st.hook.st = st
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{"", lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath}, {lua.CoroutineLibName, lua.OpenCoroutine}} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	st.globals = L.G.Global
	st.openBase()
	st.openString()
	st.openTable()
	st.openMath()
	st.openCoroutine()
	st.globals.RawSetString("cjson", st.openCjson())
	st.globals.RawSetString("bit", st.openBit())
	st.globals.RawSetString("struct", st.openStruct())
	st.globals.RawSetString("cmsgpack", st.openCmsgpack())
	st.globals.RawSetString("redis", st.openRedis())
	st.handler = L.NewFunction(st.errorHandler)
	st.reword = L.NewFunction(st.rewordError)
	st.globals.RawSetString("__redis__err__handler", L.NewFunction(st.redisErrHandler))
	st.keys, st.argv = L.NewTable(), L.NewTable()
	st.protect()
	if !e.hookless {
		L.SetContext(&st.hook)
	}
	e.watch.add(st)
	return st
}

// run runs a compiled script on st for x and returns its reply.
func (st *state) run(proto *lua.FunctionProto, x *Exec) values.Reply {
	L := st.L
	st.x = x
	st.setArgs(&st.keys, "KEYS", x.Keys)
	st.setArgs(&st.argv, "ARGV", x.Args)
	st.json = defaultJSONConfig
	st.hook.start(x)
	st.e.watch.begin()
	L.Push(st.function(proto))
	err := L.PCall(0, 1, st.handler)
	st.e.watch.end()
	var reply values.Reply
	if err != nil {
		reply = st.failReply(x, err)
	} else {
		reply = st.toReply(L.Get(-1), 0)
	}
	L.SetTop(0)
	st.hook.stop()
	st.x = nil
	st.fail = errInfo{}
	clear(st.orders)
	clear(st.hints)
	return reply
}

// function returns the closure of proto for st, made once.
func (st *state) function(proto *lua.FunctionProto) *lua.LFunction {
	if fn, ok := st.fns[proto]; ok {
		return fn
	}
	if len(st.fns) >= maxFnCache {
		clear(st.fns)
	}
	fn := st.L.NewFunctionFromProto(proto)
	fn.Env = st.env
	st.fns[proto] = fn
	return fn
}

// setArgs fills KEYS or ARGV for a run, reusing last run's table when the
// script left it as a plain array.
func (st *state) setArgs(t **lua.LTable, name string, args [][]byte) {
	tb := *t
	old := tb.MaxN()
	if tb.Metatable != lua.LNil || old > len(args)+16 || hasHashPart(tb, old) {
		tb = st.L.NewTable()
		*t = tb
		old = 0
	}
	for i, a := range args {
		// An argument equal to the one the state's last run had at i (a
		// limiter's limit and window, as a rule) keeps that string: no copy.
		if prev, ok := tb.RawGetInt(i + 1).(lua.LString); ok && string(prev) == string(a) {
			continue
		}
		tb.RawSetInt(i+1, lua.LString(a))
	}
	for i := len(args) + 1; i <= old; i++ {
		tb.RawSetInt(i, lua.LNil)
	}
	st.globals.RawSetString(name, tb)
}

// hasHashPart reports whether tb holds keys besides 1..n.
func hasHashPart(tb *lua.LTable, n int) bool {
	k, _ := tb.Next(lua.LNumber(n))
	return k != lua.LNil
}
