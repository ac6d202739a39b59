package values_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/memkeys"
	"github.com/rlserver/rlserver/internal/redisfuzz"
	"github.com/rlserver/rlserver/internal/redistest"
	"github.com/rlserver/rlserver/internal/testseed"
	"github.com/rlserver/rlserver/values"
)

// fuzzCommands is how many random commands TestDifferential runs per
// protocol; RL_FUZZ_N overrides it, and RL_FUZZ_ONLY (a comma-separated
// list of command names) restricts the commands drawn.
const fuzzCommands = 4000

// TestDifferential runs random command sequences (internal/redisfuzz) on
// Exec over an in-memory keyspace and on a real redis-server, in lock
// step, in RESP2 and RESP3, and fails on the first reply that differs.
// The keyspace's clock is the server's: TIME is read in the same pipeline
// as each command. Replay a failure with its seed (-seed or RL_SEED).
func TestDifferential(t *testing.T) {
	addr := redistest.Start(t)
	n := fuzzCommands
	if s := os.Getenv("RL_FUZZ_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	seed := testseed.Rand(t).Uint64()
	for _, resp := range []int{2, 3} {
		t.Run("RESP"+strconv.Itoa(resp), func(t *testing.T) {
			runDifferential(t, addr, resp, seed, n)
		})
	}
}

func runDifferential(t *testing.T, addr string, resp int, seed uint64, n int) {
	conn, err := redisfuzz.Dial(addr, resp)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if r, err := conn.Do([]byte("FLUSHALL")); err != nil || r.IsError() {
		t.Fatalf("FLUSHALL: %v %v", r, err)
	}
	ks := memkeys.New()
	var now int64
	real := func(args [][]byte) (values.Reply, error) {
		rs, err := conn.Pipeline([][][]byte{{[]byte("TIME")}, args})
		if err != nil {
			return values.Reply{}, err
		}
		now = serverTime(t, rs[0])
		return rs[1], nil
	}
	ours := func(args [][]byte) (values.Reply, error) {
		ks.SetNow(now)
		return redisfuzz.Wire(resp, values.Exec(ks, now, resp, args)), nil
	}
	gen := redisfuzz.New(seed)
	if only := os.Getenv("RL_FUZZ_ONLY"); only != "" {
		gen.Only = strings.Split(strings.ToLower(only), ",")
	}
	var history []string
	for i := range n {
		cmd := gen.Next()
		history = append(history, redisfuzz.Format(cmd))
		diff, err := redisfuzz.Compare(cmd, real, ours)
		if err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
		if diff != "" {
			t.Fatalf("seed %d, RESP%d, command %d differs (a: redis-server, b: values):\n%s\nlast commands:\n  %s\nkey %q: redis-server %s\n  values %s",
				seed, resp, i, diff, strings.Join(history[max(0, len(history)-25):], "\n  "),
				cmd[1], dump(real, cmd[1]), dump(ours, cmd[1]))
		}
		if err := ks.Err(); err != nil {
			t.Fatalf("seed %d, command %d %s broke the keyspace: %v", seed, i, history[i], err)
		}
	}
}

// serverTime reads a TIME reply as ns since the epoch.
func serverTime(t *testing.T, r values.Reply) int64 {
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

// dump describes what key holds, for a failure message.
func dump(do redisfuzz.Doer, key []byte) string {
	typ, _ := do([][]byte{[]byte("TYPE"), key})
	var r values.Reply
	switch string(typ.Str) {
	case "string":
		r, _ = do([][]byte{[]byte("GET"), key})
	case "list":
		r, _ = do([][]byte{[]byte("LRANGE"), key, []byte("0"), []byte("-1")})
	case "hash":
		r, _ = do([][]byte{[]byte("HGETALL"), key})
	case "zset":
		r, _ = do([][]byte{[]byte("ZRANGE"), key, []byte("0"), []byte("-1"), []byte("WITHSCORES")})
	}
	enc, _ := do([][]byte{[]byte("OBJECT"), []byte("ENCODING"), key})
	return fmt.Sprintf("%v %v %v", typ, enc, r)
}

// TestExpiryBoundaryMatchesRedis watches a key expire on a real
// redis-server, reading TIME and EXISTS together over and over, and checks
// Exec's view at each TIME: a key whose expiry is ms W is there during W
// and gone after it. (EXISTS runs a few µs after TIME: only when that
// crosses into W+1 may the two disagree, at the boundary.)
func TestExpiryBoundaryMatchesRedis(t *testing.T) {
	conn, err := redisfuzz.Dial(redistest.Start(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	key := []byte("k")
	good := 0 // rounds that saw the key during W and gone after it
	for round := 0; round < 20 && good < 2; round++ {
		rs, err := conn.Pipeline([][][]byte{{[]byte("TIME")}})
		if err != nil {
			t.Fatal(err)
		}
		w := serverTime(t, rs[0])/1e6 + 20 // expiry ms, 20 ms ahead
		when := []byte(strconv.FormatInt(w, 10))
		ks := memkeys.New()
		ks.SetNow(serverTime(t, rs[0]))
		for _, cmd := range [][][]byte{{[]byte("SET"), key, []byte("v")}, {[]byte("PEXPIREAT"), key, when}} {
			if _, err := conn.Do(cmd...); err != nil {
				t.Fatal(err)
			}
			values.Exec(ks, ks.Now(), 2, cmd)
		}
		during, after := false, false
		for {
			rs, err := conn.Pipeline([][][]byte{{[]byte("TIME")}, {[]byte("EXISTS"), key}})
			if err != nil {
				t.Fatal(err)
			}
			now := serverTime(t, rs[0])
			ks.SetNow(now)
			ours := values.Exec(ks, now, 2, [][]byte{[]byte("EXISTS"), key}).Int
			ms := now / 1e6
			switch {
			case ours == rs[1].Int:
				during = during || (ms == w && ours == 1)
				after = after || (ms > w && ours == 0)
			case ms == w && ours == 1 && rs[1].Int == 0: // EXISTS ran in W+1
			default:
				t.Fatalf("round %d, ms W%+d: EXISTS %d, redis-server %d", round, ms-w, ours, rs[1].Int)
			}
			if ms > w+2 {
				break
			}
		}
		if during && after {
			good++
		}
	}
	if good < 2 {
		t.Errorf("in 20 rounds, only %d watched the key during its expiry's ms and gone after", good)
	}
}
