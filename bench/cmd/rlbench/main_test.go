package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
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
	srv := exec.CommandContext(ctx, server, "--listen", "127.0.0.1:0", "--http", "", "--data-dir", filepath.Join(dir, "data"))
	logs, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); srv.Wait() }()
	// The log's start line names the address the kernel chose.
	addr := ""
	started := regexp.MustCompile(`resp=(127\.0\.0\.1:\d+)`)
	sc := bufio.NewScanner(logs)
	for addr == "" && sc.Scan() {
		if m := started.FindStringSubmatch(sc.Text()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatal("rlserver did not log its address")
	}
	go func() {
		for sc.Scan() {
		}
	}()
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
