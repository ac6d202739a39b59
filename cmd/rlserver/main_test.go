package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testutil"
)

// binDir holds the binaries the tests run, built once per test run;
// TestMain makes it and removes it at the end.
var binDir string

// build is one binary built at most once per test run: go build with env
// added to the environment and flags, into binDir as name.
type build struct {
	name  string
	env   []string
	flags []string
	once  sync.Once
	path  string
	err   error
}

// do builds the binary on the first call and returns its path, or the
// build's error with its output.
func (b *build) do() (string, error) {
	b.once.Do(func() {
		path := filepath.Join(binDir, b.name)
		cmd := exec.Command("go", append(append([]string{"build"}, b.flags...), "-o", path, ".")...)
		cmd.Env = append(os.Environ(), b.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		b.path = path
	})
	return b.path, b.err
}

// get is do for a test: a failed build fails it.
func (b *build) get(t testing.TB) string {
	t.Helper()
	path, err := b.do()
	if err != nil {
		t.Fatal(err)
	}
	return path
}

var (
	plainBuild  = &build{name: "rlserver"}
	staticBuild = &build{name: "rlserver-static", env: []string{"CGO_ENABLED=0"}, flags: []string{"-trimpath"}}
)

// prebuilds are the builds startPrebuilds set off in the background.
var (
	prebuildOnce sync.Once
	prebuilds    sync.WaitGroup
)

// startPrebuilds, when the whole package runs (no -test.run), builds the
// static binary and the test image in the background the first time a
// test builds the plain binary, so that the containers and --maxmemory
// tests find them built instead of each waiting for a build in turn.
// TestMain waits for them before it cleans up.
func startPrebuilds() {
	prebuildOnce.Do(func() {
		if f := flag.Lookup("test.run"); f == nil || f.Value.String() != "" {
			return
		}
		prebuilds.Add(1)
		go func() {
			defer prebuilds.Done()
			staticBuild.do()
			if _, err := exec.LookPath("docker"); err == nil {
				testImage.do()
			}
		}()
	})
}

// buildBinary builds rlserver once per test run and returns its path. The
// tests share the one file: none may change or remove it.
func buildBinary(t testing.TB) string {
	t.Helper()
	startPrebuilds()
	return plainBuild.get(t)
}

// Every test of this package but TestLong… (make test-long runs those, one
// at a time) says first how it may share the machine: parallel or alone
// (TestEveryTestSaysHowItShares). go test runs the alone ones one at a
// time first, then the parallel ones two at a time. RLSERVER_TEST_SHARE=
// alone runs only the alone ones, =shared only the parallel ones: make
// test runs the alone ones in a pass of their own, with nothing else on
// the machine, and the parallel ones beside its other behaviour-only pass.
const shareEnv = "RLSERVER_TEST_SHARE"

// parallel marks t as a test that may run beside others: it checks
// behaviour, not time, CPU or memory, and everything it starts is its own
// (ports from testutil.FreePort, its own directories and containers), so a
// neighbour on the machine changes nothing it asserts.
func parallel(t *testing.T) {
	t.Helper()
	if os.Getenv(shareEnv) == "alone" {
		t.Skip("it may share the machine: make test runs it with RLSERVER_TEST_SHARE=shared")
	}
	t.Parallel()
}

// alone marks t as a test that runs with nothing else of the suite beside
// it: it measures time, CPU or memory, or asserts that clients see no
// error while nodes come and go, which a starved node can break.
func alone(t *testing.T) {
	t.Helper()
	if os.Getenv(shareEnv) == "shared" {
		t.Skip("it needs the machine to itself: make test runs it with RLSERVER_TEST_SHARE=alone")
	}
}

// TestBinaryLifecycle: the binary serves RL.CHECK and its HTTP endpoints,
// a second server on the same data directory refuses to start, and
// SIGTERM stops it cleanly (exit 0 within 15 s, the stop line logged).
func TestBinaryLifecycle(t *testing.T) {
	parallel(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	p := startProc(t, bin, dir)
	c := p.client

	v, err := c.Do(context.Background(), "RL.CHECK", "k", "fixed", 5, "1m").Slice()
	if err != nil || len(v) != 5 || v[0] != int64(1) {
		t.Fatalf("RL.CHECK = %v, %v", v, err)
	}
	for path, want := range map[string]string{"/healthz": `"ok"`, "/readyz": `"ready"`, "/metrics": `rlserver_checks_total{algo="fixed",result="allowed"} 1`} {
		body := httpGet(t, "http://"+p.http+path)
		if !strings.Contains(body, want) {
			t.Errorf("GET %s lacks %q:\n%.500s", path, want, body)
		}
	}

	// A second server on the same data directory refuses to start.
	out, err := exec.Command(bin, "--listen", testutil.FreeAddr(t), "--http", "", "--data-dir", dir).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(string(out), "is in use by another rlserver") {
		t.Fatalf("second server: err %v, output %q", err, out)
	}

	// SIGTERM: exit 0 after a clean stop, within 15 s (else it is killed).
	if err := p.process.Stop(15 * time.Second); err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}
	if !strings.Contains(p.logs.String(), "msg=stopped") {
		t.Errorf("logs lack the stop line:\n%s", p.logs)
	}
}

func TestBadFlagExitsWithOneLine(t *testing.T) {
	parallel(t)
	bin := buildBinary(t)
	out, err := exec.Command(bin, "--listen").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("err = %v, want exit status 2", err)
	}
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "rlserver: ") {
		t.Fatalf("output = %q, want one line", out)
	}
	help, err := exec.Command(bin, "--help").Output()
	if err != nil || !strings.Contains(string(help), "--max-log-limit") {
		t.Fatalf("--help: %v\n%s", err, help)
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

func TestLockDataDir(t *testing.T) {
	parallel(t)
	dir := filepath.Join(t.TempDir(), "nested", "data")
	unlock, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockDataDir(dir); err == nil || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second lock: err = %v, want in use by this pid", err)
	}
	unlock()
	unlock2, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock2()
}
