package testutil

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNamesOfLongTests: make test-long runs the tests named TestLong…,
// and make test skips them only if they call LongOnly; a test that does
// one without the other would run in the wrong suite or in none. Every
// test of the repository that calls LongOnly is named TestLong…, and
// every TestLong… calls it first.
func TestNamesOfLongTests(t *testing.T) {
	call := regexp.MustCompile(`(?m)^\s*(testutil\.)?LongOnly\(t\)\s*$`)
	seen := 0
	for _, f := range TestFuncs(t, filepath.Join("..", "..")) {
		long := strings.HasPrefix(f.Name, "TestLong")
		switch {
		case long && f.First() != "testutil.LongOnly(t)":
			t.Errorf("%s: %s does not call testutil.LongOnly(t) first: make test would run it", f.File, f.Name)
		case !long && call.MatchString(f.Body):
			t.Errorf("%s: %s calls LongOnly but make test-long runs only tests named TestLong…", f.File, f.Name)
		}
		if long {
			seen++
		}
	}
	if seen == 0 {
		t.Fatal("no TestLong… test found: is the pattern still right?")
	}
}
