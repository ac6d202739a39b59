package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

const execAbort = "-EXECABORT Transaction discarded because of previous errors.\r\n"

func TestMultiExec(t *testing.T) {
	check := resp("RL.CHECK", "k", "fixed", "2", "1m")
	runScript(t, Config{}, []step{
		{resp("MULTI"), "+OK\r\n"},
		{check, "+QUEUED\r\n"},
		{check, "+QUEUED\r\n"},
		{resp("PING"), "+QUEUED\r\n"},
		{resp("EXEC"), "*3\r\n" + ints(1, 2, 1, 0, 60000) + ints(1, 2, 0, 0, 60000) + "+PONG\r\n"},
		{resp("EXEC"), "-ERR EXEC without MULTI\r\n"},
		{resp("DISCARD"), "-ERR DISCARD without MULTI\r\n"},
		// Nested MULTI is an error that does not abort the transaction.
		{resp("MULTI"), "+OK\r\n"},
		{resp("MULTI"), "-ERR MULTI calls can not be nested\r\n"},
		{resp("RL.RESET", "k"), "+QUEUED\r\n"},
		{resp("EXEC"), "*1\r\n:1\r\n"},
		// DISCARD drops the queue: nothing is charged.
		{resp("MULTI"), "+OK\r\n"},
		{check, "+QUEUED\r\n"},
		{resp("DISCARD"), "+OK\r\n"},
		{resp("RL.PEEK", "k", "fixed", "2", "1m"), ints(1, 2, 2, 0, 0)},
		{resp("MULTI"), "+OK\r\n"},
		{resp("EXEC"), "*0\r\n"},
		// State-dependent errors come back inside EXEC's array.
		{resp("MULTI"), "+OK\r\n"},
		{resp("RL.CHECK", "w", "token", "1", "1m"), "+QUEUED\r\n"},
		{resp("RL.CHECK", "w", "fixed", "1", "1m"), "+QUEUED\r\n"},
		{resp("CL.THROTTLE", "g", "1", "1", "1"), "+QUEUED\r\n"},
		{resp("EXEC"), "*3\r\n" + ints(1, 1, 0, 0, 60000) +
			"-WRONGTYPE Operation against a key holding the wrong kind of value: the key holds 'token' state, not 'fixed' (RL.RESET it or use another key)\r\n" +
			ints(0, 2, 1, -1, 1)},
	})
}

// TestExecAbort: a queued command that does not parse is answered at once
// and makes EXEC discard the whole transaction, so nothing is charged.
func TestExecAbort(t *testing.T) {
	for name, bad := range map[string]struct{ req, reply string }{
		"unknown command": {resp("NOSUCH", "a"), "-ERR unknown command 'NOSUCH', with args beginning with: 'a' \r\n"},
		"arity":           {resp("RL.CHECK", "x"), "-ERR wrong number of arguments for 'rl.check' command; usage: RL.CHECK key algo limit window [COST cost] [BURST burst]\r\n"},
		"algorithm": {resp("RL.CHECK", "x", "bogus", "1", "1"),
			"-ERR unknown algorithm 'bogus': want fixed, sliding, log, token, leaky or gcra\r\n"},
		"peek cost":    {resp("RL.PEEK", "x", "fixed", "1", "1", "COST", "1"), "-ERR syntax error: unexpected 'COST' (options are BURST n)\r\n"},
		"throttle":     {resp("CL.THROTTLE", "x", "a", "1", "1"), "-Cell error: Couldn't parse as integer: a\r\n"},
		"checkrules":   {resp("RL.CHECKRULES", "/", "free", "user"), "-ERR syntax error: 'user' is not type=value (such as user=u1 or ip=1.2.3.4); COST n comes last\r\n"},
		"rule json":    {resp("RL.RULE.SET", "r", "{"), "-ERR invalid rule: malformed JSON: unexpected end of input\r\n"},
		"reset length": {resp("RL.RESET", strings.Repeat("k", 1025)), "-ERR key is 1025 bytes, longer than the limit of 1024 (--max-key-bytes)\r\n"},
	} {
		t.Run(name, func(t *testing.T) {
			runScript(t, Config{}, []step{
				{resp("MULTI"), "+OK\r\n"},
				{resp("RL.CHECK", "j", "fixed", "2", "1m"), "+QUEUED\r\n"},
				{bad.req, bad.reply},
				{resp("PING"), "+QUEUED\r\n"},
				{resp("EXEC"), execAbort},
				{resp("RL.PEEK", "j", "fixed", "2", "1m"), ints(1, 2, 2, 0, 0)},
				{resp("EXEC"), "-ERR EXEC without MULTI\r\n"},
			})
		})
	}
}

func TestWatchIsNotSupported(t *testing.T) {
	runScript(t, Config{}, []step{
		{resp("WATCH", "k"), "-ERR WATCH is not supported: rlserver runs EXEC's commands with their keys locked, " +
			"so there is nothing to watch; send MULTI ... EXEC without WATCH\r\n"},
		{resp("UNWATCH"), "+OK\r\n"},
		{resp("MULTI"), "+OK\r\n"},
		{resp("WATCH", "k"), "-ERR WATCH inside MULTI is not allowed\r\n"},
		{resp("UNWATCH"), "+QUEUED\r\n"},
		{resp("EXEC"), "*1\r\n+OK\r\n"},
	})
}

