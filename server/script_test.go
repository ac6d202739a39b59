package server_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/internal/redisfuzz"
	"github.com/rlserver/rlserver/internal/redistest"
	"github.com/rlserver/rlserver/internal/testserver"
	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/values"
)

// bs makes a command of strings.
func bs(args ...string) [][]byte {
	out := make([][]byte, len(args))
	for i, a := range args {
		out[i] = []byte(a)
	}
	return out
}

// TestScriptsMatchRedis sends the same scripting commands — EVAL, SCRIPT
// LOAD, EVALSHA, their errors, the conversions of every type both ways,
// RESP3 — to a real rlserver and a real redis-server over TCP, with the
// values they leave behind read back, and compares every reply byte for
// byte. Package script's own tests compare the engine; this one compares
// the server that runs it on the store (the keyspace, the reply writer,
// the sha cache, the errors of the arguments).
func TestScriptsMatchRedis(t *testing.T) {
	ref := redistest.Start(t)
	var now atomic.Int64
	node := testserver.Start(t, testserver.Options{Clock: now.Load})
	const inc = "return redis.call('INCRBY', KEYS[1], ARGV[1])"
	steps := [][][]byte{
		bs("EVAL", "return {1, 2.9, -3.9, 'x', true, false, {ok='fine'}, {err='no'}, {1, nil, 3}}", "0"),
		bs("EVAL", "return redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])", "1", "s", "v", "100000"),
		bs("EVAL", "return {redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2]), redis.call('TYPE', KEYS[1])}", "2", "s", "none"),
		bs("EVAL", "redis.call('RPUSH', KEYS[1], 'a', 'b'); return redis.call('LRANGE', KEYS[1], 0, -1)", "1", "l"),
		bs("EVAL", "redis.call('HSET', KEYS[1], 'f', 1.5); return redis.call('HGETALL', KEYS[1])", "1", "h"),
		bs("EVAL", "redis.call('ZADD', KEYS[1], 1, 'a', 2.5, 'b'); return redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')", "1", "z"),
		bs("EVAL", "return redis.call('ZSCORE', KEYS[1], 'b')", "1", "z"),
		bs("EVAL", "return redis.call('INCR', KEYS[1])", "1", "l"), // WRONGTYPE, raised
		bs("EVAL", "return redis.pcall('INCR', KEYS[1])", "1", "l"),
		bs("EVAL", "return redis.call('NOSUCH')", "0"),
		bs("EVAL", "return redis.call('GET')", "0"),
		bs("EVAL", "return nosuch", "0"),
		bs("EVAL", "syntax error here", "0"),
		bs("EVAL", "return redis.error_reply('MYERR mine')", "0"),
		bs("EVAL", "return redis.status_reply('FINE')", "0"),
		bs("EVAL", "return redis.sha1hex('')", "0"),
		bs("EVAL", "return cjson.encode({a={1,2}})", "0"),
		bs("EVAL", "return ARGV", "0", "x", "y"),
		bs("EVAL", "return 1", "2", "k"),
		bs("EVAL", "return 1", "-1"),
		bs("EVAL", "return 1", "x"),
		bs("SCRIPT", "LOAD", inc),
		bs("SCRIPT", "EXISTS", "b5ea2ae60b9e2ba3c2a7e2e3b74e2a30d9ce3a6f", "0000000000000000000000000000000000000000"),
		bs("EVALSHA", "0000000000000000000000000000000000000000", "0"),
		bs("EVALSHA", "short", "0"),
		bs("EVAL_RO", "return redis.call('SET', KEYS[1], 1)", "1", "ro"),
		bs("EVAL_RO", "return redis.call('GET', KEYS[1])", "1", "s"),
		bs("SCRIPT", "KILL"),
		bs("SCRIPT", "NOSUCH"),
		bs("EVAL", "redis.setresp(3); return redis.call('HGETALL', KEYS[1])", "1", "h"),
		bs("EVAL", "return {double=1.5}", "0"),
		bs("GET", "s"), bs("LRANGE", "l", "0", "-1"), bs("HGETALL", "h"), bs("ZRANGE", "z", "0", "-1", "WITHSCORES"),
	}
	sha := []byte(strings.ToLower(shaOf(inc)))
	steps = append(steps, [][]byte{[]byte("EVALSHA"), sha, []byte("1"), []byte("n"), []byte("5")},
		[][]byte{[]byte("EVALSHA"), []byte(strings.ToUpper(string(sha))), []byte("1"), []byte("n"), []byte("5")})
	for _, resp := range []int{2, 3} {
		a, err := redisfuzz.Dial(ref, resp)
		if err != nil {
			t.Fatal(err)
		}
		b, err := redisfuzz.Dial(node.Addr, resp)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []*redisfuzz.Conn{a, b} {
			c.Do(bs("FLUSHALL")...)
			c.Do(bs("SCRIPT", "FLUSH")...)
		}
		for _, step := range steps {
			rs, err := a.Pipeline([][][]byte{bs("TIME"), step})
			if err != nil {
				t.Fatal(err)
			}
			now.Store(timeOf(t, rs[0]))
			got, err := b.Do(step...)
			if err != nil {
				t.Fatal(err)
			}
			if !redisfuzz.Equal(step, rs[1], got) {
				t.Errorf("RESP%d %s:\n redis-server %s\n rlserver     %s", resp, redisfuzz.Format(step), show(rs[1]), show(got))
			}
		}
		a.Close()
		b.Close()
	}
}

