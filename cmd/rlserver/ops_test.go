package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/testutil"
)

// TestLogFormatJSON: a process started with --log-format json (and one
// with RLSERVER_LOG_FORMAT=json) writes only lines that each parse as a
// JSON object with time, level and msg, from its start to its stop.
func TestLogFormatJSON(t *testing.T) {
	alone(t)
	bin := buildBinary(t)
	for _, viaEnv := range []bool{false, true} {
		var p *proc
		if viaEnv {
			t.Setenv("RLSERVER_LOG_FORMAT", "json")
			p = startProc(t, bin, t.TempDir())
		} else {
			p = startProc(t, bin, t.TempDir(), "--log-format", "json")
		}
		p.stop()
		lines := strings.Split(strings.TrimSpace(p.logs.String()), "\n")
		if len(lines) < 3 {
			t.Fatalf("env %v: %d log lines, want the start and stop lines at least:\n%s", viaEnv, len(lines), p.logs)
		}
		msgs := map[string]bool{}
		for _, line := range lines {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("env %v: a log line is not JSON (%v): %q", viaEnv, err, line)
			}
			for _, k := range []string{"time", "level", "msg"} {
				if _, ok := m[k].(string); !ok {
					t.Fatalf("env %v: line %q lacks %q", viaEnv, line, k)
				}
			}
			msgs[m["msg"].(string)] = true
			if m["msg"] == "state loaded" {
				// Read as the text format writes them (consistency=fast took=3ms).
				if c, _ := m["consistency"].(string); c != "fast" {
					t.Errorf("env %v: consistency %v, want \"fast\": %s", viaEnv, m["consistency"], line)
				}
				if took, _ := m["took"].(string); !strings.HasSuffix(took, "s") {
					t.Errorf("env %v: took %v, want a duration such as \"3ms\": %s", viaEnv, m["took"], line)
				}
			}
		}
		if !msgs["state loaded"] {
			t.Errorf("env %v: no state loaded line among %v", viaEnv, msgs)
		}
		if !msgs["rlserver started"] || !msgs["stopped"] {
			t.Fatalf("env %v: no start or stop line among %v", viaEnv, msgs)
		}
	}
}

// TestBadLogFormat: a bad --log-format exits 2 with one line naming it;
// --help lists the flag with its default.
func TestBadLogFormat(t *testing.T) {
	parallel(t)
	bin := buildBinary(t)
	out, err := exec.Command(bin, "--log-format", "xml", "--data-dir", t.TempDir()).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("err = %v, want exit status 2; output %q", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != `rlserver: --log-format "xml": want text or json` {
		t.Fatalf("output %q", got)
	}
	help, err := exec.Command(bin, "--help").Output()
	if err != nil || !strings.Contains(string(help), `--log-format (default "text", env RLSERVER_LOG_FORMAT)`) ||
		!strings.Contains(string(help), "rlserver health") {
		t.Fatalf("--help: %v\n%s", err, help)
	}
}

// TestHealthSubcommand: `rlserver health` exits 0 against a ready node
// (found by --http, and by RLSERVER_HTTP with an unspecified host), 1
// when nothing listens there or what does is not HTTP, 2 on a bad flag.
func TestHealthSubcommand(t *testing.T) {
	parallel(t)
	bin := buildBinary(t)
	p := startProc(t, bin, t.TempDir())
	health := func(env []string, args ...string) (int, string) {
		cmd := exec.Command(bin, append([]string{"health"}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	_, port, _ := strings.Cut(p.http, ":")
	free := testutil.FreeAddr(t)
	for _, c := range []struct {
		env  []string
		args []string
		want int
	}{
		{nil, []string{"--http", p.http}, 0},
		{[]string{"RLSERVER_HTTP=0.0.0.0:" + port}, nil, 0},
		{nil, []string{"--http", free}, 1},
		{[]string{"RLSERVER_HTTP=" + free}, []string{"--timeout", "2s"}, 1},
		{nil, []string{"--http", p.resp, "--timeout", "2s"}, 1}, // not HTTP
		{nil, []string{"--http", "nonsense"}, 2},
	} {
		if code, out := health(c.env, c.args...); code != c.want {
			t.Errorf("health %v %v: exit %d, want %d: %s", c.env, c.args, code, c.want, out)
		}
	}
	p.stop()
	if code, out := health(nil, "--http", p.http); code != 1 {
		t.Errorf("health after the node stopped: exit %d, want 1: %s", code, out)
	}
}

// TestHealthCoversGRPC: with the rate limit service on, /readyz names its
// gRPC address and `rlserver health` asks its grpc.health.v1 too: ready
// and serving is 0, a /readyz naming a gRPC address where nothing serves
// is 1.
func TestHealthCoversGRPC(t *testing.T) {
	parallel(t)
	bin := buildBinary(t)
	grpcAddr := testutil.FreeAddr(t)
	p := startProc(t, bin, t.TempDir(), "--grpc", grpcAddr)
	out, err := exec.Command(bin, "health", "--http", p.http).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "the rate limit service (gRPC "+grpcAddr+") is serving") {
		t.Fatalf("health: %v: %s", err, out)
	}
	dead := testutil.FreeAddr(t)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(GRPCHeader, dead)
		w.Write([]byte(`{"status":"ready"}`))
	}))
	defer fake.Close()
	cmd := exec.Command(bin, "health", "--http", strings.TrimPrefix(fake.URL, "http://"), "--timeout", "2s")
	out, err = cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "is not serving") {
		t.Fatalf("health with gRPC down: %v: %s", err, out)
	}
}

// TestEnvoyConfigBadAtStart: a bad --envoy-config at start says that the
// server exits (there is no last good configuration yet), and it does.
func TestEnvoyConfigBadAtStart(t *testing.T) {
	parallel(t)
	bin := buildBinary(t)
	conf := filepath.Join(t.TempDir(), "rls.yaml")
	if err := os.WriteFile(conf, []byte("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--listen", testutil.FreeAddr(t), "--http", testutil.FreeAddr(t), "--grpc", testutil.FreeAddr(t), "--data-dir", "", "--envoy-config", conf)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("a bad --envoy-config at start: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "not loaded at start; the server exits") || strings.Contains(string(out), "last good") ||
		!strings.Contains(string(out), "fortnight") {
		t.Fatalf("the log does not say the server exits, or says a last good configuration stays:\n%s", out)
	}
}
