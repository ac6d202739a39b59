//go:build !race

// The race detector makes sync.Pool drop items at random, so allocation
// counts are measured without it.

package shards_test

import (
	"testing"

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
