package luaref

import (
	"embed"
	"io/fs"
	"sort"
	"strings"
)

// files holds the scripts. It is read-only; go:embed needs a package-level
// variable.
//
//go:embed *.lua
var files embed.FS

// Names returns the script names in sorted order. Each is the name of the
// RL.CHECK algorithm the script implements: fixed, gcra, leaky, log,
// sliding, token.
func Names() []string {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		panic("luaref: embedded scripts unreadable: " + err.Error())
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".lua"))
	}
	sort.Strings(names)
	return names
}

// Source returns the Lua source of the script named name, and false if there
// is no such script.
func Source(name string) (string, bool) {
	b, err := files.ReadFile(name + ".lua")
	if err != nil {
		return "", false
	}
	return string(b), true
}

// Scripts returns a new map from script name to Lua source, which the caller
// owns.
func Scripts() map[string]string {
	m := make(map[string]string)
	for _, name := range Names() {
		m[name], _ = Source(name)
	}
	return m
}
