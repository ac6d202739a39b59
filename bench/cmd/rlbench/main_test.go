package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/rlserver/rlserver/bench/nodes"
)

// TestAlgosDoNotShareKeys runs the README's rlbench line, -algos with
// three algorithms, against a real rlserver: no check may fail (keys
// shared between algorithms answered WRONGTYPE).
func TestAlgosDoNotShareKeys(t *testing.T) {
	dir := t.TempDir()
	server := filepath.Join(dir, "rlserver")
	if out, err := exec.Command("go", "build", "-o", server, "../../../cmd/rlserver").CombinedOutput(); err != nil {
		t.Fatalf("go build rlserver: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// One node on free ports (others should another process take one),
	// waited for by PING; an exit at start fails with its log.
	ns, err := nodes.Start(nodes.Spec{Bin: server, Dir: dir, Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ns[0].Kill()
	addr := ns[0].RESP
	out, err := exec.CommandContext(ctx, "go", "run", ".", "-addr", addr, "-c", "4", "-P", "16", "-r", "1000",
		"-d", "300ms", "-warmup", "100ms", "-algos", "fixed,token,gcra", "-dist", "zipf", "-json", "-").Output()
	if err != nil {
		t.Fatalf("rlbench: %v\n%s", err, out)
	}
	var res struct {
		Requests, Errors uint64
		FirstError       string `json:"first_error"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("rlbench -json: %v\n%s", err, out)
	}
	if res.Requests == 0 || res.Errors != 0 {
		t.Fatalf("%d requests, %d errors (first: %s)", res.Requests, res.Errors, res.FirstError)
	}
}

func TestAlgoCommands(t *testing.T) {
	got := algoCommands("fixed, TOKEN,gcra", 100, "60")
	want := []string{"RL.CHECK key:fixed:__rand_int__ fixed 100 60", "RL.CHECK key:token:__rand_int__ TOKEN 100 60",
		"RL.CHECK key:gcra:__rand_int__ gcra 100 60"}
	if len(got) != len(want) {
		t.Fatalf("%q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%q, want %q", got[i], want[i])
		}
	}
}
