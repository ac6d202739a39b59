package values_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/redisfuzz"
	"github.com/rlserver/rlserver/internal/redistest"
	"github.com/rlserver/rlserver/values"
)

// TestCommandsMatchRedis compares each command's COMMAND INFO and COMMAND
// DOCS fields with a real redis-server's.
func TestCommandsMatchRedis(t *testing.T) {
	conn, err := redisfuzz.Dial(redistest.Start(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	flagNames := map[string]values.Flags{"write": values.Write, "readonly": values.ReadOnly,
		"denyoom": values.DenyOOM, "fast": values.Fast, "noscript": values.NoScript}
	for _, c := range values.Commands() {
		info, err := conn.Do([]byte("COMMAND"), []byte("INFO"), []byte(c.Name))
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Elems) != 1 || len(info.Elems[0].Elems) < 8 {
			t.Errorf("%s: COMMAND INFO %v", c.Name, info)
			continue
		}
		e := info.Elems[0].Elems
		var flags values.Flags
		for _, f := range e[2].Elems {
			flags |= flagNames[string(f.Str)]
		}
		if c.Name == "keys" || c.Name == "scan" || c.Name == "dbsize" {
			flags |= values.AllKeys
		}
		got := []any{c.Arity, c.Flags, c.FirstKey, c.LastKey, c.KeyStep, c.ACL, c.Tips}
		want := []any{int(e[1].Int), flags, int(e[3].Int), int(e[4].Int), int(e[5].Int), strs(e[6]), strs(e[7])}
		for i := range got {
			if !equalField(got[i], want[i]) {
				t.Errorf("%s: field %d of COMMAND INFO is %v, redis-server %v", c.Name, i+1, got[i], want[i])
			}
		}
		docs, err := conn.Do([]byte("COMMAND"), []byte("DOCS"), []byte(c.Name))
		if err != nil || len(docs.Elems) != 2 {
			t.Fatalf("%s: COMMAND DOCS %v %v", c.Name, docs, err)
		}
		d := docs.Elems[1].Elems
		doc := map[string]string{}
		for i := 0; i+1 < len(d); i += 2 {
			doc[string(d[i].Str)] = string(d[i+1].Str)
		}
		for field, v := range map[string]string{"summary": c.Summary, "since": c.Since, "group": c.Group, "complexity": c.Complexity} {
			if doc[field] != v {
				t.Errorf("%s: %s %q, redis-server %q", c.Name, field, v, doc[field])
			}
		}
	}
}

func strs(r values.Reply) []string {
	var out []string
	for _, e := range r.Elems {
		out = append(out, string(e.Str))
	}
	return out
}

func equalField(a, b any) bool {
	if as, ok := a.([]string); ok {
		return slices.Equal(as, b.([]string))
	}
	return a == b
}

// TestLookup finds commands in any case, without allocating, and nothing
// else.
func TestLookup(t *testing.T) {
	cmds := values.Commands()
	if !slices.IsSortedFunc(cmds, func(a, b *values.Command) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("Commands are not sorted by name")
	}
	for _, c := range cmds {
		if values.Lookup([]byte(strings.ToUpper(c.Name))) != c || values.Lookup([]byte(c.Name)) != c {
			t.Errorf("Lookup(%q) does not find it", c.Name)
		}
	}
	for _, name := range []string{"", "eval", "flushall", "time", "getx", strings.Repeat("get", 20)} {
		if c := values.Lookup([]byte(name)); c != nil {
			t.Errorf("Lookup(%q) = %s", name, c.Name)
		}
	}
	name := []byte("ZRemRangeByScore")
	if n := testing.AllocsPerRun(100, func() { values.Lookup(name) }); n != 0 {
		t.Errorf("Lookup allocates %v times", n)
	}
}
