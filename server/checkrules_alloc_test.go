//go:build !race

// The race detector makes sync.Pool drop items at random, so allocation
// counts are measured without it.

package server

import (
	"strings"
	"testing"

	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/shards"
)

// checkRulesConn returns a server on a store of three rules (c, in shadow
// mode, of algo and limit per second), a connection of it, and an
// RL.CHECKRULES that matches all three.
func checkRulesConn(tb testing.TB, algo string, limit int64) (*Server, *conn, [][]byte) {
	tb.Helper()
	store := shards.New(0)
	for _, r := range []rules.Rule{
		{ID: "a", Target: "/api/*", Tier: "*", KeyType: "user", Algo: "sliding", Limit: 1 << 40, Window: "1m"},
		{ID: "b", Target: "*", Tier: "free", KeyType: "ip", Algo: "gcra", Limit: 1000, Window: "1m"},
		{ID: "c", Target: "/api/x", Tier: "*", KeyType: "ip", Algo: algo, Limit: limit, Window: "1s", Shadow: true},
	} {
		if _, err := store.SetRule(r); err != nil {
			tb.Fatal(err)
		}
	}
	s := New(Config{Limiter: store})
	var argv [][]byte
	for _, a := range strings.Fields("RL.CHECKRULES /api/x free user=u1 ip=1.2.3.4 COST 1") {
		argv = append(argv, []byte(a))
	}
	return s, &conn{s: s, proto: 2, authed: true}, argv
}

// TestDispatchCheckRulesDoesNotAllocate: parsing, matching, the multi-key
// check on live keys and the reply allocate nothing per RL.CHECKRULES.
func TestDispatchCheckRulesDoesNotAllocate(t *testing.T) {
	s, c, argv := checkRulesConn(t, "log", 10000)
	now := int64(1_700_000_000e9)
	for i := 0; i < 2000; i++ { // create the keys; grow the log to its steady size
		now += 1e6
		c.out = c.out[:0]
		s.dispatch(c, argv, now)
	}
	if allocs := dispatchAllocs(s, c, argv, &now); allocs != 0 {
		t.Errorf("%.1f allocs per RL.CHECKRULES, want 0", allocs)
	}
	if !strings.HasPrefix(string(c.out), "*6\r\n") {
		t.Errorf("reply %q", c.out)
	}
}

// BenchmarkDispatchCheckRules: one RL.CHECKRULES matching three rules
// (one in shadow mode) on live keys, from parsed arguments to the
// buffered reply, metrics counted (the per-rule counts included).
func BenchmarkDispatchCheckRules(b *testing.B) {
	s, c, argv := checkRulesConn(b, "fixed", 10)
	now := int64(1_700_000_000e9)
	b.ReportAllocs()
	for b.Loop() {
		now += 1e6
		c.out = c.out[:0]
		s.dispatch(c, argv, now)
	}
}

// TestDispatchBlockedCheckRulesDoesNotAllocate: with blocks held, the
// RL.CHECKRULES of an identifier that is not blocked and the reply to one
// that is allocate nothing either.
func TestDispatchBlockedCheckRulesDoesNotAllocate(t *testing.T) {
	store := shards.New(0)
	store.SetRule(rules.Rule{ID: "a", Target: "*", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 1 << 40, Window: "1m",
		Block: &rules.BlockSpec{After: 3, Within: "1m", For: "1h"}})
	now := int64(1_700_000_000e9)
	store.SetBlock(rules.Block{Identifier: "ip=6.6.6.6", Until: now + 3600e9}, now)
	s := New(Config{Limiter: store})
	c := &conn{s: s, proto: 2, authed: true}
	for ip, want := range map[string]string{"1.2.3.4": "$1\r\na\r\n", "6.6.6.6": "$16\r\nblock:ip=6.6.6.6\r\n"} {
		argv := [][]byte{[]byte("RL.CHECKRULES"), []byte("/x"), []byte("free"), []byte("ip=" + ip)}
		for i := 0; i < 100; i++ {
			c.out = c.out[:0]
			s.dispatch(c, argv, now)
		}
		if allocs := dispatchAllocs(s, c, argv, &now); allocs != 0 {
			t.Errorf("ip=%s: %.1f allocs per RL.CHECKRULES, want 0", ip, allocs)
		}
		if !strings.HasSuffix(string(c.out), want) {
			t.Errorf("ip=%s: reply %q, want it to end in %q", ip, c.out, want)
		}
	}
}

// dispatchAllocs returns the allocations of one dispatch of argv on c, a
// millisecond after the one before (*now advances).
func dispatchAllocs(s *Server, c *conn, argv [][]byte, now *int64) float64 {
	return testing.AllocsPerRun(1000, func() {
		*now += 1e6
		c.out = c.out[:0]
		s.dispatch(c, argv, *now)
	})
}
