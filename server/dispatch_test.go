package server

import (
	"testing"

	"github.com/rlserver/rlserver/shards"
)

// benchConn returns a server and an authenticated connection that is not
// attached to a socket, for measuring dispatch alone.
func benchConn() (*Server, *conn) {
	s := New(Config{Limiter: shards.New(0)})
	return s, &conn{s: s, proto: 2, authed: true}
}

// TestDispatchCheckDoesNotAllocate: command lookup, argument parsing, the
// shard and algorithm, and the reply allocate nothing per RL.CHECK or
// CL.THROTTLE on a live key.
func TestDispatchCheckDoesNotAllocate(t *testing.T) {
	s, c := benchConn()
	for _, args := range [][]string{
		{"RL.CHECK", "user:1", "token", "100", "60"},
		{"rl.check", "user:2", "LOG", "100", "1m", "COST", "1"},
		{"RL.CHECK", "user:3", "gcra", "100", "60", "BURST", "10"},
		{"CL.THROTTLE", "user:4", "15", "30", "60", "1"},
		{"RL.PEEK", "user:1", "token", "100", "60"},
	} {
		argv := make([][]byte, len(args))
		for i, a := range args {
			argv[i] = []byte(a)
		}
		now := t0
		s.dispatch(c, argv, now) // create the key
		allocs := testing.AllocsPerRun(1000, func() {
			now += 1e6
			c.out = c.out[:0]
			s.dispatch(c, argv, now)
		})
		if allocs != 0 {
			t.Errorf("%v: %.1f allocs per command, want 0", args, allocs)
		}
		if len(c.out) == 0 || c.out[0] != '*' {
			t.Errorf("%v: reply %q, want an array", args, c.out)
		}
	}
}

// BenchmarkDispatchCheck measures one RL.CHECK from parsed arguments to
// the encoded reply, on 10,000 keys.
func BenchmarkDispatchCheck(b *testing.B) {
	s, c := benchConn()
	benchDispatchCheck(b, s, c)
}

// benchDispatchCheck runs b.N RL.CHECKs on c of s, over 10,000 keys.
func benchDispatchCheck(b *testing.B, s *Server, c *conn) {
	argv := [][]byte{[]byte("RL.CHECK"), []byte("user:00000"), []byte("token"), []byte("100"), []byte("60")}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		k := argv[1]
		n := i % 10000
		for j := len(k) - 1; j >= 5; j-- {
			k[j] = byte('0' + n%10)
			n /= 10
		}
		c.out = c.out[:0]
		s.dispatch(c, argv, t0+int64(i))
	}
}

// TestConnCommandIsLookup: a connection's remembered command is the one
// Server.lookup finds, whatever names came before: same length, another
// case, unknown, longer than what it remembers.
func TestConnCommandIsLookup(t *testing.T) {
	s, c := benchConn()
	names := []string{"GET", "GET", "SET", "get", "DEL", "nosuchcmd", "GET", "RL.CHECK", "rl.check",
		"CLIENT", "a-command-name-longer-than-sixteen", "SET", "EVALSHA", "EVAL", "evalsha"}
	for i, n := range names {
		if got, want := c.command([]byte(n)), s.lookup([]byte(n)); got != want {
			t.Fatalf("name %d (%q): %v, want %v", i, n, got, want)
		}
	}
}
