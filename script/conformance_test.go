package script

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/values"
)

// The conformance tests run the same script text with EVAL on a real
// redis-server and through the Engine with a Caller that forwards
// redis.call to that same redis-server, so that only the Lua engine
// differs, and require identical replies, byte for byte.

// confCase is one script run both ways.
type confCase struct {
	name   string
	script string
	keys   []string
	args   []string
	resp   int        // protocol of the calling connection (2 if 0)
	setup  [][]string // commands run before, on an empty keyspace
	ro     bool       // EVAL_RO
}

// harness holds a redis-server, connections to it and an engine whose
// commands go to it.
type harness struct {
	t     *testing.T
	conns map[int]*respConn
	fwd   *forwardCaller
	e     *Engine
}

func newHarness(t *testing.T, cfg Config) *harness {
	addr := startRedis(t)
	return &harness{t: t, conns: map[int]*respConn{2: dialRedis(t, addr, 2), 3: dialRedis(t, addr, 3)},
		fwd: newForwardCaller(t, addr), e: New(cfg)}
}

// reset empties the keyspace and runs setup.
func (h *harness) reset(setup [][]string) {
	h.conns[2].do("FLUSHALL")
	for _, cmd := range setup {
		h.conns[2].do(cmd...)
	}
}

// redisEval runs the case on redis-server and returns the raw reply.
func (h *harness) redisEval(c confCase) []byte {
	cmd := "EVAL"
	if c.ro {
		cmd = "EVAL_RO"
	}
	args := [][]byte{[]byte(cmd), []byte(c.script), []byte(strconv.Itoa(len(c.keys)))}
	for _, k := range append(append([]string{}, c.keys...), c.args...) {
		args = append(args, []byte(k))
	}
	raw, _ := h.conns[c.proto()].doRaw(args...)
	return raw
}

// engineEval runs the case on the engine and returns the reply as RESP.
func (h *harness) engineEval(c confCase) []byte {
	req := Request{Body: []byte(c.script), RESP: c.proto(), ReadOnly: c.ro}
	for _, k := range c.keys {
		req.Keys = append(req.Keys, []byte(k))
	}
	for _, a := range c.args {
		req.Args = append(req.Args, []byte(a))
	}
	return writeReply(nil, h.e.Eval(req, h.fwd), c.proto())
}

// keyspace describes the keys and their values, to compare effects.
func (h *harness) keyspace() string {
	c := h.conns[2]
	keys := c.do("KEYS", "*").Elems
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = string(k.Str)
	}
	sortStrings(names)
	var b strings.Builder
	for _, k := range names {
		dump := c.do("DUMP", k)
		ttl := c.do("PTTL", k).Int > 0
		b.WriteString(k + "=" + strconv.Quote(string(dump.Str)) + " ttl=" + strconv.FormatBool(ttl) + "\n")
	}
	return b.String()
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func (c confCase) proto() int {
	if c.resp == 3 {
		return 3
	}
	return 2
}

// check runs a case both ways and compares replies and keyspaces.
func (h *harness) check(c confCase) {
	h.t.Helper()
	h.reset(c.setup)
	want := h.redisEval(c)
	wantKeys := h.keyspace()
	h.reset(c.setup)
	got := h.engineEval(c)
	gotKeys := h.keyspace()
	if !bytes.Equal(got, want) {
		h.t.Errorf("%s: %q\n  redis:  %q\n  engine: %q", c.name, c.script, want, got)
	}
	if gotKeys != wantKeys {
		h.t.Errorf("%s: keyspace differs\n  redis:  %s\n  engine: %s", c.name, wantKeys, gotKeys)
	}
}

func TestConformanceConversions(t *testing.T) {
	h := newHarness(t, Config{})
	for _, c := range []confCase{
		{name: "integer", script: "return 42"},
		{name: "negative", script: "return -7"},
		{name: "float truncated", script: "return 3.99"},
		{name: "negative float truncated", script: "return -3.99"},
		{name: "huge", script: "return 2^63"},
		{name: "nan", script: "return 0/0"},
		{name: "inf", script: "return 1/0"},
		{name: "2^53+1", script: "return 9007199254740993"},
		{name: "string", script: "return 'hello'"},
		{name: "empty string", script: "return ''"},
		{name: "binary string", script: "return '\\0\\1\\255\\r\\n'"},
		{name: "true", script: "return true"},
		{name: "false", script: "return false"},
		{name: "nil", script: "return nil"},
		{name: "nothing", script: "return"},
		{name: "no return", script: "local x = 1"},
		{name: "table", script: "return {1, 'two', 3.5, {4, {5}}}"},
		{name: "table to first nil", script: "return {1, 2, nil, 4}"},
		{name: "table with booleans", script: "return {true, false, 1}"},
		{name: "empty table", script: "return {}"},
		{name: "table hash part ignored", script: "return {1, 2, a='x'}"},
		{name: "ok table", script: "return {ok='fine'}"},
		{name: "ok with line breaks", script: "return {ok='a\\r\\nb'}"},
		{name: "err table", script: "return {err='BAD thing'}"},
		{name: "err table one word", script: "return {err='bad'}"},
		{name: "err with line breaks", script: "return {err='a\\r\\nb\\n'}"},
		{name: "empty err", script: "return {err=''}"},
		{name: "err wins over ok", script: "return {err='x', ok='y'}"},
		{name: "err not a string", script: "return {err=123}"},
		{name: "ok not a string", script: "return {ok=5}"},
		{name: "nested err", script: "return {1, {err='inner'}, 3}"},
		{name: "nested ok", script: "return {redis.status_reply('PONG'), 2}"},
		{name: "error_reply", script: "return redis.error_reply('My error')"},
		{name: "error_reply dash", script: "return redis.error_reply('-MY error')"},
		{name: "error_reply code", script: "return redis.error_reply('CODE message')"},
		{name: "error_reply empty", script: "return redis.error_reply('')"},
		{name: "error_reply number", script: "return redis.error_reply(5)"},
		{name: "error_reply two args", script: "return redis.error_reply('a', 'b')"},
		{name: "status_reply", script: "return redis.status_reply('ALL GOOD')"},
		{name: "status_reply bad", script: "return redis.status_reply()"},
		{name: "keys and argv", script: "return {KEYS[1], KEYS[2], ARGV[1], #KEYS, #ARGV}", keys: []string{"k1", "k2"}, args: []string{"a1", "a2", "a3"}},
		{name: "argv binary", script: "return ARGV[1]", args: []string{"\x00\xff\r\n"}},
		{name: "double resp2", script: "return {double=3.14}"},
		{name: "double resp3", script: "return {double=3.14}", resp: 3},
		{name: "double inf resp3", script: "return {double=1/0}", resp: 3},
		{name: "double -inf resp2", script: "return {double=-1/0}"},
		{name: "double integer resp3", script: "return {double=5}", resp: 3},
		{name: "double tiny", script: "return {double=1e-300}", resp: 3},
		{name: "big_number resp2", script: "return {big_number='123456789012345678901234567890'}"},
		{name: "big_number resp3", script: "return {big_number='123456789012345678901234567890'}", resp: 3},
		{name: "verbatim resp2", script: "return {verbatim_string={format='txt', string='hello'}}"},
		{name: "verbatim resp3", script: "return {verbatim_string={format='txt', string='hello'}}", resp: 3},
		{name: "map resp2", script: "return {map={a=1}}"},
		{name: "map resp3", script: "return {map={a=1}}", resp: 3},
		{name: "map nested resp3", script: "return {map={k={1,2}}}", resp: 3},
		{name: "set resp2", script: "return {set={x=true}}"},
		{name: "set resp3", script: "return {set={x=true}}", resp: 3},
		{name: "nil resp3", script: "return nil", resp: 3},
		{name: "false resp3", script: "return false", resp: 3},
		{name: "true resp3 script resp2", script: "return true", resp: 3},
		{name: "setresp3 true to resp2 client", script: "redis.setresp(3) return {true, false}"},
		{name: "setresp3 true to resp3 client", script: "redis.setresp(3) return {true, false}", resp: 3},
		{name: "setresp2 explicit", script: "redis.setresp(2) return {true, false}", resp: 3},
		{name: "self nested table", script: "local t = {} t[1] = t return t"},
		{name: "self nested table with value", script: "local t = {} t[1] = t t[2] = 5 return t"},
	} {
		h.check(c)
	}
}

