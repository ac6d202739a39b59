package urlpath

import (
	"errors"
	"strings"
	"testing"
)

func TestTarget(t *testing.T) {
	for _, tt := range []struct {
		raw, want string
		err       error
	}{
		// Spellings that servers resolve to one path.
		{"/login", "/login", nil},
		{"/login?next=/x/../y", "/login", nil},
		{"//login", "/login", nil},
		{"///login", "/login", nil},
		{"/./login", "/login", nil},
		{"/x/../login", "/login", nil},
		{"/a/b/../../login", "/login", nil},
		{"/../../login", "/login", nil},
		{"/%2e%2e/login", "/login", nil},
		{"/%2E%2e/login", "/login", nil},
		{"/%2e/login", "/login", nil},
		{"/x/%2e%2E/login", "/login", nil},
		{"/login/.", "/login/", nil},
		{"/login/%2e", "/login/", nil},
		{"/login/", "/login/", nil},
		{"/login//", "/login/", nil},
		{"///login//", "/login/", nil},
		{"/a/b/..", "/a/", nil},
		{"/login/..", "/", nil},
		{"/", "/", nil},
		{"/.", "/", nil},
		{"/..", "/", nil},
		{"//", "/", nil},
		{"/users/42?page=2", "/users/42", nil},
		// Segments that only look like dots stay.
		{"/.../login", "/.../login", nil},
		{"/..a/login", "/..a/login", nil},
		{"/a./login", "/a./login", nil},
		// Escapes decoded once.
		{"/users/%41%62", "/users/Ab", nil},
		{"/caf%C3%A9", "/café", nil},
		{"/café", "/café", nil},
		{"/a%20b", "/a b", nil},
		{"/a%3Fb?c=1", "/a?b", nil},
		{"/a%23b", "/a#b", nil},
		{"/100%25", "/100%", nil},
		{"/100%25x", "/100%x", nil},
		{"/login?x=%zz", "/login", nil}, // the query is not read
		// Absolute form.
		{"http://example.com/x/../login?q=1", "/login", nil},
		{"https://example.com:8443//login", "/login", nil},
		// Not a request target.
		{"", "", ErrNotPath},
		{"login", "", ErrNotPath},
		{"users/1", "", ErrNotPath},
		{"*", "", ErrNotPath},
		{"?x=1", "", ErrNotPath},
		{"http://example.com", "", ErrNotPath},
		{"://example.com/login", "", ErrNotPath},
		{"1x://example.com/login", "", ErrNotPath},
		// Ambiguous: refused.
		{"/a%2fb", "", ErrEncodedSlash},
		{"/x%2F..%2Flogin", "", ErrEncodedSlash},
		{"/login%5c", "", ErrBackslash},
		{`/x\..\login`, "", ErrBackslash},
		{"/log%00in", "", ErrControl},
		{"/log\x00in", "", ErrControl},
		{"/login%0d%0a", "", ErrControl},
		{"/a\tb", "", ErrControl},
		{"/a%7f", "", ErrControl},
		{"/a%zz", "", ErrBadEscape},
		{"/a%4", "", ErrBadEscape},
		{"/a%", "", ErrBadEscape},
		{"/a%g1", "", ErrBadEscape},
		{"/%252e%252e/login", "", ErrDoubleEscape},
		{"/%25%32%65%25%32%65/login", "", ErrDoubleEscape},
		{"/%2541", "", ErrDoubleEscape},
		{"/%c0%ae%c0%ae/login", "", ErrNotUTF8},
		{"/\xff", "", ErrNotUTF8},
		{"/login#top", "", ErrFragment},
	} {
		got, err := Target(tt.raw)
		if got != tt.want || !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
			t.Errorf("Target(%q) = %q, %v; want %q, %v", tt.raw, got, err, tt.want, tt.err)
		}
	}
}

func TestClean(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", "/"},
		{"a", "/a"},
		{"/a/./b/../c", "/a/c"},
		{"/a//b///", "/a/b/"},
		{"/a/b/.", "/a/b/"},
		{"/a/b/..", "/a/"},
		{"/../a", "/a"},
		{"/a%2e%2e", "/a%2e%2e"}, // Clean does not decode
	} {
		if got := Clean(tt.in); got != tt.want {
			t.Errorf("Clean(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if again := Clean(Clean(tt.in)); again != Clean(tt.in) {
			t.Errorf("Clean(Clean(%q)) = %q, not %q", tt.in, again, Clean(tt.in))
		}
	}
}

// escape is the inverse of Target's decoding for a path Target returned:
// the characters Target would read otherwise written as escapes.
func escape(p string) string {
	return strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(p)
}

// FuzzTarget: Target never panics; what it returns is canonical (Clean
// leaves it as it is, no dot segment, no empty segment) and comes back
// the same from its own escaping, so cleaning is done once and for all.
//
//	go test -run '^$' -fuzz FuzzTarget ./internal/urlpath
func FuzzTarget(f *testing.F) {
	for _, s := range []string{"/login", "//login", "/x/../login", "/%2e%2e/login", "/login/.", "/a%2fb", "/100%25",
		"/%252e", "http://h/a?b", "/caf%C3%A9", "/a%23b/..", "/%c0%ae", "/a\\b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := Target(raw)
		if err != nil {
			if got != "" {
				t.Fatalf("Target(%q) = %q with error %v", raw, got, err)
			}
			return
		}
		checkCanonical(t, got)
		if again, err := Target(escape(got)); err != nil || again != got {
			t.Fatalf("Target(%q) = %q; Target(%q) = %q, %v", raw, got, escape(got), again, err)
		}
	})
}

// checkCanonical fails t if p is not a path that Target returns.
func checkCanonical(t *testing.T, p string) {
	t.Helper()
	if Clean(p) != p || !strings.HasPrefix(p, "/") || strings.Contains(p, "//") {
		t.Fatalf("%q is not clean (Clean: %q)", p, Clean(p))
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "." || seg == ".." {
			t.Fatalf("%q has a dot segment", p)
		}
	}
}
