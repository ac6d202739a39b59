package native

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/script"
)

// The scripts' text is read from the installed libraries, never copied
// here: redis_rate and ulule/limiter from the Go module cache (the versions
// go.mod requires), Python limits from Debian's python3-limits.

// limitsScripts is where Debian's python3-limits keeps its Lua scripts.
const limitsScripts = "/usr/lib/python3/dist-packages/limits/resources/redis/lua_scripts"

// moduleDir returns the directory of module path in the module cache.
func moduleDir(t testing.TB, path string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", path).Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Fatalf("go list -m %s: %v (%s)", path, err, out)
	}
	return dir
}

// goLiteral returns the raw string literal that follows prefix in file.
func goLiteral(t testing.TB, file, prefix string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(regexp.QuoteMeta(prefix) + "`([^`]*)`").FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no raw string after %q", file, prefix)
	}
	return string(m[1])
}

// libraryText returns the text of the recognised script s as its library
// ships it.
func libraryText(t testing.TB, s Script) string {
	t.Helper()
	switch s.Library {
	case libRedisRate:
		return goLiteral(t, filepath.Join(moduleDir(t, "github.com/go-redis/redis_rate/v10"), "lua.go"),
			"var "+s.Name+" = redis.NewScript(")
	case libUlule:
		name := map[string]string{"incr": "luaIncrScript", "peek": "luaPeekScript"}[s.Name]
		return goLiteral(t, filepath.Join(moduleDir(t, "github.com/ulule/limiter/v3"), "drivers/store/redis/store.go"), name+" = ")
	case libLimits:
		b, err := os.ReadFile(filepath.Join(limitsScripts, s.Name+".lua"))
		if err != nil {
			t.Skipf("python3-limits is not installed: %v", err)
		}
		return string(b)
	}
	t.Fatalf("no text for %s", s.Library)
	return ""
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