func TestConformanceCalls(t *testing.T) {
	h := newHarness(t, Config{})
	for _, c := range []confCase{
		{name: "get missing", script: "return {redis.call('GET', KEYS[1]) == false, type(redis.call('GET', KEYS[1]))}", keys: []string{"k"}},
		{name: "set and get", script: "redis.call('SET', KEYS[1], ARGV[1]) return redis.call('GET', KEYS[1])", keys: []string{"k"}, args: []string{"v"}},
		{name: "set returns ok table", script: "local r = redis.call('SET', KEYS[1], 'v') return {type(r), r.ok}", keys: []string{"k"}},
		{name: "set reply passes through", script: "return redis.call('SET', KEYS[1], 'v')", keys: []string{"k"}},
		{name: "incr", script: "return redis.call('INCR', KEYS[1])", keys: []string{"n"}},
		{name: "number args use %.17g", script: "redis.call('SET', KEYS[1], 0.1) return redis.call('GET', KEYS[1])", keys: []string{"k"}},
		{name: "integer number arg", script: "redis.call('SET', KEYS[1], 1e15) return redis.call('GET', KEYS[1])", keys: []string{"k"}},
		{name: "big number arg", script: "redis.call('SET', KEYS[1], 2^70) return redis.call('GET', KEYS[1])", keys: []string{"k"}},
		{name: "incrbyfloat", script: "return redis.call('INCRBYFLOAT', KEYS[1], '1.5')", keys: []string{"f"}},
		{name: "hgetall resp2", script: "return redis.call('HGETALL', KEYS[1])", keys: []string{"h"}, setup: [][]string{{"HSET", "h", "a", "1"}}},
		{name: "hgetall resp3 in script", script: "redis.setresp(3) local r = redis.call('HGETALL', KEYS[1]) return {type(r), type(r.map), r.map.a}", keys: []string{"h"}, setup: [][]string{{"HSET", "h", "a", "1"}}},
		{name: "hgetall resp3 passed back", script: "redis.setresp(3) return redis.call('HGETALL', KEYS[1])", keys: []string{"h"}, setup: [][]string{{"HSET", "h", "a", "1"}}, resp: 3},
		{name: "zscore resp3 double", script: "redis.setresp(3) local r = redis.call('ZSCORE', KEYS[1], 'm') return {type(r), tostring(r.double)}", keys: []string{"z"}, setup: [][]string{{"ZADD", "z", "1.5", "m"}}},
		{name: "zscore resp3 back to resp3", script: "redis.setresp(3) return redis.call('ZSCORE', KEYS[1], 'm')", keys: []string{"z"}, setup: [][]string{{"ZADD", "z", "1.5", "m"}}, resp: 3},
		{name: "get nil resp3", script: "redis.setresp(3) return {redis.call('GET', KEYS[1]) == nil}", keys: []string{"k"}},
		{name: "mget with nils", script: "return redis.call('MGET', KEYS[1], KEYS[2])", keys: []string{"a", "b"}, setup: [][]string{{"SET", "b", "1"}}},
		{name: "mget with nils as table", script: "local r = redis.call('MGET', KEYS[1], KEYS[2]) return {tostring(r[1]), r[2]}", keys: []string{"a", "b"}, setup: [][]string{{"SET", "b", "1"}}},
		{name: "lrange", script: "return redis.call('LRANGE', KEYS[1], 0, -1)", keys: []string{"l"}, setup: [][]string{{"RPUSH", "l", "a", "b", "c"}}},
		{name: "ping status", script: "local r = redis.call('PING') return r.ok", keys: nil},
		{name: "sliding log", keys: []string{"log"}, args: []string{"1000", "3", "5000"}, script: `
local now = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, now - window)
local n = redis.call('ZCARD', KEYS[1])
if n < limit then
  redis.call('ZADD', KEYS[1], now, now .. ':' .. n)
  redis.call('PEXPIRE', KEYS[1], window)
  return {1, limit - n - 1}
end
return {0, 0}`},
		{name: "fixed window", keys: []string{"fw"}, args: []string{"10", "60000"}, script: `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return {n, tonumber(ARGV[1]) - n}`},
		{name: "token bucket hash", keys: []string{"tb"}, args: []string{"10", "1", "1700000000.5"}, script: `
local cap = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local s = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(s[1]) or cap
local ts = tonumber(s[2]) or now
tokens = math.min(cap, tokens + (now - ts) * rate)
local ok = 0
if tokens >= 1 then tokens = tokens - 1 ok = 1 end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
return {ok, tostring(tokens), tostring(now)}`},
	} {
		h.check(c)
	}
}

