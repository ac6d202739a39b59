package shards_test

import (
	"strconv"
	"testing"

	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/shards"
)

// BenchmarkCheckRulesBlocks measures a rules check with no block held (the
// usual case: one atomic load), with blocks held on other identifiers (a
// map look-up per identifier), and of a blocked identifier (no rule is
// evaluated).
func BenchmarkCheckRulesBlocks(b *testing.B) {
	for _, tc := range []struct {
		name   string
		blocks int
		user   string
	}{{"none", 0, "u1"}, {"others", 1000, "u1"}, {"blocked", 1000, "u0"}} {
		b.Run(tc.name, func(b *testing.B) {
			s := shards.New(16)
			s.SetRule(rule("a", "fixed", 1<<40, false))
			for i := 0; i < tc.blocks; i++ {
				s.SetBlock(rules.Block{Identifier: "user=x" + strconv.Itoa(i), Until: now0 + 3600e9}, now0)
			}
			s.SetBlock(rules.Block{Identifier: "user=u0", Until: now0 + 3600e9}, now0)
			if tc.blocks == 0 {
				s.Unblock("user=u0", now0)
			}
			q := query(tc.user, 1)
			s.CheckRules(q, now0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.CheckRules(q, now0)
			}
			if q.Blocked != (tc.name == "blocked") {
				b.Fatalf("Blocked = %v", q.Blocked)
			}
		})
	}
}
