package server

import (
	"strings"
	"testing"
)

// step is one request and its exact expected reply.
type step struct{ req, want string }

// runScript runs steps in order on one connection to a fresh server with a
// fixed clock (t0, a whole minute), so replies are exact.
func runScript(t *testing.T, cfg Config, steps []step) {
	t.Helper()
	cfg.Clock = fakeClock()
	_, addr := startServer(t, cfg)
	c := dialRaw(t, addr)
	for _, s := range steps {
		c.roundTrip(s.req, s.want)
	}
}

func TestLimiterCommands(t *testing.T) {
	runScript(t, Config{}, []step{
		{resp("RL.CHECK", "k", "token", "3", "1m"), ints(1, 3, 2, 0, 20000)},
		{resp("rl.check", "k", "TOKEN", "3", "1m", "cost", "2"), ints(1, 3, 0, 0, 60000)},
		{resp("RL.CHECK", "k", "token", "3", "1m"), ints(0, 3, 0, 20000, 60000)},
		{resp("RL.PEEK", "k", "token", "3", "1m"), ints(1, 3, 0, 0, 60000)},
		{resp("RL.CHECK", "k", "fixed", "3", "1m"),
			"-WRONGTYPE Operation against a key holding the wrong kind of value: the key holds 'token' state, not 'fixed' (RL.RESET it or use another key)\r\n"},
		{resp("RL.RESET", "k"), ":1\r\n"},
		{resp("RL.RESET", "k"), ":0\r\n"},
		{resp("RL.CHECK", "f", "fixed", "2", "60"), ints(1, 2, 1, 0, 60000)},
		{resp("RL.CHECK", "f", "fixed", "2", "60", "COST", "5"), ints(0, 2, 1, -1, 60000)},
		{resp("RL.CHECK", "f", "fixed", "2", "60", "COST", "2"), ints(0, 2, 1, 60000, 60000)},
		{resp("RL.CHECK", "s", "sliding", "10", "1s", "COST", "4"), ints(1, 10, 6, 0, 1751)},
		{resp("RL.CHECK", "l", "log", "2", "1s", "COST", "0"), ints(1, 2, 2, 0, 0)},
		{resp("RL.CHECK", "l", "log", "2", "500ms"), ints(1, 2, 1, 0, 500)},
		{resp("RL.CHECK", "g", "gcra", "10", "1s", "BURST", "2"), ints(1, 2, 1, 0, 100)},
		{resp("RL.CHECK", "b", "leaky", "10", "1s", "BURST", "2", "COST", "3"), ints(0, 2, 2, -1, 0)},
		{resp("DBSIZE"), ":4\r\n"}, // f, s, l, g: k was reset, b was denied
	})
}

func TestThrottleCommand(t *testing.T) {
	runScript(t, Config{}, []step{
		{resp("CL.THROTTLE", "user123", "15", "30", "60", "1"), ints(0, 16, 15, -1, 2)},
		{resp("CL.THROTTLE", "user123", "15", "30", "60", "0"), ints(0, 16, 15, -1, 2)},
		{resp("cl.throttle", "user123", "15", "30", "60"), ints(0, 16, 14, -1, 4)},
		{resp("CL.THROTTLE", "big", "15", "30", "60", "17"), ints(1, 16, 16, -1, 0)},
		{resp("CL.THROTTLE", "z", "0", "0", "60"), "-Cell error: Zero rates are not supported\r\n"},
		{resp("CL.THROTTLE", "z", "a", "1", "1"), "-Cell error: Couldn't parse as integer: a\r\n"},
		{resp("CL.THROTTLE", "z", "1"),
			"-Cell error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]\r\n"},
		{resp("RL.CHECK", "user123", "token", "3", "1m"),
			"-WRONGTYPE Operation against a key holding the wrong kind of value: the key holds 'gcra' state, not 'token' (RL.RESET it or use another key)\r\n"},
	})
}

