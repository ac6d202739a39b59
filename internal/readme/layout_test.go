package readme

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLayoutListsEveryPackage: the layout table of docs/development.md
// names every package of the module (every directory holding .go files,
// but those of a module of their own and testdata), as `path` or under a
// `dir/*` row, so that a newcomer finds each package's job there.
func TestLayoutListsEveryPackage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "development.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, layout, _ := strings.Cut(string(b), "## Layout\n")
	layout, _, _ = strings.Cut(layout, "\n## ")
	pkgs := map[string]bool{}
	err = filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
				return filepath.SkipDir // a module of its own
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") && filepath.Dir(rel) != "." {
			pkgs[filepath.ToSlash(filepath.Dir(rel))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("found only %d packages under %s", len(pkgs), repoRoot)
	}
	for p := range pkgs {
		if strings.Contains(layout, "`"+p+"`") || strings.Contains(layout, "`"+filepath.ToSlash(filepath.Dir(p))+"/*`") {
			continue
		}
		t.Errorf("docs/development.md's layout table does not list %s", p)
	}
}
