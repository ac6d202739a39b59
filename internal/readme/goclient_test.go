package readme

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/testutil"
)

// TestGoClientImportPath: the README and package client's doc give the
// `go get` line and import path of the Go client, both go.mod's module
// path + "/client", and a module outside this one that imports that path
// (its go.mod replacing the module by this checkout) builds.
func TestGoClientImportPath(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^module (\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod names no module")
	}
	want := string(m[1]) + "/client"
	for _, f := range []string{"README.md", "client/doc.go"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range []string{"go get " + want, `import "` + want + `"`} {
			if !strings.Contains(string(b), line) {
				t.Errorf("%s lacks %q", f, line)
			}
		}
	}
	goCmd := testutil.GoCommand(t)
	root, _ := filepath.Abs(repoRoot)
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The app's go.mod: this module's requirements (so that the build
	// needs no download), this module, and where it is.
	appMod := strings.Replace(string(mod), "module "+string(m[1]), "module example.com/app", 1)
	write("go.mod", appMod+"\nrequire "+string(m[1])+" v0.0.0\n\nreplace "+string(m[1])+" => "+root+"\n")
	sum, _ := os.ReadFile(filepath.Join(root, "go.sum"))
	write("go.sum", string(sum))
	write("main.go", `package main

import (
	"context"
	"fmt"
	"time"

	"`+want+`"
)

func main() {
	rl := client.Dial("127.0.0.1:1")
	_, err := rl.Check(context.Background(), "user:42", client.Limit{Algo: "sliding", Limit: 100, Window: time.Minute}, 1)
	fmt.Println(err != nil)
}
`)
	cmd := exec.Command(goCmd, "build", "-mod=mod", "-o", os.DevNull, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("a module importing %s does not build: %v\n%s", want, err, out)
	}
}
