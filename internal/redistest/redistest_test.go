package redistest_test

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/redistest"
)

func TestStartServesAndStops(t *testing.T) {
	var addr, dir string
	t.Run("server", func(t *testing.T) {
		addr = redistest.Start(t)
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		if err := rdb.Set(t.Context(), "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		cfg, err := rdb.ConfigGet(t.Context(), "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range map[string]string{"save": "", "appendonly": "no", "bind": "127.0.0.1"} {
			if cfg[k] != want {
				t.Errorf("CONFIG GET %s = %q, want %q", k, cfg[k], want)
			}
		}
		dir = cfg["dir"]
		if !strings.HasPrefix(dir, os.TempDir()) {
			t.Errorf("CONFIG GET dir = %q, not a temporary directory", dir)
		}
	})
	if err := redistest.Ping(addr); err == nil {
		t.Fatalf("redis-server on %s still answers after its test ended", addr)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("its directory %s is still there: %v", dir, err)
	}
}

func TestStartInParallel(t *testing.T) {
	addrs := make([]string, 4)
	t.Run("group", func(t *testing.T) {
		for i := range addrs {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				addrs[i] = redistest.Start(t)
				if err := redistest.Ping(addrs[i]); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			t.Errorf("two servers on %s", a)
		}
		seen[a] = true
	}
}

// recorder is a testing.TB that records Fatal and Skip instead of ending
// the calling test.
type recorder struct {
	testing.TB
	mu      sync.Mutex
	fatal   string
	skipped string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatal = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Skipf(format string, args ...any) {
	r.mu.Lock()
	r.skipped = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

// startRecorded runs Start on a recorder in its own goroutine, as Fatal and
// Skip end the goroutine.
func startRecorded(t *testing.T) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		redistest.Start(r)
	}()
	<-done
	return r
}

func TestStartWithoutRedis(t *testing.T) {
	t.Setenv("PATH", t.TempDir())

	t.Setenv(redistest.SkipEnv, "")
	r := startRecorded(t)
	if r.skipped != "" || !strings.Contains(r.fatal, "redis-server not on PATH") ||
		!strings.Contains(r.fatal, "apt-get install redis-server") || !strings.Contains(r.fatal, "RLSERVER_SKIP_REDIS=1") {
		t.Errorf("without redis-server: fatal %q, skipped %q; want a failure naming the fix", r.fatal, r.skipped)
	}

	t.Setenv(redistest.SkipEnv, "1")
	r = startRecorded(t)
	if r.fatal != "" || !strings.Contains(r.skipped, "redis-server not on PATH") {
		t.Errorf("with %s=1: fatal %q, skipped %q; want a skip", redistest.SkipEnv, r.fatal, r.skipped)
	}
}

func TestFreePortIsOutsideTheEphemeralRange(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skip("no /proc/sys/net/ipv4/ip_local_port_range here")
	}
	var lo int
	if _, err := fmt.Sscan(string(b), &lo); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		port, err := redistest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if port < 1024 || port >= lo {
			t.Fatalf("FreePort() = %d, want it in [1024, %d)", port, lo)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("FreePort() = %d, which is not free: %v", port, err)
		}
		l.Close()
	}
}
