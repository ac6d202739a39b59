package testutil

import (
	"os"
	"testing"
)

// LongEnv is the environment variable that `make test-long` sets to run
// the long scenarios: the ones that add confidence (thirty restarts where
// `make test` does two, floods, long churns) rather than coverage.
const LongEnv = "RLSERVER_TEST_LONG"

// Long reports whether the long scenarios run: LongEnv is set and not "0".
func Long() bool {
	v := os.Getenv(LongEnv)
	return v != "" && v != "0"
}

// LongOnly skips t unless the long scenarios run. A test that calls it is
// named TestLong… so that `make test-long` finds it with -run '^TestLong'.
func LongOnly(t testing.TB) {
	t.Helper()
	if !Long() {
		t.Skipf("a long scenario: make test-long runs it (%s=1)", LongEnv)
	}
}
