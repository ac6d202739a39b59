package script

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"log/slog"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/rlserver/rlserver/values"
)

// The redis table, as Redis 7.0.15 defines it for EVAL.

// The version scripts see, that of the Redis the engine matches.
const (
	redisVersion    = "7.0.15"
	redisVersionNum = 0x07000f
)

// Log levels of redis.log and their slog levels.
var logLevels = []slog.Level{slog.LevelDebug, slog.LevelDebug + 2, slog.LevelInfo, slog.LevelWarn}

func (st *state) openRedis() *lua.LTable {
	L := st.L
	t := L.NewTable()
	fn := func(name string, f lua.LGFunction) { t.RawSetString(name, L.NewFunction(f)) }
	num := func(name string, n float64) { t.RawSetString(name, lua.LNumber(n)) }
	fn("call", func(L *lua.LState) int { return st.redisCommand(L, true) })
	fn("pcall", func(L *lua.LState) int { return st.redisCommand(L, false) })
	fn("log", st.redisLog)
	for i, name := range []string{"LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING"} {
		num(name, float64(i))
	}
	num("REDIS_VERSION_NUM", redisVersionNum)
	t.RawSetString("REDIS_VERSION", lua.LString(redisVersion))
	fn("setresp", st.redisSetresp)
	fn("sha1hex", redisSha1hex)
	fn("error_reply", redisErrorReply)
	fn("status_reply", redisStatusReply)
	fn("set_repl", redisSetRepl)
	num("REPL_NONE", 0)
	num("REPL_AOF", 1)
	num("REPL_SLAVE", 2)
	num("REPL_REPLICA", 2)
	num("REPL_ALL", 3)
	fn("acl_check_cmd", st.redisACLCheck)
	fn("breakpoint", func(L *lua.LState) int { L.Push(lua.LFalse); return 1 })
	fn("debug", func(L *lua.LState) int { return 0 })
	fn("replicate_commands", func(L *lua.LState) int { L.Push(lua.LTrue); return 1 })
	return t
}

// errTable is the error table Redis raises and returns: {err=msg}.
func errTable(L *lua.LState, msg string) *lua.LTable {
	t := L.NewTable()
	t.RawSetString("err", lua.LString(msg))
	return t
}

// raiseRedis raises Redis's error table for msg (without "ERR ").
func raiseRedis(L *lua.LState, msg string) {
	L.Error(errTable(L, "ERR "+msg), 0)
}

// redisCommand is redis.call (raise) and redis.pcall.
func (st *state) redisCommand(L *lua.LState, raise bool) int {
	args, bad := st.commandArgs(L)
	var reply values.Reply
	switch {
	case len(args) == 0 && !bad:
		reply = errorReply(errNoArgs)
	case bad:
		reply = errorReply(errBadArgTypes)
	default:
		reply = st.x.Call(args)
	}
	if reply.Kind == values.Error {
		t := errTable(L, string(reply.Str))
		if !bad && len(args) > 0 {
			t.RawSetString("ignore_error_stats_update", lua.LTrue)
		}
		if raise {
			L.Error(t, 0)
		}
		L.Push(t)
		return 1
	}
	L.Push(st.toLua(reply, 0))
	return 1
}

// commandArgs converts the arguments of redis.call: strings as they are,
// numbers as "%.17g". bad reports an argument of another type. The
// slices are st's and valid until the next call.
func (st *state) commandArgs(L *lua.LState) (args [][]byte, bad bool) {
	n := L.GetTop()
	st.argBuf, st.args, st.argEnds = st.argBuf[:0], st.args[:0], st.argEnds[:0]
	for i := 1; i <= n; i++ {
		switch v := L.Get(i).(type) {
		case lua.LString:
			st.argBuf = append(st.argBuf, v...)
		case lua.LNumber:
			st.argBuf = appendG(st.argBuf, float64(v), 17, false, false)
		default:
			return nil, true
		}
		st.argEnds = append(st.argEnds, len(st.argBuf))
	}
	start := 0
	for _, end := range st.argEnds {
		st.args = append(st.args, st.argBuf[start:end:end])
		start = end
	}
	return st.args, false
}

func (st *state) redisLog(L *lua.LState) int {
	argc := L.GetTop()
	if argc < 2 {
		raiseRedis(L, "redis.log() requires two arguments or more.")
	}
	f, ok := luaToNumber(L.Get(1))
	if !ok {
		raiseRedis(L, "First argument must be a number (log level).")
	}
	level := int(toInteger(f))
	if level < 0 || level > 3 {
		raiseRedis(L, "Invalid debug level.")
	}
	var b strings.Builder
	for j := 2; j <= argc; j++ {
		if s, ok := toStringy(L.Get(j)); ok {
			if j != 2 {
				b.WriteByte(' ')
			}
			b.WriteString(s)
		}
	}
	st.e.log.Log(context.Background(), logLevels[level], b.String(), "script", st.x.SHA)
	return 0
}

// luaToNumber is lua_isnumber and lua_tonumber: a number, or a string
// that converts.
func luaToNumber(v lua.LValue) (float64, bool) {
	switch v := v.(type) {
	case lua.LNumber:
		return float64(v), true
	case lua.LString:
		return str2number(string(v))
	}
	return 0, false
}

func (st *state) redisSetresp(L *lua.LState) int {
	if L.GetTop() != 1 {
		raiseRedis(L, "redis.setresp() requires one argument.")
	}
	f, _ := luaToNumber(L.Get(1))
	if !st.x.SetRESP(int(toInteger(f))) {
		raiseRedis(L, "RESP version must be 2 or 3.")
	}
	return 0
}

func redisSha1hex(L *lua.LState) int {
	if L.GetTop() != 1 {
		raiseRedis(L, "wrong number of arguments")
	}
	s, _ := toStringy(L.Get(1))
	sum := sha1.Sum([]byte(s))
	L.Push(lua.LString(hex.EncodeToString(sum[:])))
	return 1
}

// singleString is the argument check of error_reply and status_reply:
// one string (not a number).
func singleString(L *lua.LState) (string, bool) {
	s, ok := L.Get(1).(lua.LString)
	if L.GetTop() != 1 || !ok {
		L.Push(errTable(L, "ERR wrong number or type of arguments"))
		return "", false
	}
	return string(s), true
}

func redisErrorReply(L *lua.LState) int {
	s, ok := singleString(L)
	if !ok {
		return 1
	}
	s = strings.TrimPrefix(s, "-")
	L.Push(errTable(L, string(errorText([]byte(s)))))
	return 1
}

func redisStatusReply(L *lua.LState) int {
	s, ok := singleString(L)
	if !ok {
		return 1
	}
	t := L.NewTable()
	t.RawSetString("ok", lua.LString(s))
	L.Push(t)
	return 1
}

func redisSetRepl(L *lua.LState) int {
	if L.GetTop() != 1 {
		raiseRedis(L, "redis.set_repl() requires two arguments.")
	}
	f, _ := luaToNumber(L.Get(1))
	if toInteger(f)&^3 != 0 {
		raiseRedis(L, "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.")
	}
	return 0
}

func (st *state) redisACLCheck(L *lua.LState) int {
	args, bad := st.commandArgs(L)
	switch {
	case bad:
		L.Error(errTable(L, string(errBadArgTypes)), 0)
	case len(args) == 0:
		L.Error(errTable(L, string(errNoArgs)), 0)
	}
	if _, ok := st.x.caller.Command(args[0]); !ok {
		raiseRedis(L, "Invalid command passed to redis.acl_check_cmd()")
	}
	L.Push(lua.LTrue)
	return 1
}