func TestConformanceErrors(t *testing.T) {
	h := newHarness(t, Config{})
	for _, c := range []confCase{
		{name: "unknown command", script: "return redis.call('nosuch')"},
		{name: "unknown command pcall", script: "return redis.pcall('nosuch')"},
		{name: "wrong arity", script: "return redis.call('get')"},
		{name: "command error", script: "return redis.call('set', 'k', 'v', 'bad')"},
		{name: "wrongtype", script: "redis.call('lpush', KEYS[1], 'a') return redis.call('get', KEYS[1])", keys: []string{"k"}},
		{name: "wrongtype pcall", script: "redis.call('lpush', KEYS[1], 'a') return redis.pcall('get', KEYS[1])", keys: []string{"k"}},
		{name: "wrongtype pcall fields", script: "redis.call('lpush', KEYS[1], 'a') local r = redis.pcall('get', KEYS[1]) return {r.err, tostring(r.ignore_error_stats_update)}", keys: []string{"k"}},
		{name: "noscript command", script: "return redis.call('eval', 'return 1', 0)"},
		{name: "no arguments", script: "return redis.call()"},
		{name: "no arguments pcall", script: "return redis.pcall()"},
		{name: "bad argument type", script: "return redis.call('get', {})"},
		{name: "bad argument nil", script: "return redis.call('set', 'k', nil)"},
		{name: "bad argument pcall", script: "return redis.pcall('get', true)"},
		{name: "error string", script: "error('boom')"},
		{name: "error level 0", script: "error('boom', 0)"},
		{name: "error level 2", script: "local function f() error('deep', 2) end\nf()"},
		{name: "error table", script: "error({err='MY boom'})"},
		{name: "error table number err", script: "error({err=123})"},
		{name: "error number", script: "error(12)"},
		{name: "error float", script: "error(1/3)"},
		{name: "error nil", script: "error(nil)"},
		{name: "error no args", script: "error()"},
		{name: "error true", script: "error(true)"},
		{name: "error in function line", script: "local function f()\n  return redis.call('nosuch')\nend\nreturn f()"},
		{name: "error on line 3", script: "local a = 1\nlocal b = 2\nerror('third')"},
		{name: "assert", script: "assert(false)"},
		{name: "assert message", script: "assert(1 == 2, 'not equal')"},
		{name: "nonexistent global", script: "return x"},
		{name: "nonexistent global call", script: "undefined_fn()"},
		{name: "write global", script: "x = 1"},
		{name: "write existing global", script: "redis = nil"},
		{name: "write library field", script: "string.rep = nil"},
		{name: "write new library field", script: "math.foo = 1"},
		{name: "rawset globals", script: "rawset(_G, 'x', 1)"},
		{name: "setmetatable globals", script: "setmetatable(_G, nil)"},
		{name: "table.insert library", script: "table.insert(string, 1)"},
		{name: "string metatable", script: "getmetatable('').__index = {}"},
		{name: "globals metatable", script: "getmetatable(_G).__index = nil"},
		{name: "write KEYS allowed", script: "KEYS[1] = 'x' return KEYS[1]", keys: []string{"k"}},
		{name: "read-only command in eval_ro", script: "return redis.call('get', 'k')"},
		{name: "sha1hex", script: "return {redis.sha1hex(''), redis.sha1hex('abc'), redis.sha1hex(1)}"},
		{name: "sha1hex no args", script: "return redis.sha1hex()"},
		{name: "log bad", script: "redis.log(1)"},
		{name: "log bad level type", script: "redis.log('x', 'y')"},
		{name: "log bad level", script: "redis.log(9, 'y')"},
		{name: "log fine", script: "redis.log(redis.LOG_WARNING, 'hello', 1, nil, 'x') return 1"},
		{name: "setresp bad", script: "redis.setresp(4)"},
		{name: "setresp no args", script: "redis.setresp()"},
		{name: "set_repl bad", script: "redis.set_repl(99)"},
		{name: "set_repl no args", script: "redis.set_repl()"},
		{name: "set_repl ok", script: "redis.set_repl(redis.REPL_ALL) return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL}"},
		{name: "replicate_commands", script: "return redis.replicate_commands()"},
		{name: "breakpoint and debug", script: "return {redis.breakpoint(), redis.debug('x')}"},
		{name: "version", script: "return {redis.REDIS_VERSION, redis.REDIS_VERSION_NUM}"},
		{name: "log levels", script: "return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}"},
		{name: "acl_check_cmd", script: "return redis.acl_check_cmd('get', 'x')"},
		{name: "acl_check_cmd unknown", script: "return redis.acl_check_cmd('nosuch')"},
		{name: "compile error", script: "return 'x' +"},
		{name: "compile error unfinished string", script: "return 'abc"},
		{name: "compile error end expected", script: "if true then\nreturn 1"},
		{name: "compile error goto", script: "goto x"},
		{name: "error line break", script: "error('a\\nb')"},
	} {
		h.check(c)
	}
}

