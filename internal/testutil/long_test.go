package testutil

import (
	"io/fs"
	"os"
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
	fn := regexp.MustCompile(`(?m)^func (Test\w*)\(t \*testing\.T\) \{\n((?:.*\n)*?)^\}`)
	call := regexp.MustCompile(`(?m)^\s*(testutil\.)?LongOnly\(t\)\s*$`)
	seen := 0
	err := filepath.WalkDir(filepath.Join("..", ".."), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range fn.FindAllStringSubmatch(string(src), -1) {
			name, body := m[1], m[2]
			long := strings.HasPrefix(name, "TestLong")
			first := strings.HasPrefix(strings.TrimSpace(body), "testutil.LongOnly(t)")
			calls := call.MatchString(body)
			switch {
			case long && !first:
				t.Errorf("%s: %s does not call testutil.LongOnly(t) first: make test would run it", path, name)
			case !long && calls:
				t.Errorf("%s: %s calls LongOnly but make test-long runs only tests named TestLong…", path, name)
			}
			if long {
				seen++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Fatal("no TestLong… test found: is the pattern still right?")
	}
}
