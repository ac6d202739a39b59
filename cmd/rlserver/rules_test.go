package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/shards"
)

const goodRules = `
- id: free-users
  target: /users/*
  tier: free
  key_type: user
  algo: sliding
  limit: 2
  window: ` + testutil.NoRollover + `
- id: per-ip
  target: "*"
  tier: "*"
  key_type: ip
  algo: token
  limit: 100
  window: 60
`

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRulesFileLoadedAtStart runs the node in-process with --rules and
// uses the rules over RESP and HTTP.
func TestRulesFileLoadedAtStart(t *testing.T) {
	parallel(t)
	cfg, err := loadConfig([]string{"--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--data-dir", t.TempDir(), "--rules", writeFile(t, goodRules)}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan [2]net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, io.Discard, func(r, h net.Addr) { addrs <- [2]net.Addr{r, h} }) }()
	var a [2]net.Addr
	select {
	case a = <-addrs:
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	defer func() { cancel(); <-done }()
	rdb := redis.NewClient(&redis.Options{Addr: a[0].String()})
	defer rdb.Close()
	for i, want := range []int64{1, 1, 0} {
		v, err := rdb.Do(ctx, "RL.CHECKRULES", "/users/9", "free", "user=u1", "ip=1.1.1.1").Slice()
		if err != nil || v[0] != want || v[5] != "free-users" {
			t.Fatalf("check %d: %v %v", i, v, err)
		}
	}
	if body := httpGet(t, "http://"+a[1].String()+"/rules"); !strings.Contains(body, `"id":"free-users"`) ||
		!strings.Contains(body, `"id":"per-ip"`) || !strings.Contains(body, `"window":"60"`) {
		t.Fatalf("GET /rules: %s", body)
	}
}

func TestBadRulesFile(t *testing.T) {
	parallel(t)
	bad := goodRules + `- id: broken
  target: /x
  tier: "*"
  key_type: ip
  algo: fixed
  limit: 0
  window: 1s
`
	tests := []struct{ name, content, want string }{
		{"invalid limit", bad, `rule 3 (line 16, id "broken"): invalid rule "broken": limit: must be a positive integer`},
		{"unknown field", "- id: a\n  limits: 5\n", `rule 1 (line 1, id "a"): invalid rule "a": limits: is not a rule field`},
		{"wrong type", "- id: a\n  limit: five\n", `limit: has the wrong type (line 2: want an integer, got "five")`},
		{"duplicate id", goodRules + goodRules, `rule 3 (line 17, id "free-users"): rule already exists`},
		{"not a list", "id: a\n", "line 1: want a list of rules"},
		{"empty", "", "the file holds no list of rules: it is empty or only comments (write [] for a file with no rules)"},
		{"comments only", "# the rules\n\n# none yet\n", "the file holds no list of rules"},
	}
	for _, tt := range tests {
		path := writeFile(t, tt.content)
		cfg := Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Shards: 1, LogLevel: "info", RulesFile: path}
		err := run(context.Background(), cfg, io.Discard, nil)
		if err == nil || !strings.Contains(err.Error(), "rules file "+path+": ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.want)
		}
	}
	cfg := Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Shards: 1, LogLevel: "info", RulesFile: "/nonexistent.yaml"}
	if err := run(context.Background(), cfg, io.Discard, nil); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// TestBadRulesFileExitsNonZero: the binary refuses to start with one line
// naming the file, the rule and the field.
func TestBadRulesFileExitsNonZero(t *testing.T) {
	parallel(t)
	bin := buildBinary(t)
	path := writeFile(t, "- id: a\n  target: /x\n  tier: free\n  key_type: user\n  algo: sliding\n  limit: 5\n  window: 1fortnight\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--listen", "127.0.0.1:0", "--http", "",
		"--data-dir", t.TempDir(), "--rules", path).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("err = %v, want a non-zero exit; output %q", err, out)
	}
	last := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := `rlserver: rules file ` + path + `: rule 1 (line 1, id "a"): invalid rule "a": window: must be a duration`
	if !strings.HasPrefix(last[len(last)-1], want) {
		t.Fatalf("last line %q, want prefix %q", last[len(last)-1], want)
	}
}

// TestShippedRulesFile: examples/rules.yaml, which the README uses, loads.
func TestShippedRulesFile(t *testing.T) {
	parallel(t)
	store := shards.New(1)
	list, err := readRules("../../examples/rules.yaml", 10000, DefaultMaxConfigBytes)
	if err == nil {
		fr, _ := newFileRules("../../examples/rules.yaml", 10000, DefaultMaxConfigBytes, store, "", slog.New(slog.DiscardHandler))
		err = fr.load(context.Background(), list, 0)
	}
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range store.Rules() {
		ids = append(ids, r.ID)
	}
	if got := strings.Join(ids, " "); got != "free-users login-per-ip new-global-cap" {
		t.Fatalf("rules %s", got)
	}
}