func TestConformancePcall(t *testing.T) {
	h := newHarness(t, Config{})
	for _, c := range []confCase{
		{name: "pcall ok", script: "return {pcall(function() return 1, 2 end)}"},
		{name: "pcall error string", script: "local ok, e = pcall(error, 'hi') return {tostring(ok), e}"},
		{name: "pcall error position", script: "local ok, e = pcall(function() error('hi') end) return e"},
		{name: "pcall error table", script: "local ok, e = pcall(error, {err='x'}) return {tostring(ok), e}"},
		{name: "pcall error table no err", script: "local ok, e = pcall(error, {foo=1}) return {tostring(ok), type(e), e.foo}"},
		{name: "pcall redis.call", script: "local ok, e = pcall(redis.call, 'nosuch') return e"},
		{name: "pcall redis.call wrongtype", script: "redis.call('lpush', KEYS[1], 'a') local ok, e = pcall(redis.call, 'get', KEYS[1]) return e", keys: []string{"k"}},
		{name: "pcall nonexistent global", script: "local ok, e = pcall(function() return nope end) return e"},
		{name: "pcall readonly", script: "local ok, e = pcall(function() x = 1 end) return e"},
		{name: "pcall rawset readonly", script: "local ok, e = pcall(rawset, _G, 'x', 1) return e"},
		{name: "pcall no args", script: "return pcall()"},
		{name: "xpcall", script: "return {xpcall(function() error('e') end, function(m) return 'handled: ' .. m end)}"},
		{name: "pcall setresp", script: "local ok, e = pcall(redis.setresp, 4) return e"},
		{name: "nested pcall", script: "return {pcall(pcall, error, 'x')}"},
	} {
		h.check(c)
	}
}

func TestConformanceNumbers(t *testing.T) {
	h := newHarness(t, Config{})
	for _, c := range []confCase{
		{name: "tostring", script: "return {tostring(1/3), tostring(1e15), tostring(1e14), tostring(123456789012345), tostring(0.1), tostring(-0.5), tostring(100), tostring(2^53), tostring(2^63), tostring(1e300), tostring(5e-324), tostring(-1e-5)}"},
		{name: "tostring specials", script: "return {tostring(0/0), tostring(-(0/0)), tostring(1/0), tostring(-1/0), tostring(math.huge)}"},
		{name: "tostring minus zero", script: "return tostring(-0)"},
		{name: "concat numbers", script: "return {1/3 .. '', 1e15 .. '', 10 .. 'x', 'x' .. 2.5, 1 .. 2}"},
		{name: "concat many", script: "local a, b, c = 'a', 1/3, 7 return a .. b .. c .. a"},
		{name: "concat error", script: "return 'a' .. nil"},
		{name: "concat table error", script: "local t = {} return 'a' .. t"},
		{name: "concat metamethod", script: "local t = setmetatable({}, {__concat = function(a, b) return 'meta' end}) return {t .. 'x', 'x' .. t}"},
		{name: "tonumber", script: "return {tonumber('10'), tonumber(' 12 '), tonumber('0x10'), tonumber('1e2'), tonumber('1.5'), tonumber('z', 36), tonumber('ff', 16), tonumber('0x'), tonumber(''), tonumber('abc'), tonumber('8', 8), tonumber('10', 2)}"},
		{name: "tonumber to string", script: "return {tostring(tonumber('1e2')), tostring(tonumber('.5')), tostring(tonumber('5.')), tostring(tonumber('-0x10')), tostring(tonumber('inf')), tostring(tonumber('nan')), tostring(tonumber('1e'))}"},
		{name: "tonumber nil", script: "return tostring(tonumber(nil))"},
		{name: "tonumber base out of range", script: "return tonumber('1', 99)"},
		{name: "arithmetic coercion", script: "return {'10' + 1, '0x10' * 1, ' 5 ' - 1, '1e2' / 2}"},
		{name: "modulo", script: "return {tostring(7 % -3), tostring(-7 % 3), tostring(5.5 % 2), tostring(2^0.5)}"},
		{name: "math", script: "return {tostring(math.floor(-0.5)), tostring(math.ceil(0.2)), tostring(math.sqrt(2)), tostring(math.pi), tostring(math.fmod(7, 3)), tostring(math.max(1, 5, 3)), tostring(math.abs(-2))}"},
		{name: "math.random", script: "return {math.random(100), math.random(5, 10), tostring(math.random())}"},
		{name: "math.randomseed", script: "math.randomseed(42) return {math.random(1000), math.random(1000)}"},
		{name: "string.format", script: "return {string.format('%d %5.2f %s %q %x %X %o %e %g %G %c %i %u', 3, 3.14159, 'a', 'b\\n\\0', 255, 255, 8, 12345.678, 0.0001, 1e20, 65, -4, 3)}"},
		{name: "string.format flags", script: "return {string.format('[%-5d][%05d][%+d][% d][%#x][%#o][%.3d][%5.1s][%-8s]', 42, 42, 42, 42, 255, 8, 7, 'abc', 'hi')}"},
		{name: "string.format floats", script: "return {string.format('%.0f %.3e %10.4f %-10.2e| %g %g %g %#g', 2.5, 1234.5, 3.14159, -0.00123, 100000, 1000000, 1e-5, 1.5)}"},
		{name: "string.format specials", script: "return {string.format('%f %e %g %5.1f %d', 1/0, -1/0, 0/0, 1/0, 2^63)}"},
		{name: "string.format number as string", script: "return string.format('%s|%s|%s', 1/3, 10, 1e100)"},
		{name: "string.format long string", script: "return string.format('%s', string.rep('x', 150))"},
		{name: "string.format bad option", script: "return string.format('%y', 1)"},
		{name: "string.format no value", script: "return string.format('%d')"},
		{name: "string.format width too long", script: "return string.format('%100d', 1)"},
		{name: "string.format repeated flags", script: "return string.format('%------d', 1)"},
		{name: "string.format not a number", script: "return string.format('%d', 'x')"},
		{name: "string functions with numbers", script: "return {string.len(1/3), string.sub(1/3, 1, 5), string.upper(1e15), string.rep(0.5, 2)}"},
		{name: "table.concat numbers", script: "return table.concat({1, 2.5, 1/3, 'x'}, ',')"},
		{name: "table.concat bad value", script: "return table.concat({1, {}, 3})"},
	} {
		h.check(c)
	}
}

