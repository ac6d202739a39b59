package values_test

import (
	"testing"

	"github.com/rlserver/rlserver/internal/memkeys"
	"github.com/rlserver/rlserver/internal/redisfuzz"
	"github.com/rlserver/rlserver/internal/redistest"
	"github.com/rlserver/rlserver/internal/testseed"
	"github.com/rlserver/rlserver/values"
)

// TestKeysPatternsMatchRedis matches keys against glob patterns, fixed
// and random, with KEYS on Exec and on a real redis-server.
func TestKeysPatternsMatchRedis(t *testing.T) {
	conn, err := redisfuzz.Dial(redistest.Start(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	keys := []string{"a", "abc", "abbbc", "b", "-", "]", "[x]", "*", `\`, "a\\b", "user:1", "ab]", "x^y", "{t}c"}
	patterns := []string{"*", "a*", "a*c", "a**c", "?", "a?c", "[abc]", "[^abc]", "[a-c]*", "[c-a]*",
		"[a-]", `[\]]`, `\*`, `a\`, "[abc", "[", "[^", "*[", "[]]", "[]", "[^]", `[\`, "[a-", "**b*", "\\\\*"}
	rnd := testseed.Rand(t)
	const chars = "ab]c[^-*?\\x"
	for range 300 {
		p := make([]byte, 1+rnd.IntN(6))
		for i := range p {
			p[i] = chars[rnd.IntN(len(chars))]
		}
		patterns = append(patterns, string(p))
	}
	ks := memkeys.New()
	for _, k := range keys {
		ks.Put([]byte(k), values.NewString([]byte("v")), 0)
		if _, err := conn.Do([]byte("SET"), []byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range patterns {
		cmd := [][]byte{[]byte("KEYS"), []byte(p)}
		want, err := conn.Do(cmd...)
		if err != nil {
			t.Fatal(err)
		}
		got := values.Exec(ks, 0, 2, cmd)
		if !redisfuzz.Equal(cmd, got, want) {
			t.Errorf("KEYS %q: got %v, redis-server %v", p, got, want)
		}
	}
}
