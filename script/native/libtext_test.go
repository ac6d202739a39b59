package native

import (
	"os"
	"testing"

	"github.com/rlserver/rlserver/internal/libscripts"
	"github.com/rlserver/rlserver/script"
)

// libraryText returns the text of the recognised script s as its library
// ships it (read by package libscripts, never copied here).
func libraryText(t testing.TB, s Script) string {
	t.Helper()
	lib := map[string]string{libRedisRate: libscripts.RedisRate, libUlule: libscripts.Ulule, libLimits: libscripts.Limits}[s.Library]
	text, err := libscripts.Text(lib, s.Name)
	if os.IsNotExist(err) && s.Library == libLimits {
		// CI installs every tool the tests need (.ci/run): a missing one
		// fails its test, naming the fix, rather than skipping it.
		t.Fatalf("python3-limits is not installed: the tests need it (apt-get install python3-limits; .ci/run does this): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// TestSHAsMatchLibraries checks that each registered sha is the sha1 of
// the installed library's script: a library whose script changed shows
// here (its new script would simply run in the interpreter).
func TestSHAsMatchLibraries(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Scripts() {
		t.Run(s.Label(), func(t *testing.T) {
			if got := script.SHA([]byte(libraryText(t, s))); got != s.SHA {
				t.Fatalf("%s %s %s: the installed script's sha1 is %s, the registry has %s", s.Library, s.Version, s.Name, got, s.SHA)
			}
			if seen[s.SHA] {
				t.Fatalf("sha %s registered twice", s.SHA)
			}
			seen[s.SHA] = true
		})
	}
}