func TestConformanceStrings(t *testing.T) {
	h := newHarness(t, Config{})
	for _, c := range []confCase{
		{name: "find", script: "return {string.find('hello world', 'o w'), string.find('hello', 'l+')}"},
		{name: "find plain", script: "return {string.find('a.b', '.', 1, true)}"},
		{name: "match captures", script: "return {string.match('key:123', '(%a+):(%d+)')}"},
		{name: "match position capture", script: "return {string.match('abc', '()b()')}"},
		{name: "gmatch", script: "local t = {} for w in string.gmatch('one two three', '%a+') do t[#t+1] = w end return t"},
		{name: "gmatch captures", script: "local t = {} for k, v in string.gmatch('a=1, b=2', '(%w+)=(%w+)') do t[#t+1] = k .. v end return t"},
		{name: "gmatch empty matches", script: "local t = {} for w in string.gmatch('abc', 'x*') do t[#t+1] = '[' .. w .. ']' end return t"},
		{name: "gsub", script: "return {string.gsub('hello world', 'o', '0')}"},
		{name: "gsub captures", script: "return {string.gsub('hello world', '(%w+)', '<%1>')}"},
		{name: "gsub %0 and %%", script: "return {string.gsub('abc', '%w', '%0%0%%')}"},
		{name: "gsub limit", script: "return {string.gsub('aaaa', 'a', 'b', 2)}"},
		{name: "gsub anchor", script: "return {string.gsub('aaa', '^a', 'b')}"},
		{name: "gsub empty pattern", script: "return {string.gsub('abc', '', '-')}"},
		{name: "gsub function", script: "return {string.gsub('a b c', '%a', function(c) return c:upper() end)}"},
		{name: "gsub function false", script: "return {string.gsub('a b c', '%a', function(c) if c == 'b' then return false end return 'x' end)}"},
		{name: "gsub table", script: "return {string.gsub('$name is $age', '%$(%w+)', {name='bob', age=42})}"},
		{name: "gsub bad capture", script: "return string.gsub('abc', 'b', '%2')"},
		{name: "gsub bad replacement", script: "return string.gsub('abc', 'b', function() return {} end)"},
		{name: "byte and char", script: "return {string.byte('ABC', 1, -1), string.char(72, 105)}"},
		{name: "byte default", script: "return {string.byte('A'), string.byte('ABC', 10)}"},
		{name: "rep", script: "return {string.rep('ab', 3), string.rep('x', 0), string.rep('x', -1)}"},
		{name: "sub", script: "return {string.sub('hello', 2, -2), string.sub('hello', -3), string.sub('hello', 10)}"},
		{name: "reverse lower upper len", script: "return {string.reverse('abc'), string.lower('AbC'), string.upper('aBc'), string.len('\\0\\0')}"},
		{name: "method call", script: "local s = 'abc' return {s:upper(), s:len(), ('x'):rep(3)}"},
		{name: "gfind", script: "local t = {} for w in string.gfind('a b', '%a') do t[#t+1] = w end return t"},
		{name: "format %s with nul", script: "return string.format('[%5s]', 'a\\0b')"},
		{name: "table.sort", script: "local t = {5, 2, 8, 1, 9, 3} table.sort(t) return t"},
		{name: "table.sort comparator", script: "local t = {5, 2, 8, 1, 9, 3} table.sort(t, function(a, b) return a > b end) return t"},
		{name: "table.sort ties", script: "local t = {{1,'a'},{0,'b'},{1,'c'},{0,'d'},{1,'e'},{0,'f'},{1,'g'}} table.sort(t, function(a, b) return a[1] < b[1] end) local r = {} for i, v in ipairs(t) do r[i] = v[2] end return r"},
		{name: "table.sort strings", script: "local t = {'b', 'a', 'C', 'c'} table.sort(t) return t"},
		{name: "table.sort mixed", script: "local t = {1, 'a'} table.sort(t) return t"},
		{name: "table.insert remove", script: "local t = {1, 2, 3} table.insert(t, 4) table.insert(t, 1, 0) local r = table.remove(t, 2) return {r, table.remove(t), unpack(t)}"},
		{name: "table.remove empty", script: "return {table.remove({})}"},
		{name: "table.getn maxn", script: "local t = {1, 2, 3} t[10] = 1 return {table.getn({1, 2}), table.maxn(t)}"},
		{name: "table.setn", script: "table.setn({}, 1)"},
		{name: "table.foreachi", script: "local r = {} table.foreachi({'a', 'b'}, function(i, v) r[#r+1] = i .. v end) return r"},
		{name: "unpack", script: "return {unpack({1, 2, 3}, 2)}"},
		{name: "unpack too many", script: "return unpack({}, 1, 1e6)"},
		{name: "select", script: "return {select('#', 1, nil, 3), select(2, 'a', 'b', 'c'), select(-1, 'a', 'b')}"},
		{name: "type", script: "return {type(nil), type(1), type('s'), type({}), type(print == nil), type(type), type(redis)}"},
		{name: "ipairs pairs", script: "local t = {} for i, v in ipairs({'a', 'b', nil, 'd'}) do t[#t+1] = v end local n = 0 for k, v in pairs({x=1, y=2, 3}) do n = n + 1 end t[#t+1] = n return t"},
		{name: "next", script: "return {next({}) == nil, next({5})}"},
		{name: "rawget rawequal", script: "local t = setmetatable({}, {__index = function() return 'meta' end}) return {t.x, tostring(rawget(t, 'x')), rawequal(t, t)}"},
		{name: "coroutine", script: "local co = coroutine.create(function(a) local b = coroutine.yield(a + 1) return b * 2 end) local _, x = coroutine.resume(co, 1) local _, y = coroutine.resume(co, 10) return {x, y, coroutine.status(co)}"},
		{name: "coroutine.wrap", script: "local f = coroutine.wrap(function() coroutine.yield(1) coroutine.yield(2) end) return {f(), f()}"},
		{name: "coroutine error", script: "local co = coroutine.create(function() error('in co') end) return {coroutine.resume(co)}"},
		{name: "loadstring", script: "return loadstring('return 1 + 2')()"},
		{name: "loadstring error", script: "return {loadstring('return +')}"},
		{name: "loadstring globals", script: "return loadstring('return redis.REDIS_VERSION')()"},
		{name: "closures", script: "local function counter() local n = 0 return function() n = n + 1 return n end end local c = counter() c() c() return c()"},
		{name: "varargs", script: "local function f(...) return select('#', ...), ... end return {f(1, nil, 3)}"},
		{name: "string comparison", script: "return {'a' < 'b', 'abc' < 'abd', 'Z' < 'a'}"},
		{name: "numeric for float", script: "local t = {} for i = 1, 2, 0.5 do t[#t+1] = tostring(i) end return t"},
		{name: "while repeat", script: "local i, t = 0, {} while i < 3 do i = i + 1 t[#t+1] = i end repeat i = i - 1 until i == 0 return t"},
		{name: "length of table with hash", script: "local t = {1, 2, 3, x=1} return #t"},
		{name: "gcinfo collectgarbage", script: "return {type(gcinfo()), type(collectgarbage('count')), collectgarbage()}"},
		{name: "_G", script: "return {_G == _G._G, type(_G.redis), _VERSION}"},
		{name: "globals list", script: "local t = {} for k in pairs(_G) do t[#t+1] = k end table.sort(t) return t"},
		{name: "redis list", script: "local t = {} for k in pairs(redis) do t[#t+1] = k end table.sort(t) return t"},
		{name: "string library list", script: "local t = {} for k in pairs(string) do t[#t+1] = k end table.sort(t) return t"},
		{name: "table library list", script: "local t = {} for k in pairs(table) do t[#t+1] = k end table.sort(t) return t"},
		{name: "math library list", script: "local t = {} for k in pairs(math) do t[#t+1] = k end table.sort(t) return t"},
	} {
		h.check(c)
	}
}

