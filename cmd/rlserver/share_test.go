package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryTestSaysHowItShares: make test runs this package's tests in two
// passes, those that call alone(t) and those that call parallel(t) (see
// shareEnv); a test that calls neither first would run in neither.
func TestEveryTestSaysHowItShares(t *testing.T) {
	parallel(t)
	fn := regexp.MustCompile(`(?m)^func (Test\w*)\(t \*testing\.T\) \{\n(.*)\n`)
	files, err := filepath.Glob("*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	seen := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fn.FindAllStringSubmatch(string(src), -1) {
			name, first := m[1], strings.TrimSpace(m[2])
			if strings.HasPrefix(name, "TestLong") || name == "TestMain" {
				continue
			}
			seen++
			if first != "parallel(t)" && first != "alone(t)" {
				t.Errorf("%s: %s starts with %q, not parallel(t) or alone(t): make test would not run it", f, name, first)
			}
		}
	}
	if seen < 50 {
		t.Fatalf("only %d tests found: is the pattern still right?", seen)
	}
}
