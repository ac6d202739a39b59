// Package testutil holds the helpers that tests of several packages share:
//
//   - waits: WaitFor (a condition polled until a deadline), WaitForErr
//     (the same for a condition that says why it does not hold yet: the
//     failure carries the last error) and Poll (a wait that returns its
//     last error instead of failing: off the test's goroutine, or for a
//     caller that handles the timeout), with Stop to give up at once;
//   - ports: FreePort, FreeAddr;
//   - clocks: NoRollover, the window that keeps fixed-window counts from
//     rolling over mid-test;
//   - tools: RequireTool, RequirePython, GoCommand and RequireDocker (a
//     missing tool fails the test, naming how to install it, since CI
//     installs them all; redis-server's check is internal/redistest's
//     Require);
//   - the long scenarios' switch (Long, LongOnly) and Race;
//   - files: CopyDir, a directory tree copied;
//   - the test functions of the tree, for the tests that check how tests
//     are written (TestFuncs).
//
// It imports nothing of the project's but internal/redistest, so that any
// package's tests (not those of redistest itself) can use it.
package testutil

import (
	"os"
	"strconv"
	"testing"

	"github.com/rlserver/rlserver/internal/redistest"
)

// NoRollover is the window of the fixed and sliding keys and rules of
// tests that run on the wall clock: the longest, 366 days. Those windows
// are aligned to the Unix epoch, so a test whose charges and checks
// straddle a window's end would see its counts reset (in CI, TestJoinAndLeaveUnderLoad of
// ./cluster failed so when its one-hour window ended at 07:00:00 UTC
// mid-test). The next 366-day boundary is 2027-02-13; the chance that a
// test straddles one is its length over 366 days. Token, leaky and gcra
// keys refill at limit per 366 days: nothing during a test.
const NoRollover = "366d"

// FreePort returns a port free on 127.0.0.1 now, outside the kernel's
// ephemeral range and never handed out twice in one process
// (redistest.FreePort), so that no other connection or node takes it.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// FreeAddr returns "127.0.0.1:port" on a FreePort.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(FreePort(t))
}

// CopyDir copies the directory tree src (a data directory, say) into a new
// temporary directory of t's and returns its path.
func CopyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}