func TestConformanceSandbox(t *testing.T) {
	h := newHarness(t, Config{})
	for _, c := range []confCase{
		{name: "os", script: "os.execute('true')"},
		{name: "io", script: "io.open('/etc/passwd')"},
		{name: "loadfile", script: "loadfile('/etc/passwd')"},
		{name: "dofile", script: "dofile('/etc/passwd')"},
		{name: "require", script: "require('os')"},
		{name: "debug", script: "return debug.getinfo(1)"},
		{name: "package", script: "return package.loaded"},
		{name: "print", script: "print('x')"},
		{name: "setfenv", script: "setfenv(1, {})"},
		{name: "getfenv", script: "return getfenv(1)"},
		{name: "newproxy", script: "return newproxy()"},
		{name: "module", script: "module('x')"},
	} {
		h.check(c)
	}
}

func TestConformanceSyntaxErrors(t *testing.T) {
	h := newHarness(t, Config{})
	deep := func(n int) string { return "return " + strings.Repeat("(", n) + "1" + strings.Repeat(")", n) }
	locals := func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString("local v" + strconv.Itoa(i) + " = 1\n")
		}
		return b.String() + "return 1"
	}
	upvals := func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString("local u" + strconv.Itoa(i) + " = 1\n")
		}
		b.WriteString("local function f()\n  return 0")
		for i := 0; i < n; i++ {
			b.WriteString(" + u" + strconv.Itoa(i))
		}
		return b.String() + "\nend\nreturn f()"
	}
	args := func(n int) string {
		return "return redis.call('ECHO'" + strings.Repeat(", 'x'", n) + ")"
	}
	concats := func(n int) string { return "return 'a'" + strings.Repeat(" .. 'a'", n) }
	for _, c := range []confCase{
		{name: "eof after =", script: "local x ="},
		{name: "double =", script: "x = = 1"},
		{name: "eof expected", script: "return 1 2"},
		{name: "if without end", script: "if x then"},
		{name: "numeric for", script: "for i = 1 do end"},
		{name: "generic for", script: "for i in do end"},
		{name: "for bad", script: "for i do end"},
		{name: "function paren", script: "function f( end"},
		{name: "local function number", script: "local function 1() end"},
		{name: "ambiguous call", script: "local f = tostring\nf\n(1)"},
		{name: "break outside loop", script: "break"},
		{name: "vararg outside", script: "function f() return ... end"},
		{name: "method assignment", script: "a.b:c = 1"},
		{name: "parenthesised assignment", script: "(a) = 1"},
		{name: "number assignment", script: "x, 1 = 1, 2"},
		{name: "malformed number", script: "return 3..''"},
		{name: "malformed hex", script: "return 0x"},
		{name: "malformed exponent", script: "return 1e"},
		{name: "escape too large", script: "return '\\400'"},
		{name: "unfinished long string", script: "return [==[ abc"},
		{name: "unfinished long comment", script: "--[[ unfinished"},
		{name: "bad long delimiter", script: "return [=x"},
		{name: "nested long string", script: "return [[ a [[ b ]] ]]"},
		{name: "string with newline", script: "return 'abc\ndef'"},
		{name: "unexpected symbol", script: "return @"},
		{name: "control char", script: "return \x01"},
		{name: "label", script: "::lbl:: return 1"},
		{name: "goto continue", script: "for i = 1, 2 do goto continue end"},
		{name: "utf8 name", script: "local é = 1"},
		{name: "two strings", script: "a = 'x' 'y'"},
		{name: "missing then", script: "if true return 1 end"},
		{name: "missing do", script: "while true return end"},
		{name: "until", script: "repeat local x = 1"},
		{name: "else twice", script: "if x then else else end"},
		{name: "table missing brace", script: "return {1, 2"},
		{name: "table multiline", script: "return {1,\n2,\n3"},
		{name: "index missing bracket", script: "return t[1"},
		{name: "call missing paren", script: "return f(1, 2"},
		{name: "call missing paren multiline", script: "return f(1,\n2"},
		{name: "name expected", script: "local 1 = 2"},
		{name: "field name expected", script: "return a.1"},
		{name: "keyword as name", script: "local end = 1"},
		{name: "return not last", script: "return 1\nlocal x = 2"},
		{name: "syntax levels 198", script: deep(197)},
		{name: "syntax levels 199", script: deep(198)},
		{name: "syntax levels 200", script: deep(199)},
		{name: "syntax levels 201", script: deep(200)},
		{name: "201 locals", script: locals(201)},
		{name: "60 upvalues", script: upvals(60)},
		{name: "61 upvalues", script: upvals(61)},
		{name: "260 call arguments", script: args(260)},
		{name: "190 locals", script: locals(190)},
		{name: "150 call arguments", script: args(150)},
		{name: "long concat chain", script: concats(300)},
		{name: "vararg ok", script: "local function f(...) return select('#', ...), arg.n end return {f(1, 2)}"},
		{name: "comment forms", script: "--[==[ long\ncomment ]==] return 1 -- short"},
		{name: "long string forms", script: "return {[[\nfirst newline skipped]], [==[a]]b]==]}"},
		{name: "escapes", script: "return '\\a\\b\\f\\n\\r\\t\\v\\\\\\\"\\'\\065\\x\\\n'"},
		{name: "numbers", script: "return {0x1F, 1e2, .5, 3., 0xA.8p1 == nil}"},
	} {
		h.check(c)
	}
}

