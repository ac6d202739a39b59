package main

import (
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/testutil"
)

// TestEveryTestSaysHowItShares: go test runs this package's alone(t)
// tests one at a time, then its parallel(t) ones two at a time (see
// shareEnv); a test that says neither first would run beside others
// whatever it measures, and RLSERVER_TEST_SHARE would run it in neither
// kind.
func TestEveryTestSaysHowItShares(t *testing.T) {
	parallel(t)
	seen := 0
	for _, f := range testutil.TestFuncs(t, ".") {
		if strings.HasPrefix(f.Name, "TestLong") || f.Name == "TestMain" {
			continue
		}
		seen++
		if first := f.First(); first != "parallel(t)" && first != "alone(t)" {
			t.Errorf("%s: %s starts with %q, not parallel(t) or alone(t)", f.File, f.Name, first)
		}
	}
	if seen < 50 {
		t.Fatalf("only %d tests found: is the pattern still right?", seen)
	}
}