func TestBadArguments(t *testing.T) {
	long := strings.Repeat("x", 1025)
	runScript(t, Config{}, []step{
		{resp("RL.CHECK", "k"), "-ERR wrong number of arguments for 'rl.check' command; usage: RL.CHECK key algo limit window [COST cost] [BURST burst]\r\n"},
		{resp("RL.CHECK", "k", "token", "0", "1m"), "-ERR invalid limit '0': want a positive integer no larger than 2^48\r\n"},
		{resp("RL.CHECK", "k", "token", "1.5", "1m"), "-ERR invalid limit '1.5': want a positive integer no larger than 2^48\r\n"},
		{resp("RL.CHECK", "k", "token", "+3", "1m"), "-ERR invalid limit '+3': want a positive integer no larger than 2^48\r\n"},
		{resp("RL.CHECK", "k", "token", "99999999999999999999", "1m"),
			"-ERR invalid limit '99999999999999999999': want a positive integer no larger than 2^48\r\n"},
		{resp("RL.CHECK", "k", "token", "3", "0"),
			"-ERR invalid window '0': want a duration such as 500ms, 60 (seconds), 1m, 24h or 1d, from 1ms to 366d\r\n"},
		{resp("RL.CHECK", "k", "token", "3", "1w"),
			"-ERR invalid window '1w': want a duration such as 500ms, 60 (seconds), 1m, 24h or 1d, from 1ms to 366d\r\n"},
		{resp("RL.CHECK", "k", "bogus", "3", "1m"),
			"-ERR unknown algorithm 'bogus': want fixed, sliding, log, token, leaky or gcra\r\n"},
		{resp("RL.CHECK", "k", "token", "3", "1m", "COST"), "-ERR syntax error: 'COST' needs a value\r\n"},
		{resp("RL.CHECK", "k", "token", "3", "1m", "COST", "-1"),
			"-ERR invalid 'COST' '-1': want a non-negative integer no larger than 2^48\r\n"},
		{resp("RL.CHECK", "k", "token", "3", "1m", "FOO", "1"),
			"-ERR syntax error: unexpected 'FOO' (options are COST n or BURST n)\r\n"},
		{resp("RL.CHECK", "k", "fixed", "3", "1m", "BURST", "5"),
			"-ERR BURST applies to token, leaky and gcra only, not 'fixed'\r\n"},
		{resp("RL.CHECK", "k", "log", "20000", "1m"),
			"-ERR limit 20000 is above the maximum for 'log' (10000, raise it with --max-log-limit): log keeps one entry per request\r\n"},
		{resp("RL.PEEK", "k", "token", "3", "1m", "COST", "1"),
			"-ERR syntax error: unexpected 'COST' (options are BURST n)\r\n"},
		{resp("RL.CHECK", long, "token", "3", "1m"),
			"-ERR key is 1025 bytes, longer than the limit of 1024 (--max-key-bytes)\r\n"},
		{resp("RL.RESET"), "-ERR wrong number of arguments for 'rl.reset' command; usage: RL.RESET key\r\n"},
		{resp("FOO", "a", "b"), "-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n"},
		{resp("SELECT", "1"), "-ERR DB index is out of range\r\n"},
		{resp("SELECT", "x"), "-ERR value is not an integer or out of range\r\n"},
		// Nothing above changed any state.
		{resp("DBSIZE"), ":0\r\n"},
	})
}

func TestConnectionCommands(t *testing.T) {
	runScript(t, Config{}, []step{
		{resp("PING"), "+PONG\r\n"},
		{resp("ping", "hi"), "$2\r\nhi\r\n"},
		{resp("ECHO", "x y"), "$3\r\nx y\r\n"},
		{resp("SELECT", "0"), "+OK\r\n"},
		{resp("TIME"), "*2\r\n$10\r\n1700000040\r\n$1\r\n0\r\n"},
		{resp("CLIENT", "GETNAME"), "$-1\r\n"},
		{resp("CLIENT", "SETNAME", "gw-1"), "+OK\r\n"},
		{resp("CLIENT", "GETNAME"), "$4\r\ngw-1\r\n"},
		{resp("CLIENT", "SETNAME", "a b"), "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"},
		{resp("CLIENT", "SETINFO", "LIB-NAME", "go-redis"), "+OK\r\n"},
		{resp("HELLO", "4"), "-NOPROTO unsupported protocol version\r\n"},
		{resp("HELLO", "3"), "%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n7.2.0\r\n" +
			"$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:1\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n" +
			"$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"},
		{resp("CONFIG", "GET", "save"), "%1\r\n$4\r\nsave\r\n$0\r\n\r\n"},
		{resp("CLIENT", "SETNAME", "x"), "+OK\r\n"},
		{resp("RESET"), "+RESET\r\n"},
		{resp("CLIENT", "GETNAME"), "$-1\r\n"},
		{resp("CONFIG", "GET", "appendonly"), "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n"},
		{resp("COMMAND", "COUNT"), ":118\r\n"}, // the server's 40, scripting's 5 and 73 of package values (values.Commands less DBSIZE, the server's)
		{resp("COMMAND", "GETKEYS", "RL.CHECK", "user:1", "token", "1", "1"), "*1\r\n$6\r\nuser:1\r\n"},
		{resp("CONFIG", "SET", "save", ""),
			"-ERR CONFIG SET is not supported: rlserver is configured by flags, a YAML file or RLSERVER_* variables\r\n"},
		{resp("QUIT"), "+OK\r\n"},
	})
}