func TestConformanceRuntimeErrors(t *testing.T) {
	h := newHarness(t, Config{})
	for _, c := range []confCase{
		{name: "arith local", script: "local a; return a + 1"},
		{name: "arith second local", script: "local a, b = 1; return a + b"},
		{name: "arith field", script: "local t = {} return t.x * 2"},
		{name: "arith indexed", script: "local t = {} return 2 - t[1]"},
		{name: "arith upvalue", script: "local u; local function f() return u / 2 end return f()"},
		{name: "arith string", script: "return 'abc' + 1"},
		{name: "arith numeric string ok", script: "return '10' + 1"},
		{name: "arith boolean", script: "local b = true return -b"},
		{name: "arith call result", script: "return tostring(1) + {}"},
		{name: "arith constant nil", script: "return 1 + nil"},
		{name: "arith in function", script: "local function f(x)\n  return x % 2\nend\nreturn f(nil)"},
		{name: "index local nil", script: "local t = nil; return t.x"},
		{name: "index field nil", script: "local t = {} return t.a.b"},
		{name: "index number", script: "local n = 5 return n.x"},
		{name: "index upvalue", script: "local u local function f() return u.x end return f()"},
		{name: "index global field", script: "return redis.nope.x"},
		{name: "set index nil", script: "local t t.x = 1"},
		{name: "set field nil", script: "local t = {} t.a.b = 1"},
		{name: "call local nil", script: "local f; f()"},
		{name: "call field nil", script: "local t = {} t.f()"},
		{name: "call method nil", script: "local t = {} t:m()"},
		{name: "call global field", script: "redis.nope()"},
		{name: "call number", script: "local n = 1 n()"},
		{name: "call string method", script: "local s = 'x' s:nope()"},
		{name: "call result of call", script: "local function f() end f()()"},
		{name: "tail call nil", script: "local t = {} return t.f()"},
		{name: "compare", script: "return {} < 1"},
		{name: "compare two tables", script: "return {} < {}"},
		{name: "compare le", script: "return 'a' <= 1"},
		{name: "length nil", script: "local x return #x"},
		{name: "length number", script: "local n = 3 return #n"},
		{name: "for initial", script: "for i = 'a', 2 do end"},
		{name: "for limit", script: "for i = 1, {} do end"},
		{name: "for step", script: "for i = 1, 2, nil do end"},
		{name: "for in nil", script: "for k in nil do end"},
		{name: "pcall arith", script: "local ok, e = pcall(function() local a; return a + 1 end) return e"},
		{name: "pcall index", script: "local ok, e = pcall(function() local t = {} return t.a.b end) return e"},
		{name: "pcall concat", script: "local ok, e = pcall(function() local x return 'a' .. x end) return e"},
		{name: "xpcall arith", script: "return xpcall(function() local a; return a + 1 end, function(m) return 'h:' .. m end)"},
		{name: "concat local", script: "local x return 'a' .. x"},
		{name: "concat field", script: "local t = {} return 'a' .. t.x .. 'b'"},
		{name: "concat first operand", script: "local x return x .. 'a'"},
		{name: "concat middle", script: "local x return 'a' .. x .. 'b'"},
		{name: "concat boolean", script: "return 'a' .. true"},
		{name: "concat upvalue", script: "local u local function f() return 'a' .. u end return f()"},
		{name: "error in nested function line", script: "local function f()\n  local t\n  return t.x\nend\nreturn f()"},
		{name: "string method on nil", script: "local s return s:upper()"},
		{name: "loop variable", script: "for k, v in pairs({a=1}) do local z = k + 1 end"},
		{name: "numeric loop variable", script: "for i = 1, 2 do local t = nil local z = t.x end"},
		{name: "loop body local", script: "for i = 1, 2 do local z = i .. nil end"},
		{name: "loop generator call", script: "for k in string.gmatch() do end"},
		{name: "nested loops", script: "for i = 1, 2 do for k, v in ipairs({1}) do local s = v .. {} end end"},
		{name: "after loop", script: "for i = 1, 2 do end local q return q.x"},
		{name: "stack overflow", script: "local function f() return 1 + f() end return f()"},
		{name: "deep recursion fits", script: "local function f(n) if n == 0 then return 0 end return 1 + f(n-1) end return f(16389)"},
		{name: "deep recursion overflows", script: "local function f(n) if n == 0 then return 0 end return 1 + f(n-1) end return f(16390)"},
	} {
		h.check(c)
	}
}

