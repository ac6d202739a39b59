package values

import "testing"

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pat, s string
		want   bool
	}{
		{"*", "abc", true},
		{"*", "", false}, // KEYS and SCAN treat "*" apart
		{"", "", true},
		{"a*", "a", true},
		{"a*c", "abbbc", true},
		{"a*c", "abbb", false},
		{"a**c", "ac", true},
		{"?", "a", true},
		{"?", "", false},
		{"a?c", "abc", true},
		{"[abc]", "b", true},
		{"[abc]", "d", false},
		{"[^abc]", "d", true},
		{"[^abc]", "a", false},
		{"[a-c]x", "bx", true},
		{"[c-a]x", "bx", true}, // a reversed range is swapped
		{"[a-]", "-", false},   // a range from ] to a, the class unclosed
		{`[\]]`, "]", true},
		{`\*`, "*", true},
		{`\*`, "a", false},
		{`a\`, "a", false},
		{"[abc", "b", true}, // an unclosed class ends with the pattern
		{"[", "a", false},
		{"[^", "a", true},
		{"a*b*c*d*e*f*g*h*i*j*k*l*m*n*o*p*q*r*s*t*u*v*w*x*y*z", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
	} {
		if got := globMatch([]byte(tc.pat), []byte(tc.s)); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.pat, tc.s, got, tc.want)
		}
	}
}
