//go:build !race

// The race detector makes sync.Pool drop items at random, so allocation
// counts are measured without it.

package shards_test

import (
	"testing"

	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/shards"
)

func TestCheckRulesDoesNotAllocate(t *testing.T) {
	s := shards.New(16)
	s.SetRule(rule("a", "fixed", 1<<40, false))
	s.SetRule(rule("b", "gcra", 1<<20, false))
	s.SetRule(rule("c", "log", 1000, true))
	q := query("u1", 1)
	s.CheckRules(q, now0)
	n := testing.AllocsPerRun(1000, func() { s.CheckRules(q, now0) })
	if n != 0 {
		t.Fatalf("CheckRules allocates %v times per call", n)
	}
}

// With blocks held, a check of an identifier that is not blocked, and one
// of an identifier that is, allocate nothing either.
func TestCheckRulesWithBlocksDoesNotAllocate(t *testing.T) {
	s := shards.New(16)
	s.SetRule(rule("a", "fixed", 1<<40, false))
	for _, id := range []string{"user=u9", "ip=1.2.3.4"} {
		s.SetBlock(rules.Block{Identifier: id, Until: now0 + 60e9}, now0)
	}
	for _, user := range []string{"u1", "u9"} {
		q := query(user, 1)
		s.CheckRules(q, now0)
		if q.Blocked != (user == "u9") {
			t.Fatalf("user %s: Blocked = %v", user, q.Blocked)
		}
		n := testing.AllocsPerRun(1000, func() { s.CheckRules(q, now0) })
		if n != 0 {
			t.Fatalf("CheckRules of user %s allocates %v times per call", user, n)
		}
	}
}
