package server

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/testutil"
)

// TestRLHelp: RL.HELP lists every one of rlserver's own commands with its
// syntax and summary, RL.HELP <command> one of them; redis-cli prints
// them, and its own `help <command>` (made from COMMAND DOCS) shows the
// same syntax.
func TestRLHelp(t *testing.T) {
	_, addr := startServer(t, Config{Clock: fakeClock()})
	got := redisCLI(t, addr, "RL.HELP", "rl.reset")
	if want := "RL.RESET key\n    Forget the key's limiter state.\n    Complexity: O(1)."; got != want {
		t.Errorf("RL.HELP rl.reset = %q, want %q", got, want)
	}
	all := redisCLI(t, addr, "RL.HELP")
	_, list := commandTable()
	for _, cmd := range list {
		if !strings.HasPrefix(cmd.name, "rl.") && cmd.name != "cl.throttle" {
			continue
		}
		if !strings.Contains(all, "\n"+cmd.usage+"\n    "+cmd.summary+".\n") {
			t.Errorf("RL.HELP lacks %s with its summary:\n%s", cmd.usage, all)
		}
	}
	if !strings.Contains(all, "\nRL.CHECK key algo limit window [COST cost] [BURST burst]\n") {
		t.Errorf("RL.HELP lacks RL.CHECK's syntax:\n%s", all)
	}
	if got := redisCLI(t, addr, "RL.HELP", "GET"); got != "ERR unknown command 'GET': RL.HELP lists rlserver's commands" {
		t.Errorf("RL.HELP GET = %q", got)
	}

	// redis-cli's own help, from COMMAND DOCS, read through a pipe.
	bin := testutil.RequireTool(t, "redis-cli", "apt-get install redis-tools")
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "-h", host, "-p", port)
	cmd.Stdin = strings.NewReader("help RL.CHECK\nhelp RL.HOTKEYS\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli: %v\n%s", err, out)
	}
	for _, want := range []string{"RL.CHECK", "key algo limit window [COST cost] [BURST burst]",
		"Charge COST against the key's limit", "RL.HOTKEYS", "[COUNT count]", "since:", "1.0.0"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("redis-cli help lacks %q:\n%s", want, out)
		}
	}
}

// TestCommandDocsEveryRLCommand: COMMAND DOCS, read by go-redis over
// RESP3 as a Redis 7 client reads it, gives every RL.* command and
// CL.THROTTLE a summary, since, group, complexity and, when it takes
// arguments, their list with name and type each.
func TestCommandDocsEveryRLCommand(t *testing.T) {
	_, addr := startServer(t, Config{Clock: fakeClock()})
	rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: 3})
	defer rdb.Close()
	ctx := context.Background()
	_, list := commandTable()
	n := 0
	for _, cmd := range list {
		if !strings.HasPrefix(cmd.name, "rl.") && cmd.name != "cl.throttle" {
			continue
		}
		n++
		v, err := rdb.Do(ctx, "COMMAND", "DOCS", strings.ToUpper(cmd.name)).Result()
		if err != nil {
			t.Fatalf("COMMAND DOCS %s: %v", cmd.name, err)
		}
		docs, _ := v.(map[any]any)
		doc, _ := docs[cmd.name].(map[any]any)
		if doc == nil {
			t.Fatalf("COMMAND DOCS %s = %v", cmd.name, v)
		}
		for _, f := range []string{"summary", "since", "group", "complexity"} {
			if s, _ := doc[f].(string); s == "" {
				t.Errorf("COMMAND DOCS %s: no %s in %v", cmd.name, f, doc)
			}
		}
		args, _ := doc["arguments"].([]any)
		if len(args) != len(cmd.args) || strings.Count(cmd.usage, " ") > 0 && len(args) == 0 {
			t.Errorf("COMMAND DOCS %s: arguments %v", cmd.name, doc["arguments"])
		}
		for _, a := range args {
			m, _ := a.(map[any]any)
			if m["name"] == nil || m["type"] == nil {
				t.Errorf("COMMAND DOCS %s: argument %v lacks name or type", cmd.name, a)
			}
		}
	}
	if n < 16 {
		t.Fatalf("only %d of rlserver's commands in the table", n)
	}
}
