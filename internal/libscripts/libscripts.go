// Package libscripts reads the Lua scripts of the rate-limiter libraries
// as they are installed on this machine: go-redis/redis_rate and
// ulule/limiter from the Go module cache (the versions go.mod requires,
// found with `go list -m`), Python limits from Debian's python3-limits.
// Tests and benchmarks use it so that the scripts' text is never copied
// into this repository.
package libscripts

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// LimitsDir is where Debian's python3-limits keeps its Lua scripts.
const LimitsDir = "/usr/lib/python3/dist-packages/limits/resources/redis/lua_scripts"

// The libraries, as Text names them.
const (
	RedisRate = "go-redis/redis_rate"
	Ulule     = "ulule/limiter"
	Limits    = "limits"
)

// Text returns the text of library's script name: "allowN" or
// "allowAtMost" of RedisRate, "incr" or "peek" of Ulule, the file name
// without ".lua" of Limits ("incr_expire", "acquire_moving_window",
// "moving_window", "clear_keys").
func Text(library, name string) (string, error) {
	switch library {
	case RedisRate:
		dir, err := moduleDir("github.com/go-redis/redis_rate/v10")
		if err != nil {
			return "", err
		}
		return goLiteral(filepath.Join(dir, "lua.go"), "var "+name+" = redis.NewScript(")
	case Ulule:
		v, ok := map[string]string{"incr": "luaIncrScript", "peek": "luaPeekScript"}[name]
		if !ok {
			return "", fmt.Errorf("libscripts: ulule/limiter has no script %q", name)
		}
		dir, err := moduleDir("github.com/ulule/limiter/v3")
		if err != nil {
			return "", err
		}
		return goLiteral(filepath.Join(dir, "drivers/store/redis/store.go"), v+" = ")
	case Limits:
		b, err := os.ReadFile(filepath.Join(LimitsDir, name+".lua"))
		return string(b), err
	}
	return "", fmt.Errorf("libscripts: unknown library %q", library)
}

// moduleDir returns the directory of module path in the module cache,
// downloading the module first if only its go.mod is there (as on a fresh
// machine where no package that imports it was built yet).
func moduleDir(path string) (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", path).Output()
	dir := strings.TrimSpace(string(out))
	if err == nil && dir == "" {
		if dl, derr := exec.Command("go", "mod", "download", path).CombinedOutput(); derr != nil {
			return "", fmt.Errorf("libscripts: go mod download %s: %v (%s)", path, derr, dl)
		}
		out, err = exec.Command("go", "list", "-m", "-f", "{{.Dir}}", path).Output()
		dir = strings.TrimSpace(string(out))
	}
	if err != nil || dir == "" {
		return "", fmt.Errorf("libscripts: go list -m %s: %v (%s)", path, err, out)
	}
	return dir, nil
}

// goLiteral returns the raw string literal that follows prefix in file.
func goLiteral(file, prefix string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(regexp.QuoteMeta(prefix) + "`([^`]*)`").FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("libscripts: %s: no raw string after %q", file, prefix)
	}
	return string(m[1]), nil
}
