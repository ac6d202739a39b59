package server

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/redistest"
)

// requirePythonRedis returns a python3 that can import redis-py: Debian's
// /usr/bin/python3 with python3-redis, or else the first python3 on PATH
// that has it. It fails the test when there is none (.ci/run installs it).
func requirePythonRedis(t *testing.T) string {
	t.Helper()
	candidates := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	for _, py := range candidates {
		if exec.Command(py, "-c", "import redis").Run() == nil {
			return py
		}
	}
	t.Fatal("no python3 with redis-py: the tests drive rlserver with it " +
		"(apt-get install python3-redis; .ci/run does this)")
	return ""
}

// TestRedisPy drives rlserver with redis-py, unchanged: its default
// (transactional) and plain pipelines, client_info, the ways it
// authenticates, and every rlserver command (testdata/redispy.py).
func TestRedisPy(t *testing.T) {
	py := requirePythonRedis(t)
	_, open := startServer(t, Config{Clock: fakeClock()})
	_, locked := startServer(t, Config{Clock: fakeClock(), RequirePass: "s3cret", AdminToken: "root"})
	redisAddr := redistest.Start(t)
	for _, tc := range []struct {
		name  string
		addrs []string
	}{
		{"pipelines", []string{open}},
		{"client_info", []string{open}},
		{"commands", []string{open}},
		{"auth_nopass", []string{open, redisAddr}},
		{"auth_pass", []string{locked}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command(py, append([]string{"testdata/redispy.py", tc.name}, tc.addrs...)...).CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "ok" {
				t.Fatalf("redispy.py %s: %v\n%s", tc.name, err, out)
			}
		})
	}
}
