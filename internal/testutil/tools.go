package testutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The project's policy on the tools tests run: CI installs every one
// (.ci/run), so a missing tool fails the test that needs it, naming the
// fix, rather than skipping it quietly. The exceptions are the tools a
// developer may not be able to run at all, each with an environment
// variable that turns the failure into a skip: redis-server
// (RLSERVER_SKIP_REDIS, internal/redistest) and Docker (DockerSkipEnv).

// RequireTool returns the path of the command name, looked up on PATH and
// then in /usr/sbin (where Debian puts daemons such as nginx, outside a
// user's PATH), failing the test when it is not installed: install says
// how to install it ("apt-get install redis-tools").
func RequireTool(t testing.TB, name, install string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := filepath.Join("/usr/sbin", name); isExecutable(p) {
		return p
	}
	t.Fatalf("%s is not installed: the tests need it (%s; .ci/run does this)", name, install)
	return ""
}

// isExecutable reports whether path is a file someone may execute.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// RequirePython returns a python3 that imports every one of modules
// ("redis.cluster", "flask_limiter"): Debian's /usr/bin/python3, which has
// the Debian packages .ci/run installs, or else the python3 on PATH. It
// fails the test when neither does, naming the Debian packages
// (python3-redis, python3-flask-limiter: python3- and the module's first
// name, with - for _).
func RequirePython(t testing.TB, modules ...string) string {
	t.Helper()
	script := "import " + strings.Join(modules, ", ")
	candidates := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil && p != candidates[0] {
		candidates = append(candidates, p)
	}
	for _, py := range candidates {
		if exec.Command(py, "-c", script).Run() == nil {
			return py
		}
	}
	var pkgs []string
	for _, m := range modules {
		root, _, _ := strings.Cut(m, ".")
		pkgs = append(pkgs, "python3-"+strings.ReplaceAll(root, "_", "-"))
	}
	t.Fatalf("no python3 that imports %s: the tests need it (apt-get install %s; .ci/run does this)",
		strings.Join(modules, ", "), strings.Join(pkgs, " "))
	return ""
}

// GoCommand returns the go command: the one on PATH, else the one of the
// toolchain that built the test (a test runs under go test, so there is
// one; PATH may lack it).
func GoCommand(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if !isExecutable(p) {
		t.Fatalf("no go command on PATH nor at %s", p)
	}
	return p
}

// DockerSkipEnv is the environment variable that, set to 1, turns a
// missing Docker engine into a skipped test instead of a failed one (as
// RLSERVER_SKIP_REDIS does for redis-server).
const DockerSkipEnv = "RLSERVER_SKIP_DOCKER"

// RequireDocker fails the test when no Docker engine answers (docker
// version, within 30 s), or skips it when DockerSkipEnv is 1.
func RequireDocker(t testing.TB) {
	t.Helper()
	_, err := exec.LookPath("docker")
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var out []byte
		if out, err = exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
			err = fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
		}
	}
	if err != nil {
		if os.Getenv(DockerSkipEnv) == "1" {
			t.Skipf("no Docker engine (%v); skipped because %s=1", err, DockerSkipEnv)
		}
		t.Fatalf("no Docker engine (%v): this test runs rlserver in containers. "+
			"Run it where docker works (the CI machines have it), or set %s=1 to skip it", err, DockerSkipEnv)
	}
}
