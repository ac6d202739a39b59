package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// docFiles returns README.md and the markdown pages under docs/, from the
// repository's root.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages under docs/: %v", err)
	}
	files := []string{"README.md"}
	for _, p := range pages {
		rel, _ := filepath.Rel(repoRoot, p)
		files = append(files, filepath.ToSlash(rel))
	}
	sort.Strings(files[1:])
	return files
}

// maxReadmeLines is the README's bound: a landing page read in five
// minutes, the depth in docs/.
const maxReadmeLines = 250

// TestReadmeIsShortAndMapsTheDocs: the README is at most maxReadmeLines
// lines, starts with `make run` and `make test` (saying how long the
// latter takes), and links to every page under docs/.
func TestReadmeIsShortAndMapsTheDocs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	if n := strings.Count(readme, "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, want at most %d: move the depth into docs/", n, maxReadmeLines)
	}
	first := strings.Index(readme, "```sh\n")
	if first < 0 || !strings.HasPrefix(readme[first+6:], "make run ") ||
		!regexp.MustCompile(`^make run [^\n]*\nmake test [^\n]*\d+ minutes`).MatchString(readme[first+6:]) {
		t.Errorf("the README's first block is not `make run` then `make test` with how long it takes")
	}
	for _, page := range docFiles(t)[1:] {
		if !strings.Contains(readme, "]("+page+")") && !strings.Contains(readme, "]("+page+"#") {
			t.Errorf("README.md does not link to %s", page)
		}
	}
}

var (
	mdLink  = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile("(?m)^#{1,6} (.+)$")
)

// slug is the anchor GitHub gives a heading: lower case, spaces to '-',
// punctuation but '-' and '_' dropped.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of a markdown file's headings (outside
// code blocks).
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	inCode := false
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inCode = !inCode
		}
		if m := heading.FindStringSubmatch(l); m != nil && !inCode {
			out[slug(strings.ReplaceAll(m[1], "`", ""))] = true
		}
	}
	return out
}

// TestRelativeLinksResolve: every relative link of the README and of the
// pages under docs/ names a file or directory of the repository, and a
// #fragment a heading of that page.
func TestRelativeLinksResolve(t *testing.T) {
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(filepath.Join(repoRoot, file))
		if err != nil {
			t.Fatal(err)
		}
		md := string(b)
		for _, m := range mdLink.FindAllStringSubmatch(md, -1) {
			target := m[1]
			if regexp.MustCompile(`^[a-z]+:`).MatchString(target) {
				continue // http:, https:, mailto:
			}
			path, frag, _ := strings.Cut(target, "#")
			dest := filepath.Join(repoRoot, filepath.Dir(file), path)
			if path == "" {
				dest = filepath.Join(repoRoot, file)
			}
			st, err := os.Stat(dest)
			if err != nil {
				t.Errorf("%s: link %s: %v", file, target, err)
				continue
			}
			if frag == "" || st.IsDir() || !strings.HasSuffix(dest, ".md") {
				continue
			}
			page, _ := os.ReadFile(dest)
			if !anchors(string(page))[frag] {
				t.Errorf("%s: link %s: no heading #%s in %s", file, target, frag, path)
			}
		}
	}
}
