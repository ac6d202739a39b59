package compat

import (
	"errors"
	"io/fs"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/testseed"
)

// python is Debian's interpreter, which has the Debian packages the
// drivers import.
const python = "/usr/bin/python3"

// runDriver runs testdata/<driver> against p's two sides with seed and
// steps (and --skew if skew) and returns its output and whether it
// reported a run without a mismatch.
func runDriver(t *testing.T, p *pair, driver string, seed uint64, steps int, skew bool) (string, bool) {
	t.Helper()
	args := []string{driver, "--a", p.addrs[0], "--b", p.addrs[1],
		"--seed", strconv.FormatUint(seed, 10), "--steps", strconv.Itoa(steps)}
	if skew {
		args = append(args, "--skew")
	}
	cmd := exec.Command(python, args...)
	cmd.Dir = "testdata"
	out, err := cmd.CombinedOutput()
	text := strings.TrimSpace(string(out))
	if err != nil && !strings.HasPrefix(text, "MISMATCH") {
		hint := ""
		if strings.Contains(text, "ModuleNotFoundError") || errors.Is(err, fs.ErrNotExist) {
			hint = "\nthese tests drive the libraries of Debian's packages with " + python +
				" (apt-get install python3-redis python3-limits python3-flask python3-flask-limiter; .ci/run does this)"
		}
		t.Fatalf("%s did not run: %v\n%s%s", driver, err, text, hint)
	}
	return text, err == nil && strings.HasPrefix(text, "ok ")
}

// TestPythonLimits drives Python's limits 2.8 (python3-limits) through its
// RedisStorage against redis-server and rlserver in lock step: the fixed
// window (its incr_expire.lua by EVALSHA), the fixed window with elastic
// expiry (INCRBY, EXPIRE), the moving window (acquire_moving_window.lua,
// moving_window.lua); hit, test, get_window_stats and clear, the
// storage's reset (clear_keys.lua: KEYS and DEL in a script), SCRIPT FLUSH
// now and then (NOSCRIPT, then SCRIPT LOAD). The library reads the time on
// the client: both sides get the same timestamp for a step.
func TestPythonLimits(t *testing.T) {
	t.Parallel()
	seed := testseed.Rand(t).Uint64()
	p := startPair(t)
	out, ok := runDriver(t, p, "limits_lockstep.py", seed, stepsFor(t, 150), false)
	if !ok {
		t.Fatalf("limits_lockstep.py --seed %d:\n%s", seed, out)
	}
	t.Log(out)
}

// TestPythonFlaskLimiter drives a Flask app limited by Flask-Limiter 3.3
// (python3-flask-limiter on python3-flask; every strategy; route, shared,
// default and application limits, a cost, deduct_when, an exempt route)
// against redis-server and rlserver in lock step, through Flask's test
// client: statuses, bodies, X-RateLimit-* and Retry-After headers and every
// stored key are compared.
func TestPythonFlaskLimiter(t *testing.T) {
	t.Parallel()
	seed := testseed.Rand(t).Uint64()
	p := startPair(t)
	out, ok := runDriver(t, p, "flask_lockstep.py", seed, stepsFor(t, 100), false)
	if !ok {
		t.Fatalf("flask_lockstep.py --seed %d:\n%s", seed, out)
	}
	t.Log(out)
}