func TestRESP3Nulls(t *testing.T) {
	runScript(t, Config{}, []step{
		{resp("HELLO", "3", "SETNAME", "n"), "%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n7.2.0\r\n" +
			"$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:1\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n" +
			"$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"},
		{resp("CLIENT", "GETNAME"), "$1\r\nn\r\n"},
		{resp("COMMAND", "INFO", "nosuch"), "*1\r\n_\r\n"},
	})
}

func TestPipelining(t *testing.T) {
	check := resp("RL.CHECK", "p", "fixed", "2", "1m")
	runScript(t, Config{}, []step{
		// Three checks in one write: two pass, the third is denied.
		{check + check + check, ints(1, 2, 1, 0, 60000) + ints(1, 2, 0, 0, 60000) + ints(0, 2, 0, 60000, 60000)},
		// Errors in a pipeline do not disturb the commands around them.
		{resp("PING") + resp("RL.CHECK", "x") + resp("ECHO", "ok"),
			"+PONG\r\n-ERR wrong number of arguments for 'rl.check' command; usage: RL.CHECK key algo limit window [COST cost] [BURST burst]\r\n$2\r\nok\r\n"},
		// Inline (telnet) commands work too.
		{"PING\r\nRL.PEEK p fixed 2 1m\r\n", "+PONG\r\n" + ints(1, 2, 0, 0, 60000)},
		// QUIT in the middle of a pipeline answers it and nothing after.
		{resp("PING") + resp("QUIT") + resp("PING"), "+PONG\r\n+OK\r\n"},
	})
}

func TestAuth(t *testing.T) {
	runScript(t, Config{RequirePass: "s3cret", AdminToken: "root"}, []step{
		{resp("PING"), "-NOAUTH Authentication required.\r\n"},
		{resp("RL.CHECK", "k", "token", "1", "1s"), "-NOAUTH Authentication required.\r\n"},
		{resp("HELLO", "3"), "-NOAUTH HELLO must be called with the client already authenticated, otherwise the " +
			"HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select " +
			"the RESP protocol version at the same time\r\n"},
		{resp("AUTH", "wrong"), "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{resp("AUTH", "s3cret"), "+OK\r\n"},
		{resp("RL.CHECK", "k", "token", "1", "1s"), ints(1, 1, 0, 0, 1000)},
		{resp("FLUSHALL"), "-NOPERM this user has no permissions to run the 'flushall' command (AUTH admin <admin-token> first)\r\n"},
		{resp("DBSIZE"), ":1\r\n"},
		{resp("AUTH", "admin", "root"), "+OK\r\n"},
		{resp("FLUSHALL"), "+OK\r\n"},
		{resp("DBSIZE"), ":0\r\n"},
		{resp("RESET"), "+RESET\r\n"},
		{resp("PING"), "-NOAUTH Authentication required.\r\n"},
	})
}

func TestAuthNotConfigured(t *testing.T) {
	runScript(t, Config{}, []step{
		{resp("AUTH", "x"), "-ERR AUTH <password> called without any password configured for the default user. " +
			"Are you sure your configuration is correct?\r\n"},
		{resp("RL.CHECK", "k", "token", "1", "1s"), ints(1, 1, 0, 0, 1000)},
		{resp("FLUSHALL"), "+OK\r\n"},
		{resp("DBSIZE"), ":0\r\n"},
	})
}
