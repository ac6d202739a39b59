package testutil

import (
	"strings"
	"testing"
)

// TestRequireTool: a tool on PATH is found; a missing one fails the test,
// naming how to install it.
func TestRequireTool(t *testing.T) {
	if p := RequireTool(t, "sh", "apt-get install dash"); !strings.HasSuffix(p, "/sh") {
		t.Errorf("RequireTool(sh) = %q", p)
	}
	msg := fails(t, func(tb testing.TB) { RequireTool(tb, "rlserver-no-such-tool", "apt-get install nothing") })
	if want := "rlserver-no-such-tool is not installed: the tests need it (apt-get install nothing; .ci/run does this)"; msg != want {
		t.Errorf("RequireTool of a missing tool: %q, want %q", msg, want)
	}
}

// TestRequirePython: a python3 without a module fails the test, naming
// the Debian package.
func TestRequirePython(t *testing.T) {
	msg := fails(t, func(tb testing.TB) { RequirePython(tb, "json", "no_such_module.sub") })
	if !strings.Contains(msg, "no python3 that imports json, no_such_module.sub") ||
		!strings.Contains(msg, "apt-get install python3-json python3-no-such-module;") {
		t.Errorf("RequirePython of a missing module: %q", msg)
	}
}