func TestConformanceArgumentErrors(t *testing.T) {
	h := newHarness(t, Config{})
	for _, body := range []string{
		"return string.sub()", "return string.sub(nil)", "return string.upper({})", "return string.find('a')",
		"return math.floor('x')", "return math.floor()", "return math.max()", "return math.max(1, nil)", "return math.max(1, '3', 2)",
		"return string.rep('x')", "return ('x'):sub()", "return ('x'):rep({})", "return table.concat(5)", "return tostring()",
		"return type()", "return setmetatable(1, {})", "return select()", "return select('x')", "return select(0, 1)",
		"return string.char(256)", "return string.char('a')", "return string.char('65', 66)", "return math.random(0)", "return math.random(3, 1)",
		"return table.insert({}, 1, 2, 3)", "return ipairs()", "return ipairs(nil)", "return unpack()",
		"return coroutine.resume(1)", "return coroutine.status(nil)", "return coroutine.create(print == nil)", "return coroutine.create(tostring)",
		"return string.format()", "return string.len()", "return string.byte('abc', 'x')",
		"return math.sqrt('4')", "return math.pow(2)", "return tonumber()", "return rawequal(1)", "return assert()",
		"local f = string.sub return f()", "local s = string return s.sub()", "return pcall(string.sub)",
		"local t = {f = string.sub} return t.f()", "local t = {f = string.sub} return t:f()",
		"return string.gsub('a', '(', 'b')", "return string.find('a', '[a')", "return string.match('a', '%')",
		"return string.gsub('abc', '%w', {}, 'x')", "return next({}, 'nope')", "return rawset({}, nil, 1)",
		"return bit.band({})", "return struct.pack(1)", "return cjson.encode()", "return cmsgpack.unpack({})",
		"return redis.sha1hex({})", "return table.sort({3, 1}, 5)", "return tostring(nil) .. math.abs(-2)",
		"return string.sub('hello', '2', '3')", "return string.upper(12.5)", "return math.floor('2.7')",
		"for k in string.gmatch() do end",
	} {
		h.check(confCase{name: body, script: body})
	}
}

func TestConformanceReadOnlyAndShebang(t *testing.T) {
	h := newHarness(t, Config{})
	for _, c := range []confCase{
		{name: "ro read", script: "return redis.call('GET', KEYS[1])", keys: []string{"k"}, ro: true, setup: [][]string{{"SET", "k", "v"}}},
		{name: "ro write", script: "return redis.call('SET', KEYS[1], 'x')", keys: []string{"k"}, ro: true},
		{name: "ro write pcall", script: "return redis.pcall('INCR', KEYS[1])", keys: []string{"k"}, ro: true},
		{name: "ro write after read", script: "redis.call('GET', KEYS[1]) redis.call('DEL', KEYS[1]) return 1", keys: []string{"k"}, ro: true},
		{name: "shebang", script: "#!lua\nreturn redis.call('SET', KEYS[1], 'x')", keys: []string{"k"}},
		{name: "shebang line numbers", script: "#!lua\nerror('line two')"},
		{name: "shebang no-writes", script: "#!lua flags=no-writes\nreturn redis.call('SET', KEYS[1], 'x')", keys: []string{"k"}},
		{name: "shebang no-writes read", script: "#!lua flags=no-writes\nreturn redis.call('GET', KEYS[1])", keys: []string{"k"}},
		{name: "shebang in ro", script: "#!lua\nreturn 1", ro: true},
		{name: "shebang no-writes in ro", script: "#!lua flags=no-writes\nreturn 1", ro: true},
		{name: "shebang flags", script: "#!lua flags=allow-oom,allow-stale,no-cluster,allow-cross-slot-keys\nreturn 1"},
		{name: "shebang empty flags", script: "#!lua flags=\nreturn 1"},
		{name: "shebang bad flag", script: "#!lua flags=no-writes,bad\nreturn 1"},
		{name: "shebang bad engine", script: "#!py\nreturn 1"},
		{name: "shebang no newline", script: "#!lua"},
		{name: "shebang bad option", script: "#!lua x=1\nreturn 1"},
		{name: "shebang quotes", script: "#!lua \"flags=no-writes\"\nreturn 1"},
		{name: "shebang unbalanced", script: "#!lua \"unbalanced\nreturn 1"},
	} {
		h.check(c)
	}
}

// TestConformanceScriptCommands compares SCRIPT and EVALSHA with Redis's.
func TestConformanceScriptCommands(t *testing.T) {
	h := newHarness(t, Config{})
	body := "return 'loaded'"
	sha := SHA([]byte(body))
	for _, args := range [][]string{
		{"SCRIPT", "LOAD", body},
		{"SCRIPT", "LOAD", "return +"},
		{"SCRIPT", "LOAD"},
		{"SCRIPT", "EXISTS", sha, strings.ToUpper(sha), "0000000000000000000000000000000000000000", "short"},
		{"SCRIPT", "EXISTS"},
		{"EVALSHA", sha, "0"},
		{"EVALSHA", strings.ToUpper(sha), "0"},
		{"EVALSHA_RO", sha, "0"},
		{"EVALSHA", "0000000000000000000000000000000000000000", "0"},
		{"EVALSHA", "abc", "0"},
		{"EVALSHA", "abc", "notanumber"},
		{"EVALSHA", sha, "notanumber"},
		{"EVALSHA", sha, "2", "onlyone"},
		{"EVALSHA", sha, "-1"},
		{"EVAL", body, "01"},
		{"EVAL", body, "+1", "k"},
		{"SCRIPT", "KILL"},
		{"SCRIPT", "KILL", "now"},
		{"SCRIPT", "FLUSH", "BAD"},
		{"SCRIPT", "FLUSH", "ASYNC"},
		{"SCRIPT", "EXISTS", sha},
		{"EVALSHA", sha, "0"},
		{"SCRIPT", "LOAD", body},
		{"SCRIPT", "FLUSH"},
		{"SCRIPT", "FLUSH", "sync"},
		{"SCRIPT", "NOPE"},
		{"SCRIPT", "load", "#!lua flags=bad\nreturn 1"},
	} {
		bs := make([][]byte, len(args))
		for i, a := range args {
			bs[i] = []byte(a)
		}
		want, _ := h.conns[2].doRaw(bs...)
		var got values.Reply
		if strings.EqualFold(args[0], "SCRIPT") {
			got = h.e.ScriptCommand(bs)
		} else {
			req, bad := ParseEval(bs)
			if bad != nil {
				got = *bad
			} else {
				got = h.e.Eval(req, h.fwd)
			}
		}
		if g := writeReply(nil, got, 2); !bytes.Equal(g, want) {
			t.Errorf("%q:\n  redis:  %q\n  engine: %q", args, want, g)
		}
	}
}
