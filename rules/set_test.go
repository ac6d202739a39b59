package rules

import (
	"testing"

	"github.com/rlserver/rlserver/engine"
)

func mustCompile(t testing.TB, id, target, tier, keyType string, shadow bool) *Compiled {
	t.Helper()
	c, err := Compile(Rule{ID: id, Target: target, Tier: tier, KeyType: keyType, Algo: "fixed",
		Limit: 10, Window: "1m", Shadow: shadow}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSetIsCopyOnWrite(t *testing.T) {
	var empty *Set
	a := mustCompile(t, "a", "*", "*", "ip", false)
	s1, added := empty.With(a)
	if !added || s1.Len() != 1 || empty.Len() != 0 {
		t.Fatal("With on the empty set")
	}
	a2 := mustCompile(t, "a", "/x", "*", "ip", false)
	s2, added := s1.With(a2)
	if added || s2.Get("a") != a2 || s1.Get("a") != a {
		t.Fatal("replacing changed the old set or did not replace")
	}
	s3, ok := s2.Without("a")
	if !ok || s3.Len() != 0 || s2.Len() != 1 {
		t.Fatal("Without")
	}
	if _, ok := s3.Without("a"); ok {
		t.Fatal("Without of an absent id reported true")
	}
	s4 := NewSet(mustCompile(t, "c", "*", "*", "ip", false), mustCompile(t, "b", "*", "*", "ip", false))
	if all := s4.All(); all[0].Rule.ID != "b" || all[1].Rule.ID != "c" {
		t.Fatal("NewSet does not sort by id")
	}
}

func TestMatchBuildsCounterKeys(t *testing.T) {
	s := NewSet(
		mustCompile(t, "users", "/users/*", "free", "user", false),
		mustCompile(t, "ip", "*", "*", "ip", false),
		mustCompile(t, "pro", "/users/*", "pro", "user", false),
		mustCompile(t, "keys", "*", "*", "apikey", false),
		mustCompile(t, "login", "/login", "*", "ip", false),
	)
	var q Query
	q.Reset()
	q.Target, q.Tier = []byte("/users/7"), []byte("free")
	q.AddID([]byte("user"), []byte("u1"))
	q.AddID([]byte("ip"), []byte("1.2.3.4"))
	if q.AddID([]byte("ip"), []byte("5.6.7.8")) {
		t.Fatal("AddID accepted a second ip")
	}
	s.Match(&q)
	var got []string
	for _, e := range q.Evals {
		got = append(got, string(e.Key))
	}
	if len(got) != 2 || got[0] != "ip:1.2.3.4" || got[1] != "users:u1" {
		t.Fatalf("got keys %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { s.Match(&q) }); n != 0 {
		t.Fatalf("Match allocates %v times", n)
	}
}

func TestBest(t *testing.T) {
	ev := func(id string, shadow, allowed bool, remaining, retry, reset int64) Eval {
		c := &Compiled{Rule: Rule{ID: id, Shadow: shadow}}
		return Eval{Rule: c, Result: engine.Result{Allowed: allowed, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}}
	}
	tests := []struct {
		name  string
		evals []Eval
		want  int
	}{
		{"none", nil, -1},
		{"fewest remaining", []Eval{ev("a", false, true, 5, 0, 9), ev("b", false, true, 2, 0, 1)}, 1},
		{"denied beats allowed", []Eval{ev("a", false, true, 0, 0, 9), ev("b", false, false, 0, 5, 5)}, 1},
		{"longest retry", []Eval{ev("a", false, false, 0, 9, 9), ev("b", false, false, 0, 5, 50)}, 0},
		{"never is longest", []Eval{ev("a", false, false, 0, 1e12, 9), ev("b", false, false, 3, -1, 1)}, 1},
		{"tie on remaining: longer reset", []Eval{ev("a", false, true, 2, 0, 1), ev("b", false, true, 2, 0, 7)}, 1},
		{"full tie: smaller id", []Eval{ev("a", false, true, 2, 0, 1), ev("b", false, true, 2, 0, 1)}, 0},
		{"shadow ignored beside enforcing", []Eval{ev("a", true, false, 0, 99, 99), ev("b", false, true, 8, 0, 1)}, 1},
		{"only shadow", []Eval{ev("a", true, true, 4, 0, 1), ev("b", true, false, 0, 3, 3)}, 1},
	}
	for _, tt := range tests {
		if got := Best(tt.evals); got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestReplyOfShadowAndNoMatch(t *testing.T) {
	var q Query
	q.Reset()
	r, c := q.Reply()
	if !r.Allowed || r.Limit != -1 || r.Remaining != -1 || c != nil {
		t.Fatalf("no match: %+v %v", r, c)
	}
	sh := &Compiled{Rule: Rule{ID: "s", Shadow: true}}
	q.Evals = []Eval{{Rule: sh, Result: engine.Result{Allowed: false, Limit: 3, RetryAfter: 5e9, ResetAfter: 5e9}}}
	q.Best, q.Allowed = 0, true
	r, c = q.Reply()
	if !r.Allowed || r.RetryAfter != 0 || r.Limit != 3 || c != sh {
		t.Fatalf("shadow: %+v", r)
	}
}
