// Package urlpath turns the request target that a gateway forwards (the
// URI of X-Forwarded-Uri, X-Original-URI, or the path after Envoy's
// path_prefix) into the one path that rules are matched against: decoded
// once, its dot segments resolved and repeated slashes merged, so that
// every spelling a backend serves as /login is /login. A target that
// backends may read in two ways (an encoded slash or backslash, a control
// character, a bad or double escape, bytes that are not UTF-8) is refused
// rather than guessed at.
//
// It does no I/O, holds no state and is safe for concurrent use.
package urlpath

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// The reasons a target is refused. Target wraps one of them with the
// place it was found.
var (
	// ErrNotPath: the target is not an origin-form ("/users/42?page=2")
	// or absolute-form ("https://host/users/42") request target.
	ErrNotPath = errors.New("not a request URI")
	// ErrBadEscape: a '%' not followed by two hex digits.
	ErrBadEscape = errors.New("a '%' not followed by two hex digits")
	// ErrEncodedSlash: %2F, which a backend may read as a separator or
	// as a character of a segment.
	ErrEncodedSlash = errors.New("an encoded '/' (%2F), which a backend may read as a separator or not")
	// ErrBackslash: '\' or %5C, which some servers read as '/'.
	ErrBackslash = errors.New("a backslash, which some servers read as '/'")
	// ErrControl: a control character (NUL to 0x1F, 0x7F), raw or encoded.
	ErrControl = errors.New("a control character")
	// ErrDoubleEscape: %25 followed by two hex digits ("%252e"), which a
	// backend that decodes twice reads as another character.
	ErrDoubleEscape = errors.New("an escape escaped twice (%25 and two hex digits), which a backend that decodes twice reads otherwise")
	// ErrNotUTF8: bytes that are not UTF-8 once decoded (overlong forms
	// such as %C0%AE among them).
	ErrNotUTF8 = errors.New("bytes that are not UTF-8")
	// ErrFragment: a '#', which no request target holds.
	ErrFragment = errors.New("a '#', which no request target holds")
)

// Target returns the path of the request target raw, decoded once and
// cleaned (see Clean): the query is left out. The path of an
// absolute-form target ("http://host/a") is taken; one with no path is
// refused, as is every target Path refuses. The error wraps one of the
// Err values of this package.
func Target(raw string) (string, error) {
	p, err := RawPath(raw)
	if err != nil {
		return "", err
	}
	return Path(p)
}

// RawPath returns the path part of the request target raw, as written
// (not decoded): what precedes the first '?', after the scheme and
// authority of an absolute-form target.
func RawPath(raw string) (string, error) {
	if i := strings.IndexByte(raw, '?'); i >= 0 {
		raw = raw[:i]
	}
	if strings.HasPrefix(raw, "/") {
		return raw, nil
	}
	scheme := strings.Index(raw, "://")
	if scheme <= 0 || !validScheme(raw[:scheme]) {
		return "", ErrNotPath
	}
	rest := raw[scheme+3:]
	slash := strings.IndexByte(rest, '/')
	if slash < 0 {
		return "", ErrNotPath
	}
	return rest[slash:], nil
}

// validScheme reports whether s is a URI scheme (RFC 3986 3.1).
func validScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		alpha := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !alpha && (i == 0 || !('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return s != ""
}

// Path decodes the raw path p (which starts with '/') once and returns it
// cleaned. It refuses, with an error wrapping one of this package's, a
// path that backends may read in more than one way.
func Path(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", ErrNotPath
	}
	var b strings.Builder
	b.Grow(len(p))
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '%':
			if i+2 >= len(p) || unhex(p[i+1]) < 0 || unhex(p[i+2]) < 0 {
				return "", ErrBadEscape
			}
			c = byte(unhex(p[i+1])<<4 | unhex(p[i+2]))
			i += 2
			if c == '/' {
				return "", ErrEncodedSlash
			}
		case c == '#':
			return "", ErrFragment
		}
		switch {
		case c < 0x20 || c == 0x7f:
			return "", ErrControl
		case c == '\\':
			return "", ErrBackslash
		}
		b.WriteByte(c)
	}
	decoded := b.String()
	if !utf8.ValidString(decoded) {
		return "", ErrNotUTF8
	}
	// Every '%' left came from %25: followed by two hex digits, a second
	// decoding would make it another character.
	for i := strings.IndexByte(decoded, '%'); i >= 0; i = nextPercent(decoded, i) {
		if i+2 < len(decoded) && unhex(decoded[i+1]) >= 0 && unhex(decoded[i+2]) >= 0 {
			return "", ErrDoubleEscape
		}
	}
	return Clean(decoded), nil
}

// nextPercent returns the index of the first '%' of s after i, or -1.
func nextPercent(s string, i int) int {
	j := strings.IndexByte(s[i+1:], '%')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// unhex returns the value of the hex digit c, or -1.
func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// Clean returns the canonical form of the decoded path p: it starts with
// '/', has no empty, "." or ".." segment ("//a" and "/./a" are "/a",
// "/a/b/../c" is "/a/c", and ".." above the root stays at the root, as
// RFC 3986's remove_dot_segments, nginx and Go's net/http resolve them),
// and ends with '/' when p's last segment is empty, "." or ".." ("/a/",
// "/a/." and "/a/b/.." are "/a/"), as those servers keep it. Clean does
// not decode, so Clean(Clean(p)) == Clean(p).
func Clean(p string) string {
	var segs []string
	trailing := false
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "", ".":
			trailing = true
		case "..":
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
			trailing = true
		default:
			segs = append(segs, seg)
			trailing = false
		}
	}
	if len(segs) == 0 {
		return "/"
	}
	out := "/" + strings.Join(segs, "/")
	if trailing {
		out += "/"
	}
	return out
}
