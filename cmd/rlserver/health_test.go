package main

import (
	"bytes"
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testutil"
)

// TestHealthBadFlag: `rlserver health --bogus` (or a stray argument)
// exits 2 with one line naming the flag and a hint, not the whole usage;
// --help prints the usage and exits 0.
func TestHealthBadFlag(t *testing.T) {
	parallel(t)
	for args, want := range map[string]string{
		"--bogus":    "rlserver health: flag provided but not defined: -bogus (see rlserver health --help)\n",
		"--timeout=": `rlserver health: invalid value "" for flag -timeout: parse error (see rlserver health --help)` + "\n",
		"extra":      `rlserver health: unexpected argument "extra" (see rlserver health --help)` + "\n",
	} {
		var out, errs bytes.Buffer
		code := runHealth(strings.Fields(args), func(string) string { return "" }, &out, &errs)
		if code != 2 || errs.String() != want || out.Len() != 0 {
			t.Errorf("health %s: exit %d, stderr %q, stdout %q; want 2, %q", args, code, errs.String(), out.String(), want)
		}
	}
	var out, errs bytes.Buffer
	if code := runHealth([]string{"--help"}, func(string) string { return "" }, &out, &errs); code != 0 ||
		!strings.Contains(out.String(), "Usage: rlserver health") || !strings.Contains(out.String(), "-timeout") || errs.Len() != 0 {
		t.Errorf("health --help: exit %d, stdout %q, stderr %q", code, out.String(), errs.String())
	}
}

// TestBusyPortsNamed: a port another process holds is named with its
// flag in the error, the RESP one with --listen as the HTTP one with
// --http.
func TestBusyPortsNamed(t *testing.T) {
	parallel(t)
	bin := buildBinary(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	busy := held.Addr().String()
	for flag, args := range map[string][]string{
		"--listen": {"--listen", busy, "--http", testutil.FreeAddr(t)},
		"--http":   {"--listen", testutil.FreeAddr(t), "--http", busy},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, bin, append(args, "--data-dir", t.TempDir())...).CombinedOutput()
		cancel()
		want := "listen on " + busy + " (" + flag + "): "
		if err == nil || !strings.Contains(string(out), want) || !strings.Contains(string(out), "address already in use") {
			t.Errorf("%s busy: err %v, output lacks %q:\n%s", flag, err, want, out)
		}
	}
}
