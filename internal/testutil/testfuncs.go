package testutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestFunc is a test function (func TestX(t *testing.T)) as its file
// spells it, for the tests that check how the suite's tests are written.
type TestFunc struct {
	File, Name string
	Body       string // the lines between its braces
}

// First returns the body's first statement, trimmed.
func (f TestFunc) First() string {
	first, _, _ := strings.Cut(strings.TrimSpace(f.Body), "\n")
	return strings.TrimSpace(first)
}

// testFunc matches a test function of a gofmt'ed file, up to its closing
// brace at the start of a line.
var testFunc = regexp.MustCompile(`(?m)^func (Test\w*)\(t \*testing\.T\) \{\n((?:.*\n)*?)^\}`)

// TestFuncs returns the test functions of every _test.go file under root,
// failing t if one cannot be read.
func TestFuncs(t testing.TB, root string) []TestFunc {
	t.Helper()
	var out []TestFunc
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(src), -1) {
			out = append(out, TestFunc{File: path, Name: m[1], Body: m[2]})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
