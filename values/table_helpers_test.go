package values_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/memkeys"
	"github.com/rlserver/rlserver/internal/redisfuzz"
	"github.com/rlserver/rlserver/values"
)

// step is one command of a table and the reply it must get, rendered by
// values.Reply.String: +OK, :1, "bulk", (nil), (nil array), -ERR ...,
// ,1.5 for a RESP3 double, [...] for an array, {...} for a RESP3 map.
type step struct {
	cmd  string // arguments separated by spaces; "quoted" Go strings for others
	want string
}

// table is a sequence of steps run in order on one empty keyspace.
type table struct {
	name  string
	resp  int // 2 unless 3
	steps []step
	// own marks a table that only runs on Exec: it needs a clock that
	// moves (advance), limiter state or a refusing keyspace, which a real
	// redis-server cannot give.
	own bool
	// setup prepares the keyspace of an own table.
	setup func(ks *memkeys.Keyspace)
}

// testEpoch is the clock of the tables: 2023-11-14T22:13:20Z.
const testEpoch = int64(1_700_000_000_000) * 1e6

// args splits a step's command into arguments: fields separated by
// spaces, a field starting with a double quote being a Go string literal.
func args(t testing.TB, cmd string) [][]byte {
	var out [][]byte
	for cmd = strings.TrimSpace(cmd); cmd != ""; cmd = strings.TrimSpace(cmd) {
		if cmd[0] != '"' {
			f, rest, _ := strings.Cut(cmd, " ")
			out = append(out, []byte(f))
			cmd = rest
			continue
		}
		lit, err := strconv.QuotedPrefix(cmd)
		if err != nil {
			t.Fatalf("bad quoted argument in %q: %v", cmd, err)
		}
		s, _ := strconv.Unquote(lit)
		out = append(out, []byte(s))
		cmd = cmd[len(lit):]
	}
	return out
}

// runTable runs tb's steps on Exec over a fresh memkeys keyspace at
// testEpoch. A step "advance 1500" moves the clock by 1500 ms.
func runTable(t *testing.T, tb table) {
	t.Helper()
	ks := memkeys.New()
	now := testEpoch
	ks.SetNow(now)
	if tb.setup != nil {
		tb.setup(ks)
	}
	resp := max(tb.resp, 2)
	for i, s := range tb.steps {
		if ms, ok := strings.CutPrefix(s.cmd, "advance "); ok {
			d, _ := strconv.ParseInt(ms, 10, 64)
			now += d * 1e6
			ks.SetNow(now)
			continue
		}
		got := redisfuzz.Wire(resp, values.Exec(ks, now, resp, args(t, s.cmd)))
		if got.String() != s.want {
			t.Errorf("%s step %d: %s\n got  %s\n want %s", tb.name, i, s.cmd, got, s.want)
		}
		if err := ks.Err(); err != nil {
			t.Fatalf("%s step %d: %s broke the keyspace: %v", tb.name, i, s.cmd, err)
		}
	}
}

// runTableOnRedis runs tb's steps on a real redis-server, flushed first,
// and checks that it answers what the table wants: the tables are Redis's
// behaviour, not only ours.
func runTableOnRedis(t *testing.T, addr string, tb table) {
	t.Helper()
	conn, err := redisfuzz.Dial(addr, max(tb.resp, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Do([]byte("FLUSHALL")); err != nil {
		t.Fatal(err)
	}
	for i, s := range tb.steps {
		got, err := conn.Do(args(t, s.cmd)...)
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != s.want {
			t.Errorf("redis-server, %s step %d: %s\n got  %s\n want %s", tb.name, i, s.cmd, got, s.want)
		}
	}
}
