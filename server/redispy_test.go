package server

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/redistest"
	"github.com/rlserver/rlserver/internal/testutil"
)

// TestRedisPy drives rlserver with redis-py, unchanged: its default
// (transactional) and plain pipelines, client_info, the ways it
// authenticates, and every rlserver command (testdata/redispy.py).
func TestRedisPy(t *testing.T) {
	py := testutil.RequirePython(t, "redis")
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
