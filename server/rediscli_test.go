package server

import (
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/testutil"
)

// redisCLI runs the real redis-cli against addr with args and returns its
// output.
func redisCLI(t *testing.T, addr string, args ...string) string {
	t.Helper()
	bin := testutil.RequireTool(t, "redis-cli", "apt-get install redis-tools")
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command(bin, append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestRedisCLI(t *testing.T) {
	_, addr := startServer(t, Config{Clock: fakeClock()})
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"PING"}, "PONG"},
		{[]string{"RL.CHECK", "api:alice", "token", "100", "60"}, "1\n100\n99\n0\n600"},
		{[]string{"RL.CHECK", "api:alice", "token", "100", "60", "COST", "99"}, "1\n100\n0\n0\n60000"},
		{[]string{"RL.CHECK", "api:alice", "token", "100", "60"}, "0\n100\n0\n600\n60000"},
		{[]string{"CL.THROTTLE", "user123", "15", "30", "60", "1"}, "0\n16\n15\n-1\n2"},
		{[]string{"RL.CHECK", "k", "nope", "1", "1"}, "ERR unknown algorithm 'nope': want fixed, sliding, log, token, leaky or gcra"},
		{[]string{"DBSIZE"}, "2"},
	}
	for _, c := range cases {
		if got := redisCLI(t, addr, c.args...); got != c.want {
			t.Errorf("redis-cli %v\n got %q\nwant %q", c.args, got, c.want)
		}
	}
	// RESP3: redis-cli -3 prints the HELLO map as key-value lines.
	got := redisCLI(t, addr, "-3", "HELLO", "3")
	if !strings.HasPrefix(got, "server redis\nversion 7.2.0\nproto 3\nid ") ||
		!strings.HasSuffix(got, "mode standalone\nrole master\nmodules") {
		t.Errorf("redis-cli -3 HELLO 3 = %q", got)
	}
}

// TestRedisCLIInteractive drives redis-cli's interactive mode, which asks
// COMMAND DOCS for its hints, through a pipe.
func TestRedisCLIInteractive(t *testing.T) {
	_, addr := startServer(t, Config{Clock: fakeClock()})
	bin := testutil.RequireTool(t, "redis-cli", "apt-get install redis-tools")
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "-h", host, "-p", port)
	cmd.Stdin = strings.NewReader("RL.PEEK k fixed 5 1m\nINFO rlserver\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli: %v\n%s", err, out)
	}
	for _, want := range []string{"1\n5\n5\n0\n0", "# Rlserver", "max_key_bytes:1024"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestRedisCLIMulti sends a transaction through redis-cli's interactive
// mode, one command per line on one connection.
func TestRedisCLIMulti(t *testing.T) {
	_, addr := startServer(t, Config{Clock: fakeClock()})
	bin := testutil.RequireTool(t, "redis-cli", "apt-get install redis-tools")
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "-h", host, "-p", port, "--no-raw")
	cmd.Stdin = strings.NewReader("MULTI\nRL.CHECK m fixed 1 1m\nRL.CHECK m fixed 1 1m\nEXEC\nEXEC\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli: %v\n%s", err, out)
	}
	want := "OK\nQUEUED\nQUEUED\n" +
		"1) 1) (integer) 1\n   2) (integer) 1\n   3) (integer) 0\n   4) (integer) 0\n   5) (integer) 60000\n" +
		"2) 1) (integer) 0\n   2) (integer) 1\n   3) (integer) 0\n   4) (integer) 60000\n   5) (integer) 60000\n" +
		"(error) ERR EXEC without MULTI"
	if got := strings.TrimSpace(string(out)); got != want {
		t.Fatalf("redis-cli printed\n%s\nwant\n%s", got, want)
	}
}
