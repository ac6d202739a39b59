package script

import (
	"strconv"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// The sliding-log limiter that rate-limiting tutorials teach: trim the
// sorted set to the window, count, add, expire.
const slidingLogScript = `local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, now - window)
local count = redis.call('ZCARD', KEYS[1])
if count < limit then
  redis.call('ZADD', KEYS[1], now, now .. '-' .. ARGV[4])
  redis.call('PEXPIRE', KEYS[1], window)
  return {1, limit - count - 1}
end
return {0, 0}`

// benchEval calls the sliding log through EVALSHA on e with caller c.
func benchEval(b *testing.B, e *Engine, c Caller) {
	sha, errReply := e.Load([]byte(slidingLogScript))
	if errReply != nil {
		b.Fatal(string(errReply.Str))
	}
	key := [][]byte{[]byte("rl:user:42")}
	args := [][]byte{nil, []byte("60000"), []byte("100"), nil}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		args[0] = strconv.AppendInt(args[0][:0], int64(1700000000000+i), 10)
		args[3] = strconv.AppendInt(args[3][:0], int64(i), 10)
		r := e.Eval(Request{SHA: []byte(sha), Keys: key, Args: args}, c)
		if len(r.Elems) != 2 {
			b.Fatalf("reply %q", replyText(r))
		}
	}
}

// BenchmarkSlidingLog is the per-call cost of the interpreter: the engine
// alone (nopCaller answers at once) and with an in-memory keyspace.
func BenchmarkSlidingLog(b *testing.B) {
	b.Run("engine", func(b *testing.B) {
		e := New(Config{})
		defer e.Close()
		benchEval(b, e, &nopCaller{})
	})
	b.Run("engine-without-hook", func(b *testing.B) {
		e := New(Config{})
		e.hookless = true
		defer e.Close()
		benchEval(b, e, &nopCaller{})
	})
	b.Run("memcaller", func(b *testing.B) {
		e := New(Config{})
		defer e.Close()
		benchEval(b, e, newMemCaller())
	})
	b.Run("engine-parallel", func(b *testing.B) {
		e := New(Config{})
		defer e.Close()
		sha, _ := e.Load([]byte(slidingLogScript))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			c := &nopCaller{}
			args := [][]byte{[]byte("1700000000000"), []byte("60000"), []byte("100"), []byte("1")}
			for pb.Next() {
				e.Eval(Request{SHA: []byte(sha), Keys: [][]byte{[]byte("k")}, Args: args}, c)
			}
		})
	})
}

// BenchmarkFixedWindow compares the interpreter with a native handler for
// the same script.
func BenchmarkFixedWindow(b *testing.B) {
	run := func(b *testing.B, native bool) {
		e := New(Config{})
		defer e.Close()
		sha, _ := e.Load([]byte(fixedWindowScript))
		if native {
			e.Register(sha, fixedWindow{})
		}
		c := &nopCaller{}
		req := Request{SHA: []byte(sha), Keys: [][]byte{[]byte("k")}, Args: [][]byte{[]byte("5"), []byte("1000")}}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			e.Eval(req, c)
		}
	}
	b.Run("interpreter", func(b *testing.B) { run(b, false) })
	b.Run("native", func(b *testing.B) { run(b, true) })
}

// BenchmarkReturn is the floor: a script that only returns.
func BenchmarkReturn(b *testing.B) {
	e := New(Config{})
	defer e.Close()
	sha, _ := e.Load([]byte("return 1"))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		e.Eval(Request{SHA: []byte(sha)}, &nopCaller{})
	}
}

// BenchmarkCompile is what caching by sha saves on each call: compiling
// the sliding log.
func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if proto, msg := compileChunk([]byte(slidingLogScript), "@user_script", 1<<20); proto == nil {
			b.Fatal(msg)
		}
	}
}

// BenchmarkNewState is what pooling states saves on each call.
func BenchmarkNewState(b *testing.B) {
	e := New(Config{})
	defer e.Close()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		st := newState(e)
		e.watch.remove(st)
	}
}

// BenchmarkPlainGopherLua is gopher-lua with none of the engine: a fresh
// state, the script compiled and run, no sandbox — what the engine is
// measured against.
func BenchmarkPlainGopherLua(b *testing.B) {
	proto, _ := compileChunk([]byte("local n = 0 for i = 1, 4 do n = n + i end return n"), "@x", 1<<20)
	L := lua.NewState()
	defer L.Close()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		L.Push(L.NewFunctionFromProto(proto))
		L.Call(0, 1)
		L.Pop(1)
	}
}

// BenchmarkLoop is a pure Lua loop of 100k iterations, with the hook
// (the context gopher-lua asks before every instruction) and without:
// what the time limit, SCRIPT KILL and the memory cap cost.
func BenchmarkLoop(b *testing.B) {
	body := []byte("local n = 0 for i = 1, 100000 do n = n + i % 7 end return n")
	for _, hookless := range []bool{false, true} {
		name := "hook"
		if hookless {
			name = "no-hook"
		}
		b.Run(name, func(b *testing.B) {
			e := New(Config{})
			e.hookless = hookless
			defer e.Close()
			sha, _ := e.Load(body)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				e.Eval(Request{SHA: []byte(sha)}, &nopCaller{})
			}
		})
	}
}