// show renders a reply for a message.
func show(r values.Reply) string {
	switch r.Kind {
	case values.Array, values.Map, values.Set:
		parts := make([]string, len(r.Elems))
		for i, e := range r.Elems {
			parts[i] = show(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case values.Int, values.Bool:
		return strconv.FormatInt(r.Int, 10)
	case values.Nil, values.NilArray:
		return "(nil)"
	case values.Error:
		return "-" + string(r.Str)
	}
	return strconv.Quote(string(r.Str))
}

// shaOf returns the sha1 of a script, as SCRIPT LOAD answers it.
func shaOf(body string) string { return redis.NewScript(body).Hash() }

// TestRunawayScript: a script that never ends makes the commands that
// would wait for its keys answer BUSY once it passes --lua-time-limit,
// while other keys and keyless commands are served at once, on any
// connection; SCRIPT KILL stops it (its client gets Redis's error) and its
// key is served again. A script that has written cannot be killed
// (UNKILLABLE) and ends on its own; one that allocates without bound is
// stopped at the memory cap; one that reaches for the host is refused; a
// body over the request limit is refused and the node goes on.
func TestRunawayScript(t *testing.T) {
	node := testserver.Start(t, testserver.Options{LuaTimeLimit: 50 * time.Millisecond})
	ctx := context.Background()
	// No retries: go-redis sends a command again after a read timeout,
	// which would start a second runaway script.
	rdb := redis.NewClient(&redis.Options{Addr: node.Addr, PoolSize: 8, ReadTimeout: 20 * time.Second, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.Set(ctx, "other", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}

	spun := make(chan error, 1)
	go func() { spun <- rdb.Eval(ctx, "while true do end", []string{"spin"}).Err() }()
	testutil.WaitForErr(t, 10*time.Second, "GET of the spinning script's key to answer BUSY", func() error {
		if err := rdb.Get(ctx, "spin").Err(); err == nil || !strings.HasPrefix(err.Error(), "BUSY ") {
			return fmt.Errorf("GET answered %v", err)
		}
		return nil
	})
	for _, cmd := range [][]any{{"RL.CHECK", "spin", "token", 5, "10"}, {"INCR", "spin"}, {"EVAL", "return 1", 1, "spin"}} {
		if err := rdb.Do(ctx, cmd...).Err(); err == nil || !strings.HasPrefix(err.Error(), "BUSY ") {
			t.Errorf("%v during the runaway script: %v, want BUSY", cmd, err)
		}
	}
	start := time.Now()
	if v, err := rdb.Get(ctx, "other").Result(); v != "1" || err != nil {
		t.Errorf("GET of another key: %q %v", v, err)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Errorf("PING: %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("other commands took %v beside the runaway script", time.Since(start))
	}
	if r, err := rdb.ScriptKill(ctx).Result(); r != "OK" || err != nil {
		t.Fatalf("SCRIPT KILL: %q %v", r, err)
	}
	if err := <-spun; err == nil || !strings.Contains(err.Error(), "Script killed by user with SCRIPT KILL") {
		t.Errorf("the killed script's client got %v", err)
	}
	if err := rdb.Set(ctx, "spin", "free", 0).Err(); err != nil {
		t.Errorf("SET after the kill: %v", err)
	}
	if err := rdb.ScriptKill(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOTBUSY") {
		t.Errorf("SCRIPT KILL with nothing running: %v", err)
	}

	// A script that wrote cannot be killed; it ends by itself (3e6 turns
	// of a loop: a few hundred ms, seconds under the race detector).
	wrote := make(chan error, 1)
	go func() {
		wrote <- rdb.Eval(ctx, "redis.call('SET', KEYS[1], 'x'); "+
			"local n = 0 while n < 3e6 do n = n + 1 end return n", []string{"w"}).Err()
	}()
	testutil.WaitForErr(t, 10*time.Second, "SCRIPT KILL of a script that wrote to answer UNKILLABLE", func() error {
		if err := rdb.ScriptKill(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "UNKILLABLE") {
			return fmt.Errorf("SCRIPT KILL answered %v", err)
		}
		return nil
	})
	if err := <-wrote; err != nil {
		t.Errorf("the unkillable script: %v", err)
	}

	for _, c := range []struct{ body, want string }{
		{"local t = {} while true do t[#t+1] = string.rep('x', 1000) end", "memory"},
		{"return os.execute('true')", "nonexistent global variable 'os'"},
		{"return io.open('/etc/passwd')", "nonexistent global variable 'io'"},
		{"return loadfile('/etc/passwd')", "nonexistent global variable 'loadfile'"},
		{"newglobal = 1", "Attempt to modify a readonly table"},
	} {
		err := rdb.Eval(ctx, c.body, nil).Err()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("EVAL %q: %v, want an error with %q", c.body, err, c.want)
		}
	}
	big := "return '" + strings.Repeat("x", 10<<20) + "'"
	if err := rdb.Eval(ctx, big, nil).Err(); err == nil {
		t.Error("a 10 MB body (over the 8 MiB request limit) was run")
	}
	if v, err := rdb.Get(ctx, "spin").Result(); v != "free" || err != nil {
		t.Errorf("after the hostile scripts: GET spin = %q %v", v, err)
	}
}

// TestScriptKeys: a script may use the keys it declares; another key is an
// error (rlserver locks only the declared keys); a script without keys, or
// one that names KEYS, may see every key. MULTI runs a script with the
// other queued commands, atomically.
func TestScriptKeys(t *testing.T) {
	node := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: node.Addr})
	t.Cleanup(func() { rdb.Close() })
	rdb.Set(ctx, "a", "1", 0)
	rdb.Set(ctx, "b", "2", 0)
	if v, err := rdb.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{"a"}).Result(); v != "1" || err != nil {
		t.Errorf("declared key: %v %v", v, err)
	}
	err := rdb.Eval(ctx, "return redis.call('GET', 'b')", []string{"a"}).Err()
	if err == nil || !strings.Contains(err.Error(), "not in its KEYS") {
		t.Errorf("undeclared key: %v", err)
	}
	if v, err := rdb.Eval(ctx, "return redis.call('GET', 'b')", nil).Result(); v != "2" || err != nil {
		t.Errorf("a keyless script reading a key: %v %v", v, err)
	}
	v, err := rdb.Eval(ctx, "return #redis.call('KEYS', ARGV[1])", []string{"a"}, "*").Result()
	if v != int64(2) || err != nil {
		t.Errorf("KEYS from a script with a key: %v %v", v, err)
	}
	var get *redis.StringCmd
	_, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Eval(ctx, "return redis.call('INCRBY', KEYS[1], ARGV[1])", []string{"a"}, 10)
		get = p.Get(ctx, "a")
		return nil
	})
	if err != nil || get.Val() != "11" {
		t.Errorf("EVAL in MULTI: %v, GET %q", err, get.Val())
	}
	// INFO keyspace counts the values (two without a TTL, one with) and
	// the limiter's key (which always expires).
	rdb.Set(ctx, "c", "3", time.Hour)
	rdb.Do(ctx, "RL.CHECK", "rl", "token", 5, "1h")
	if info := rdb.Info(ctx, "keyspace").Val(); !strings.Contains(info, "db0:keys=4,expires=2,") {
		t.Errorf("INFO keyspace: %q, want keys=4,expires=2", info)
	}
}
