package redisfuzz

import (
	"math"
	"slices"
	"testing"

	"github.com/rlserver/rlserver/values"
)

func TestGenIsDeterministic(t *testing.T) {
	a, b, c := New(7), New(7), New(8)
	differs := false
	for range 1000 {
		x, y, z := a.Next(), b.Next(), c.Next()
		if Format(x) != Format(y) {
			t.Fatalf("same seed, different commands: %s and %s", Format(x), Format(y))
		}
		differs = differs || Format(x) != Format(z)
	}
	if !differs {
		t.Error("seeds 7 and 8 gave the same commands")
	}
}

func TestGenOnly(t *testing.T) {
	g := New(1)
	g.Only = []string{"zadd", "zcard"}
	for range 200 {
		name := string(g.Next()[0])
		if !slices.ContainsFunc(g.Only, func(o string) bool { return equalFold(o, name) }) {
			t.Fatalf("generated %s", name)
		}
	}
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i]|0x20 != b[i]|0x20 {
			return false
		}
	}
	return true
}

func TestEqual(t *testing.T) {
	bulk := func(s ...string) values.Reply {
		var e []values.Reply
		for _, x := range s {
			e = append(e, values.BulkString(x))
		}
		return values.ArrayReply(e...)
	}
	cmd := func(s string) [][]byte { return [][]byte{[]byte(s), []byte("k")} }
	for _, tc := range []struct {
		cmd  string
		a, b values.Reply
		want bool
	}{
		{"PTTL", values.IntReply(1000), values.IntReply(1000 - TTLSlack), true},
		{"PTTL", values.IntReply(1000), values.IntReply(1000 - TTLSlack - 1), false},
		{"PTTL", values.IntReply(-1), values.IntReply(-2), false},
		{"TTL", values.IntReply(10), values.IntReply(9), true},
		{"GET", values.IntReply(10), values.IntReply(9), false},
		{"KEYS", bulk("a", "b"), bulk("b", "a"), true},
		{"LRANGE", bulk("a", "b"), bulk("b", "a"), false},
		{"HGETALL", bulk("f", "1", "g", "2"), bulk("g", "2", "f", "1"), true},
		{"HGETALL", bulk("f", "1", "g", "2"), bulk("g", "1", "f", "2"), false},
		{"GET", values.BulkString("OK"), values.StatusReply("OK"), false},
		{"GET", values.NilReply(), values.NilArrayReply(), false},
		{"ZSCORE", values.Reply{Kind: values.Double, Float: 0}, values.Reply{Kind: values.Double, Float: math.Copysign(0, -1)}, false},
	} {
		if got := Equal(cmd(tc.cmd), tc.a, tc.b); got != tc.want {
			t.Errorf("Equal(%s, %v, %v) = %v", tc.cmd, tc.a, tc.b, got)
		}
	}
	if Wire(3, values.NilArrayReply()).Kind != values.Nil || Wire(2, values.NilArrayReply()).Kind != values.NilArray {
		t.Error("Wire does not fold RESP3's nulls (only)")
	}
}
