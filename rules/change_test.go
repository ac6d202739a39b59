package rules

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/testseed"
)

// TestSetApplyMatchesOneByOne: a random Change applied with Set.Apply
// gives the Set that applying its rules one by one (With, Without) gives,
// with the counts of what it did, and leaves the old Set as it was.
func TestSetApplyMatchesOneByOne(t *testing.T) {
	rng := testseed.Rand(t)
	for round := 0; round < 200; round++ {
		var s *Set
		for i := 0; i < rng.IntN(20); i++ {
			s, _ = s.With(mustCompile(t, fmt.Sprintf("r%d", rng.IntN(30)), "*", "*", "ip", false))
		}
		before := s.All()
		var set []*Compiled
		var del []string
		used := map[string]bool{}
		for i := 0; i < rng.IntN(25); i++ {
			id := fmt.Sprintf("r%d", rng.IntN(30))
			if used[id] {
				continue
			}
			used[id] = true
			if rng.IntN(3) == 0 {
				del = append(del, id)
			} else {
				set = append(set, mustCompile(t, id, fmt.Sprintf("/p%d", round), "*", "ip", false))
			}
		}
		want, wantRes := s, ChangeResult{}
		for _, c := range set {
			var added bool
			if want, added = want.With(c); added {
				wantRes.Added++
			} else {
				wantRes.Replaced++
			}
		}
		for _, id := range del {
			var ok bool
			if want, ok = want.Without(id); ok {
				wantRes.Deleted++
			}
		}
		got, res := s.Apply(set, del)
		if res != wantRes {
			t.Fatalf("round %d: result %+v, want %+v", round, res, wantRes)
		}
		if g, w := ids(got), ids(want); g != w {
			t.Fatalf("round %d: rules %s, want %s", round, g, w)
		}
		for _, c := range got.All() {
			if want.Get(c.Rule.ID) != c {
				t.Fatalf("round %d: rule %s is not the one set", round, c.Rule.ID)
			}
		}
		if len(s.All()) != len(before) {
			t.Fatalf("round %d: Apply changed the old set", round)
		}
	}
}

func ids(s *Set) string {
	out := ""
	for _, c := range s.All() {
		out += c.Rule.ID + ","
	}
	return out
}

// TestChangeCompile: a Change is refused, naming the rule, when a rule is
// invalid, an id is set twice, or set and deleted.
func TestChangeCompile(t *testing.T) {
	ok := Rule{ID: "a", Target: "*", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 5, Window: "1m"}
	bad := ok
	bad.ID, bad.Limit = "b", -1
	other := ok
	other.ID = "c"
	tests := []struct {
		name string
		ch   Change
		want error
		text string
	}{
		{"valid", Change{Set: []Rule{ok, other}, Delete: []string{"x"}}, nil, ""},
		{"invalid rule", Change{Set: []Rule{ok, bad}}, ErrLimit, `rule 2 of the change: invalid rule "b"`},
		{"set twice", Change{Set: []Rule{ok, ok}}, ErrExists, `"a": the change sets it twice`},
		{"set and deleted", Change{Set: []Rule{ok}, Delete: []string{"a"}}, ErrTwice, "both sets and deletes"},
	}
	for _, tt := range tests {
		cs, err := tt.ch.Compile()
		switch {
		case tt.want == nil && (err != nil || len(cs) != len(tt.ch.Set)):
			t.Errorf("%s: %d compiled, %v", tt.name, len(cs), err)
		case tt.want != nil && (!errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.text)):
			t.Errorf("%s: %v, want %v containing %q", tt.name, err, tt.want, tt.text)
		}
	}
}
