package rules

import (
	"errors"
	"strings"
	"testing"
)

func TestLoadYAML(t *testing.T) {
	in := `
- id: free-users
  target: /users/*
  tier: free
  key_type: user
  algo: sliding
  limit: 100
  window: 1m
- id: per-ip
  target: "*"
  tier: "*"
  key_type: ip
  algo: token
  limit: 10
  window: 60
  burst: 20
  shadow: true
`
	got, err := LoadYAML([]byte(in), 10000)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].Window != "60" || got[1].Burst != 20 || !got[1].Shadow || got[0].Target != "/users/*" {
		t.Fatalf("got %+v", got)
	}
	for _, empty := range []string{"", "\n  \n", "# only a comment\n", "---\n", "# a\n---\n# b\n", "~\n", "null\n"} {
		if rs, err := LoadYAML([]byte(empty), 0); !errors.Is(err, ErrEmptyFile) || rs != nil {
			t.Errorf("%q: %v, %v; want ErrEmptyFile", empty, rs, err)
		}
	}
	for _, none := range []string{"[]\n", "# no rules\n[]\n"} {
		if rs, err := LoadYAML([]byte(none), 0); err != nil || len(rs) != 0 {
			t.Errorf("%q: %v, %v; want no rules", none, rs, err)
		}
	}
}

func TestLoadYAMLErrors(t *testing.T) {
	rule := "- id: a\n  target: /x\n  tier: '*'\n  key_type: ip\n  algo: fixed\n  limit: 5\n  window: 1s\n"
	tests := []struct {
		in       string
		reason   error
		contains []string
	}{
		{rule + "- id: b\n  target: /x\n  tier: '*'\n  key_type: ip\n  algo: fixed\n  limit: -3\n  window: 1s\n",
			ErrLimit, []string{"rule 2 (line 8, id \"b\")", "limit:", "got -3"}},
		{rule + rule, ErrExists, []string{"rule 2 (line 8, id \"a\")", "also rule 1"}},
		{"- id: a\n  limitt: 5\n", ErrUnknown, []string{"rule 1 (line 1, id \"a\")", "limitt:", "line 2"}},
		{"- id: a\n  limit: lots\n", ErrType, []string{"limit:", "want an integer", "line 2"}},
		{"- id: a\n  limit: [1]\n", ErrType, []string{"limit:", "single value"}},
		{"- just a string\n", ErrSyntax, []string{"rule 1 (line 1)", "mapping"}},
		{"id: a\n", nil, []string{"line 1", "want a list of rules"}},
		{"- id: [\n", nil, []string{"not valid YAML"}},
	}
	for _, tt := range tests {
		_, err := LoadYAML([]byte(tt.in), 10000)
		if err == nil {
			t.Errorf("%q: no error", tt.in)
			continue
		}
		if tt.reason != nil && !errors.Is(err, tt.reason) {
			t.Errorf("%q: got %v, want %v", tt.in, err, tt.reason)
		}
		for _, c := range tt.contains {
			if !strings.Contains(err.Error(), c) {
				t.Errorf("%q: error %q does not contain %q", tt.in, err, c)
			}
		}
	}
}
