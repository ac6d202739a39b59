package readme

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/redistest"
)

// repoRoot is the repository, from this package's directory.
const repoRoot = "../.."

// step is one "$ command" of a console block and the output shown after it.
type step struct {
	line int    // of the command in the markdown file
	cmd  string // without the "$ " prompt and the trailing comment
	want []string
}

// block is one ```console block.
type block struct {
	file  string // the markdown file, from the repository's root
	line  int
	steps []step
}

// comment is a trailing comment: two or more spaces, then '#'.
var comment = regexp.MustCompile(` {2,}#(.*)$`)

// parseBlocks returns the console blocks of a markdown file. A line that
// starts with "$ " is a command (continued on the next line if it ends
// with '\'); the lines after it, up to the next command, are its output.
func parseBlocks(t *testing.T, file, md string) []block {
	var blocks []block
	var cur *block
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		fence := strings.HasPrefix(strings.TrimSpace(l), "```")
		switch {
		case cur == nil && fence && strings.TrimSpace(strings.TrimSpace(l)[3:]) == "console":
			cur = &block{file: file, line: i + 1}
		case cur == nil:
		case fence:
			blocks = append(blocks, *cur)
			cur = nil
		case strings.HasPrefix(l, "$ "):
			s := step{line: i + 1, cmd: l[2:]}
			for strings.HasSuffix(s.cmd, "\\") && i+1 < len(lines) {
				i++
				s.cmd += "\n" + lines[i]
			}
			s.cmd = strings.TrimSpace(comment.ReplaceAllString(s.cmd, ""))
			cur.steps = append(cur.steps, s)
		case len(cur.steps) == 0:
			t.Fatalf("%s:%d: output before the block's first command", file, i+1)
		default:
			st := &cur.steps[len(cur.steps)-1]
			st.want = append(st.want, l)
		}
	}
	return blocks
}

