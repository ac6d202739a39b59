package server

import (
	"strings"
	"testing"
)

// TestArityErrorsShowSyntax: every RL.* command called with the wrong
// number of arguments answers Redis's sentence followed by its syntax, as
// CL.THROTTLE's error shows redis-cell's usage; inside MULTI too.
func TestArityErrorsShowSyntax(t *testing.T) {
	syntax := map[string]string{
		"RL.BLOCK":         "RL.BLOCK identifier seconds [reason]",
		"RL.BLOCKS":        "RL.BLOCKS",
		"RL.CHECK":         "RL.CHECK key algo limit window [COST cost] [BURST burst]",
		"RL.CHECKRULES":    "RL.CHECKRULES target tier identifier [identifier ...] [COST cost]",
		"RL.CLUSTER.JOIN":  "RL.CLUSTER.JOIN node-id raft-addr resp-addr [http-addr]",
		"RL.CLUSTER.LEAVE": "RL.CLUSTER.LEAVE node-id",
		"RL.PEEK":          "RL.PEEK key algo limit window [BURST burst]",
		"RL.RESET":         "RL.RESET key",
		"RL.RULE.DEL":      "RL.RULE.DEL id",
		"RL.RULE.GET":      "RL.RULE.GET id",
		"RL.RULE.LIST":     "RL.RULE.LIST",
		"RL.RULE.SET":      "RL.RULE.SET id json",
		"RL.UNBLOCK":       "RL.UNBLOCK identifier",
	}
	_, list := commandTable()
	var steps []step
	for _, cmd := range list {
		name := strings.ToUpper(cmd.name)
		if !strings.HasPrefix(name, "RL.") || name == "RL.HOTKEYS" || name == "RL.HELP" {
			continue // RL.HOTKEYS and RL.HELP take any number: see below
		}
		want, ok := syntax[name]
		if !ok {
			t.Fatalf("%s: no expected syntax in this test; add it", name)
		}
		// One argument too few, and for an exact arity one too many.
		n := cmd.arity
		if n < 0 {
			n = -n
		}
		var calls [][]string
		if n >= 2 {
			calls = append(calls, append([]string{name}, make([]string, n-2)...))
		}
		if cmd.arity > 0 {
			calls = append(calls, append([]string{name}, make([]string, n)...))
		}
		for _, call := range calls {
			for i := 1; i < len(call); i++ {
				call[i] = "x"
			}
			wantErr := "-ERR wrong number of arguments for '" + cmd.name + "' command; usage: " + want + "\r\n"
			steps = append(steps, step{resp(call...), wantErr})
		}
		delete(syntax, name)
	}
	if len(syntax) > 0 {
		t.Fatalf("commands not in the table: %v", syntax)
	}
	steps = append(steps,
		step{resp("RL.BLOCK", "ip=1", "60", "r", "extra"),
			"-ERR wrong number of arguments for 'rl.block' command; usage: RL.BLOCK identifier seconds [reason]\r\n"},
		step{resp("RL.HOTKEYS", "TOP", "3"), "-ERR syntax error; usage: RL.HOTKEYS [COUNT count]\r\n"},
		step{resp("MULTI"), "+OK\r\n"},
		step{resp("RL.RESET"), "-ERR wrong number of arguments for 'rl.reset' command; usage: RL.RESET key\r\n"},
		step{resp("DISCARD"), "+OK\r\n"},
	)
	runScript(t, Config{}, steps)
}
