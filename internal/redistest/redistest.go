package redistest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/rlproc"
)

// SkipEnv is the environment variable that, set to 1, turns a missing
// redis-server into a skipped test instead of a failed one.
const SkipEnv = "RLSERVER_SKIP_REDIS"

const (
	startTimeout = 10 * time.Second // from exec to the first PONG
	stopTimeout  = 5 * time.Second  // from SIGTERM to exit, then SIGKILL
	attempts     = 3                // tries, each on a fresh port
)

// Start starts a redis-server for the test and returns its address
// (127.0.0.1:port). The server is stopped, and its directory removed, when
// the test and its subtests end. Start calls tb.Fatal if the server cannot
// be started, and if redis-server is not on PATH (tb.Skip instead when
// RLSERVER_SKIP_REDIS=1). It is safe to call from parallel tests.
func Start(tb testing.TB) (addr string) {
	tb.Helper()
	return start(tb, false)
}

// StartCluster is Start for a redis-server with cluster support
// (--cluster-enabled yes, its bus on a free port too), which owns no slot
// yet: the test assigns them (CLUSTER ADDSLOTSRANGE) if it needs them.
func StartCluster(tb testing.TB) (addr string) {
	tb.Helper()
	return start(tb, true)
}

// Require returns the path of redis-server, for a test that runs it
// itself: it calls tb.Fatal if redis-server is not on PATH (tb.Skip
// instead when RLSERVER_SKIP_REDIS=1), as Start does.
func Require(tb testing.TB) string {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv(SkipEnv) == "1" {
			tb.Skipf("redis-server not on PATH; skipped because %s=1", SkipEnv)
		}
		tb.Fatalf("redis-server not on PATH: these tests compare against a real Redis. "+
			"Install it (Debian/Ubuntu: apt-get install redis-server; .ci/run does this) "+
			"or set %s=1 to skip them", SkipEnv)
	}
	return bin
}

func start(tb testing.TB, cluster bool) string {
	tb.Helper()
	bin := Require(tb)
	dir := tb.TempDir()
	for i := 1; ; i++ {
		addr, p, err := launch(bin, dir, cluster)
		if err == nil {
			tb.Cleanup(func() {
				if !p.Alive() { // shut down by its test: nothing to stop
					return
				}
				if err := p.Stop(stopTimeout); err != nil {
					tb.Errorf("redistest: stopping %v", err)
				}
			})
			return addr
		}
		if i == attempts {
			tb.Fatalf("redistest: %v", err)
		}
	}
}

// launch starts redis-server on a free port in dir and waits for PING; a
// server that does not answer is killed.
func launch(bin, dir string, cluster bool) (string, *rlproc.Proc, error) {
	port, err := FreePort()
	if err != nil {
		return "", nil, err
	}
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no"}
	if cluster {
		bus, err := FreePort()
		if err != nil {
			return "", nil, err
		}
		args = append(args, "--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
			"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", port)))
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p, err := rlproc.Start("redis-server on "+addr, bin, args, nil)
	if err != nil {
		return "", nil, err
	}
	if err := p.WaitPing(addr, startTimeout, func() error { return Ping(addr) }); err != nil {
		p.Kill()
		return "", nil, err
	}
	return addr, p, nil
}

// FreePort is rlproc.FreePort: a port on 127.0.0.1 free a moment ago,
// below the kernel's ephemeral range and never handed out twice in one
// process, for a server the caller is about to start.
func FreePort() (int, error) { return rlproc.FreePort() }

// Ping is rlproc.Ping: nil if the Redis-protocol server at addr answers
// PING with +PONG within a second.
func Ping(addr string) error { return rlproc.Ping(addr) }