// Ports that commands name, to be replaced by free ones.
var portPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?:localhost|127\.0\.0\.1|0\.0\.0\.0):(\d{2,5})\b`),
	regexp.MustCompile(`--port[ =](\d{2,5})\b`),
	regexp.MustCompile(`http\.server\b[^&|;]*?\b(\d{4,5})\b`),
}

// Defaults of rlserver (RESP, HTTP) that a command may leave implicit.
const respPort, httpPort = "6379", "8080"

// portMap returns a free port for rlserver's default ports and for every
// port the block's commands name.
func portMap(t *testing.T, b block) map[string]string {
	m := map[string]string{}
	add := func(p string) {
		if _, ok := m[p]; ok {
			return
		}
		n, err := redistest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		m[p] = strconv.Itoa(n)
	}
	add(respPort)
	add(httpPort)
	for _, s := range b.steps {
		for _, re := range portPatterns {
			for _, sub := range re.FindAllStringSubmatch(s.cmd, -1) {
				add(sub[1])
			}
		}
	}
	return m
}

var (
	background  = regexp.MustCompile(`[^&]&$`)
	cliWithAddr = regexp.MustCompile(`redis-cli\b[^|;&]*\s-[phu]\s`)
	redisCLI    = regexp.MustCompile(`\bredis-cli\b`)
)

// rewrite returns the command to run for s: ports mapped, redis-cli aimed
// at the block's rlserver, and a background command's output sent to the
// background log and followed by a wait until the ports it serves accept
// connections.
func rewrite(cmd string, ports map[string]string) (string, bool) {
	for from, to := range ports {
		cmd = regexp.MustCompile(`\b`+from+`\b`).ReplaceAllString(cmd, to)
	}
	// redis-cli prints replies as at a terminal (--no-raw), to the
	// block's rlserver unless the command names an address.
	addr := " -p " + ports[respPort]
	if cliWithAddr.MatchString(cmd) {
		addr = ""
	}
	if !strings.Contains(cmd, "--raw") {
		addr = " --no-raw" + addr
	}
	cmd = redisCLI.ReplaceAllString(cmd, "redis-cli"+addr)
	if !background.MatchString(cmd) {
		return cmd, false
	}
	cmd = strings.TrimSpace(strings.TrimSuffix(cmd, "&"))
	var wait []string
	for _, to := range ports {
		if regexp.MustCompile(`\b` + to + `\b`).MatchString(cmd) {
			wait = append(wait, to)
		}
	}
	if strings.Contains(cmd, "rlserver") || strings.Contains(cmd, "make run") {
		if !strings.Contains(cmd, "--listen") {
			wait = append(wait, ports[respPort])
		}
		if !strings.Contains(cmd, "--http") {
			wait = append(wait, ports[httpPort])
		}
	}
	return cmd + ` >>"$__bg" 2>&1 &` + "\n__wait $! " + strings.Join(wait, " "), true
}

// script is the bash prologue: __wait PID PORT... polls until each port
// accepts a connection, or stops the block with the background log if the
// background process PID exits first or 120 s pass.
const script = `__rc=0
__wait() {
  local pid=$1 p i
  shift
  for p in "$@"; do
    for ((i = 0; i < 1200; i++)); do
      (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && break
      if ! kill -0 "$pid" 2>/dev/null; then
        echo "readme test: the background command exited before port $p accepted connections; its output:"
        cat "$__bg"
        exit 97
      fi
      sleep 0.1
    done
    if ((i == 1200)); then
      echo "readme test: nothing listens on port $p after 120 s; background output:"
      cat "$__bg"
      exit 97
    fi
  done
}
`

const marker = "@@@readme-step "

// buildServer builds bin/rlserver once for every block.
func buildServer(t *testing.T) string {
	bin := filepath.Join(t.TempDir(), "rlserver")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/rlserver")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// scratch returns a copy of the repository (without .git, bin and data)
// with the built server in bin/rlserver.
func scratch(t *testing.T, server string) string {
	dir := t.TempDir()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		switch {
		case rel == ".git" || rel == "bin" || rel == "data" || rel == filepath.Join("bench", "out"):
			if !d.IsDir() {
				return nil // a worktree's .git is a file
			}
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		case !d.Type().IsRegular():
			return nil
		}
		return copyFile(path, filepath.Join(dir, rel))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(server, filepath.Join(dir, "bin", "rlserver")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	info, err := src.Stat()
	if err != nil {
		return err
	}
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// run runs a block's commands in one bash, in a scratch copy of the
// repository, and returns each command's output.
func run(t *testing.T, b block, server string) []string {
	ports := portMap(t, b)
	dir := scratch(t, server)
	var sb strings.Builder
	sb.WriteString(script)
	for i, s := range b.steps {
		cmd, bg := rewrite(s.cmd, ports)
		if bg && len(s.want) > 0 && strings.TrimSpace(strings.Join(s.want, "")) != "" {
			t.Fatalf("%s:%d: a background command's output is not compared: show none", b.file, s.line)
		}
		fmt.Fprintf(&sb, "printf '\\n%s%d\\n'\n(exit $__rc)\n%s\n__rc=$?\n", marker, i, cmd)
	}
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	const timeout = 3 * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", sb.String())
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, out, out
	cmd.Env = append(freshEnv(), "__bg="+filepath.Join(dir, ".background.log"),
		"RLSERVER_LISTEN=127.0.0.1:"+ports[respPort], "RLSERVER_HTTP=127.0.0.1:"+ports[httpPort])
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	werr := cmd.Wait()
	stopGroup(pgid)
	data, _ := os.ReadFile(out.Name())
	if werr != nil {
		if ctx.Err() != nil {
			werr = fmt.Errorf("it did not finish within %v (does a command not exit?)", timeout)
		}
		bgLog, _ := os.ReadFile(filepath.Join(dir, ".background.log"))
		t.Fatalf("%s:%d: the block failed: %v\n%s\nbackground output:\n%s", b.file, b.line, werr, data, bgLog)
	}
	parts := strings.Split(string(data), "\n"+marker)
	outputs := make([]string, len(b.steps))
	for _, p := range parts[1:] {
		num, rest, _ := strings.Cut(p, "\n")
		if i, err := strconv.Atoi(num); err == nil && i < len(outputs) {
			outputs[i] = rest
		}
	}
	return outputs
}

// stopGroup ends what the block left running in its process group (the
// servers it started in the background): SIGTERM, then SIGKILL.
func stopGroup(pgid int) {
	if syscall.Kill(-pgid, syscall.SIGTERM) != nil {
		return
	}
	for i := 0; i < 50; i++ {
		if syscall.Kill(-pgid, 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
}

// lines splits output into lines without trailing blanks or carriage
// returns, and without leading and trailing empty lines.
func lines(s []string) []string {
	var out []string
	for _, l := range s {
		out = append(out, strings.TrimRight(l, " \t\r"))
	}
	for len(out) > 0 && out[0] == "" {
		out = out[1:]
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

var digits = regexp.MustCompile(`[0-9]+`)

// matcher returns the regular expression an output line of the README
// stands for: its text, where "…" is any text and, if its comment starts
// with "~", any number may stand for another.
func matcher(want string) *regexp.Regexp {
	vary := false
	if m := comment.FindStringSubmatch(want); m != nil {
		vary = strings.HasPrefix(strings.TrimSpace(m[1]), "~")
		want = strings.TrimRight(comment.ReplaceAllString(want, ""), " ")
	}
	var re strings.Builder
	for i, part := range strings.Split(want, "…") {
		if i > 0 {
			re.WriteString(".*")
		}
		if !vary {
			re.WriteString(regexp.QuoteMeta(part))
			continue
		}
		last := 0
		for _, loc := range digits.FindAllStringIndex(part, -1) {
			re.WriteString(regexp.QuoteMeta(part[last:loc[0]]) + "[0-9]+")
			last = loc[1]
		}
		re.WriteString(regexp.QuoteMeta(part[last:]))
	}
	return regexp.MustCompile("^" + re.String() + "$")
}

// TestReadmeExamples runs every console block of README.md and of every
// page under docs/, and compares each command's output with the page's.
func TestReadmeExamples(t *testing.T) {
	var blocks []block
	for _, file := range docFiles(t) {
		md, err := os.ReadFile(filepath.Join(repoRoot, file))
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, parseBlocks(t, file, string(md))...)
	}
	if len(blocks) == 0 {
		t.Fatal("no console block in README.md or docs/")
	}
	server := buildServer(t)
	for _, b := range blocks {
		t.Run(fmt.Sprintf("%s line %d", b.file, b.line), func(t *testing.T) {
			outputs := run(t, b, server)
			for i, s := range b.steps {
				want, got := lines(s.want), lines(strings.Split(outputs[i], "\n"))
				ok := len(want) == len(got)
				for j := 0; ok && j < len(want); j++ {
					ok = matcher(want[j]).MatchString(got[j])
				}
				if !ok {
					t.Errorf("%s:%d: $ %s\n--- the page shows:\n%s\n--- it printed:\n%s", b.file, s.line, s.cmd,
						strings.Join(want, "\n"), strings.Join(got, "\n"))
				}
			}
		})
	}
}

func TestMatcher(t *testing.T) {
	for _, tt := range []struct {
		want, got string
		ok        bool
	}{
		{"1) (integer) 600        # back to full", "1) (integer) 600", true},
		{"1) (integer) 600        # back to full", "1) (integer) 599", false},
		{"4) (integer) 592        # ~ retry_after_ms", "4) (integer) 588", true},
		{"4) (integer) 592        # ~", "5) (integer) 588", true},
		{"4) (integer) 592        # ~", "4) (string) 588", false},
		{"Date: …", "Date: Mon, 23 Nov 2026 10:00:00 GMT", true},
		{`{"a":1}`, `{"a":1}`, true},
	} {
		if got := matcher(tt.want).MatchString(tt.got); got != tt.ok {
			t.Errorf("matcher(%q) on %q = %v, want %v", tt.want, tt.got, got, tt.ok)
		}
	}
}

// freshEnv returns the environment without what make passes to a make it
// runs (MAKELEVEL and the flags), so that a block's `make build` prints
// what it prints for a reader, not make's "Entering directory" lines, when
// the tests themselves run under `make test`.
func freshEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES", "MAKE_TERMOUT", "MAKE_TERMERR":
			continue
		}
		env = append(env, kv)
	}
	return env
}