func TestMultiConnectionCommands(t *testing.T) {
	runScript(t, Config{}, []step{
		// RESET ends the transaction.
		{resp("MULTI"), "+OK\r\n"},
		{resp("PING"), "+QUEUED\r\n"},
		{resp("RESET"), "+RESET\r\n"},
		{resp("EXEC"), "-ERR EXEC without MULTI\r\n"},
		// Commands that need every key run inside EXEC too.
		{resp("MULTI"), "+OK\r\n"},
		{resp("RL.CHECK", "a", "fixed", "5", "1m"), "+QUEUED\r\n"},
		{resp("DBSIZE"), "+QUEUED\r\n"},
		{resp("FLUSHALL"), "+QUEUED\r\n"},
		{resp("DBSIZE"), "+QUEUED\r\n"},
		{resp("EXEC"), "*4\r\n" + ints(1, 5, 4, 0, 60000) + ":1\r\n+OK\r\n:0\r\n"},
		// A queued HELLO switches the protocol for what follows it.
		{resp("MULTI"), "+OK\r\n"},
		{resp("HELLO", "3"), "+QUEUED\r\n"},
		{resp("CLIENT", "GETNAME"), "+QUEUED\r\n"},
		{resp("EXEC"), "*2\r\n%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n7.2.0\r\n" +
			"$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:1\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n" +
			"$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n_\r\n"},
		// A pipelined transaction gets its replies in one piece.
		{resp("MULTI") + resp("RL.CHECK", "p", "fixed", "1", "1m") + resp("RL.CHECK", "p", "fixed", "1", "1m") + resp("EXEC"),
			"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n" + ints(1, 1, 0, 0, 60000) + ints(0, 1, 0, 60000, 60000)},
	})
}

func TestMultiRules(t *testing.T) {
	rule := `{"target":"/x","tier":"*","key_type":"user","algo":"fixed","limit":1,"window":"1m"}`
	runScript(t, Config{}, []step{
		{resp("RL.RULE.SET", "r1", rule), ":1\r\n"},
		{resp("MULTI"), "+OK\r\n"},
		{resp("RL.CHECKRULES", "/x", "free", "user=u"), "+QUEUED\r\n"},
		{resp("RL.CHECKRULES", "/x", "free", "user=u"), "+QUEUED\r\n"},
		{resp("EXEC"), "*2\r\n*6\r\n" + ints(1, 1, 0, 0, 60000)[4:] + "$2\r\nr1\r\n" +
			"*6\r\n" + ints(0, 1, 0, 60000, 60000)[4:] + "$2\r\nr1\r\n"},
		// A rule set in the transaction applies to the checks after it.
		{resp("MULTI"), "+OK\r\n"},
		{resp("RL.RULE.SET", "r2", strings.Replace(rule, `"user"`, `"ip"`, 1)), "+QUEUED\r\n"},
		{resp("RL.CHECKRULES", "/x", "free", "ip=1.2.3.4"), "+QUEUED\r\n"},
		{resp("RL.RULE.DEL", "r2"), "+QUEUED\r\n"},
		{resp("EXEC"), "*3\r\n:1\r\n*6\r\n" + ints(1, 1, 0, 0, 60000)[4:] + "$2\r\nr2\r\n:1\r\n"},
	})
}

// TestExecIsAtomic: every transaction checks x then y; had another
// client's check come in between, the two would report different counts.
func TestExecIsAtomic(t *testing.T) {
	_, addr := startServer(t, Config{})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		c := newClient(t, addr, 2)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				var x, y *redis.Cmd
				_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
					x = p.Do(ctx, "RL.CHECK", "x", "fixed", 1<<40, "1h")
					y = p.Do(ctx, "RL.CHECK", "y", "fixed", 1<<40, "1h")
					return nil
				})
				if err == nil && fmt.Sprint(x.Val().([]any)[2]) != fmt.Sprint(y.Val().([]any)[2]) {
					err = fmt.Errorf("x %v and y %v diverged inside one EXEC", x.Val(), y.Val())
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestGoRedisTxPipeline(t *testing.T) {
	_, addr := startServer(t, Config{Clock: fakeClock()})
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		c := newClient(t, addr, proto)
		key := fmt.Sprintf("tx%d", proto)
		cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for i := 0; i < 3; i++ {
				p.Do(ctx, "RL.CHECK", key, "fixed", 2, "1m")
			}
			p.Ping(ctx)
			return nil
		})
		if err != nil {
			t.Fatalf("RESP%d: %v", proto, err)
		}
		var got []string
		for _, cmd := range cmds[:3] {
			got = append(got, fmt.Sprint(cmd.(*redis.Cmd).Val()))
		}
		got = append(got, cmds[3].(*redis.StatusCmd).Val())
		if want := "[1 2 1 0 60000] [1 2 0 0 60000] [0 2 0 60000 60000] PONG"; strings.Join(got, " ") != want {
			t.Fatalf("RESP%d: %v, want %s", proto, got, want)
		}
		// A command that does not parse aborts the whole transaction.
		_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, "RL.CHECK", "other", "fixed", 2, "1m")
			p.Do(ctx, "RL.CHECK", "other", "bogus", 2, "1m")
			return nil
		})
		if err == nil || !strings.HasPrefix(err.Error(), "EXECABORT") {
			t.Fatalf("RESP%d: bad transaction: %v, want EXECABORT", proto, err)
		}
		var rerr redis.Error
		if !errors.As(err, &rerr) {
			t.Fatalf("RESP%d: %T is not a redis.Error", proto, err)
		}
		if v, err := c.Do(ctx, "RL.PEEK", "other", "fixed", 2, "1m").Result(); err != nil || fmt.Sprint(v) != "[1 2 2 0 0]" {
			t.Fatalf("RESP%d: after the aborted transaction: %v %v, want nothing charged", proto, v, err)
		}
	}
}
