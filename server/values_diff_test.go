package server_test

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rlserver/rlserver/internal/redisfuzz"
	"github.com/rlserver/rlserver/internal/redistest"
	"github.com/rlserver/rlserver/internal/testseed"
	"github.com/rlserver/rlserver/internal/testserver"
	"github.com/rlserver/rlserver/values"
)

// TestValuesMatchRedis sends the same random commands on Redis values
// (internal/redisfuzz: strings, lists, hashes, sorted sets, expiries, bad
// arguments, wrong types) to a real rlserver over TCP and to a real
// redis-server, in lock step, in RESP2 and RESP3, and fails on the first
// reply that differs. rlserver's clock is the redis-server's (its TIME,
// read in the same pipeline as each command), so that expiries are
// compared honestly. Replay a failure with its seed (-seed or RL_SEED);
// RL_FUZZ_N sets the commands per protocol.
func TestValuesMatchRedis(t *testing.T) {
	ref := redistest.Start(t)
	var now atomic.Int64
	node := testserver.Start(t, testserver.Options{Clock: now.Load})
	n := 3000
	if s := os.Getenv("RL_FUZZ_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	seed := testseed.Rand(t).Uint64()
	for _, resp := range []int{2, 3} {
		t.Run("RESP"+strconv.Itoa(resp), func(t *testing.T) {
			a, err := redisfuzz.Dial(ref, resp)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := redisfuzz.Dial(node.Addr, resp)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			for _, c := range []*redisfuzz.Conn{a, b} {
				if r, err := c.Do([]byte("FLUSHALL")); err != nil || r.Kind == values.Error {
					t.Fatalf("FLUSHALL: %v %v", r, err)
				}
			}
			real := func(args [][]byte) (values.Reply, error) {
				rs, err := a.Pipeline([][][]byte{{[]byte("TIME")}, args})
				if err != nil {
					return values.Reply{}, err
				}
				now.Store(timeOf(t, rs[0]))
				return rs[1], nil
			}
			ours := func(args [][]byte) (values.Reply, error) { return b.Do(args...) }
			gen := redisfuzz.New(seed)
			var history []string
			for i := range n {
				cmd := gen.Next()
				history = append(history, redisfuzz.Format(cmd))
				diff, err := redisfuzz.Compare(cmd, real, ours)
				if err != nil {
					t.Fatalf("command %d: %v", i, err)
				}
				if diff != "" {
					t.Fatalf("seed %d, RESP%d, command %d differs (a: redis-server, b: rlserver):\n%s\nlast commands:\n  %s",
						seed, resp, i, diff, strings.Join(history[max(0, len(history)-20):], "\n  "))
				}
			}
		})
	}
}

// timeOf returns TIME's reply in ns since the epoch.
func timeOf(t *testing.T, r values.Reply) int64 {
	t.Helper()
	if r.Kind != values.Array || len(r.Elems) != 2 {
		t.Fatalf("TIME replied %v", r)
	}
	s, err1 := strconv.ParseInt(string(r.Elems[0].Str), 10, 64)
	us, err2 := strconv.ParseInt(string(r.Elems[1].Str), 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("TIME replied %v", r)
	}
	return s*1e9 + us*1e3
}
