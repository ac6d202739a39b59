package server

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/shards"
)

// hotRow is one parsed RL.HOTKEYS row.
type hotRow struct {
	key            string
	checks, denied int64
}

// hotKeys runs RL.HOTKEYS with args through go-redis and parses its rows.
func hotKeys(t *testing.T, c *redis.Client, args ...any) []hotRow {
	t.Helper()
	v, err := c.Do(context.Background(), append([]any{"RL.HOTKEYS"}, args...)...).Result()
	if err != nil {
		t.Fatalf("RL.HOTKEYS %v: %v", args, err)
	}
	var out []hotRow
	for _, r := range v.([]any) {
		row := r.([]any)
		if len(row) != 3 {
			t.Fatalf("row %#v: want [key, checks, denied]", row)
		}
		out = append(out, hotRow{row[0].(string), row[1].(int64), row[2].(int64)})
	}
	return out
}

// loadHotKeys makes one key take 3,000 checks (limit 1,000: 2,000 are
// denied) and fifty others 20 each, pipelined through go-redis.
func loadHotKeys(t *testing.T, c *redis.Client) {
	t.Helper()
	ctx := context.Background()
	for round := 0; round < 30; round++ {
		p := c.Pipeline()
		for i := 0; i < 100; i++ {
			p.Do(ctx, "RL.CHECK", "hot", "fixed", 1000, 60)
		}
		for k := round; k < 50; k += 30 { // keys round and round+30: 20 checks each over the run
			for i := 0; i < 20; i++ {
				p.Do(ctx, "RL.CHECK", fmt.Sprintf("cold:%d", k), "fixed", 1000, 60)
			}
		}
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHotKeysOverTCP: over a real TCP server, with go-redis in both
// protocols, the hot key comes first, counted within 10%, then cold keys;
// the default is ten rows; once the fake clock passes the window, nothing.
func TestHotKeysOverTCP(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			var now atomic.Int64
			now.Store(t0)
			_, addr := startServer(t, Config{Clock: now.Load})
			c := newClient(t, addr, proto)
			loadHotKeys(t, c)
			got := hotKeys(t, c, "COUNT", 3)
			if len(got) != 3 || got[0].key != "hot" {
				t.Fatalf("RL.HOTKEYS COUNT 3 = %v, want hot first of 3 rows", got)
			}
			if got[0].checks < 2700 || got[0].checks > 3300 || got[0].denied < 1800 || got[0].denied > 2200 {
				t.Errorf("hot row %v: want about 3000 checks, 2000 denied", got[0])
			}
			for _, r := range got[1:] {
				if !strings.HasPrefix(r.key, "cold:") || r.checks < 1 || r.checks > 22 || r.denied != 0 {
					t.Errorf("row %v: want a cold key with at most 20 checks", r)
				}
			}
			if got := hotKeys(t, c); len(got) != 10 {
				t.Errorf("RL.HOTKEYS = %d rows, want the default 10", len(got))
			}
			if got := hotKeys(t, c, "count", 1000000); len(got) != 51 {
				t.Errorf("RL.HOTKEYS count 1000000 = %d rows, want all 51", len(got))
			}
			now.Add(shards.HotWindowNs + 1e9)
			if got := hotKeys(t, c); len(got) != 0 {
				t.Errorf("a window later: %v, want no rows", got)
			}
		})
	}
}

// TestHotKeysBadInput: bad arguments get an error and change nothing.
func TestHotKeysBadInput(t *testing.T) {
	_, addr := startServer(t, Config{Clock: fakeClock()})
	cases := []struct{ req, want string }{
		{resp("RL.HOTKEYS", "COUNT"), "-ERR syntax error; usage: RL.HOTKEYS [COUNT count]\r\n"},
		{resp("RL.HOTKEYS", "COUNT", "0"), "-ERR COUNT must be a positive integer\r\n"},
		{resp("RL.HOTKEYS", "COUNT", "-3"), "-ERR COUNT must be a positive integer\r\n"},
		{resp("RL.HOTKEYS", "COUNT", "x"), "-ERR COUNT must be a positive integer\r\n"},
		{resp("RL.HOTKEYS", "COUNT", "99999999999999999999"), "-ERR COUNT must be a positive integer\r\n"},
		{resp("RL.HOTKEYS", "TOP", "3"), "-ERR syntax error; usage: RL.HOTKEYS [COUNT count]\r\n"},
		{resp("RL.HOTKEYS", "COUNT", "3", "COUNT", "4"), "-ERR syntax error; usage: RL.HOTKEYS [COUNT count]\r\n"},
		{resp("RL.CHECK", "k", "fixed", "5", "60"), "*5\r\n:1\r\n:5\r\n:4\r\n:0\r\n:60000\r\n"},
		{resp("RL.HOTKEYS", "COUNT", "5"), "*1\r\n*3\r\n$1\r\nk\r\n:1\r\n:0\r\n"},
	}
	for _, tc := range cases {
		if got := exchange(t, addr, tc.req)[0]; got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
	}
}

// TestHotKeysCommandDocs: COMMAND INFO and DOCS describe RL.HOTKEYS.
func TestHotKeysCommandDocs(t *testing.T) {
	_, addr := startServer(t, Config{})
	info := exchange(t, addr, resp("COMMAND", "INFO", "rl.hotkeys"))[0]
	if !strings.HasPrefix(info, "*1\r\n*10\r\n$10\r\nrl.hotkeys\r\n:-1\r\n") {
		t.Errorf("COMMAND INFO rl.hotkeys = %q", info)
	}
	docs := exchange(t, addr, resp("COMMAND", "DOCS", "rl.hotkeys"))[0]
	for _, want := range []string{"$7\r\nsummary\r\n", "$5\r\nCOUNT\r\n", "$5\r\ngroup\r\n$6\r\nmodule\r\n"} {
		if !strings.Contains(docs, want) {
			t.Errorf("COMMAND DOCS rl.hotkeys = %q, want %q in it", docs, want)
		}
	}
}

// TestHotKeysWithoutSource: a Limiter that keeps no hot keys answers an
// error.
func TestHotKeysWithoutSource(t *testing.T) {
	_, addr := startServer(t, Config{Limiter: struct{ Limiter }{shards.New(4)}})
	if got := exchange(t, addr, resp("RL.HOTKEYS"))[0]; got != "-ERR this server keeps no hot keys\r\n" {
		t.Errorf("got %q", got)
	}
}
