package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/logbuf"
	"github.com/rlserver/rlserver/internal/redistest"
	"github.com/rlserver/rlserver/internal/testutil"
)

// proc is an rlserver process started by a test.
type proc struct {
	t      testing.TB
	cmd    *exec.Cmd
	logs   *logbuf.Buffer
	resp   string
	http   string
	bin    string
	dir    string
	client *redis.Client
	done   chan error
	token  string // the bearer token of its admin endpoints (GET /cluster), if it has one
}

// startProc starts bin on dir with extra flags and waits for PING. Its
// RESP and HTTP ports are picked free; should another process take one
// before the node binds it, the node is started again on others.
func startProc(t testing.TB, bin, dir string, extra ...string) *proc {
	t.Helper()
	p, err := startProcErr(t, bin, dir, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startProcErr is startProc returning its failure (with the node's log)
// instead of failing the test: for goroutines other than the test's,
// which must not call t.Fatal.
func startProcErr(t testing.TB, bin, dir string, extra ...string) (*proc, error) {
	for attempt := 1; ; attempt++ {
		resp, err1 := redistest.FreePort()
		http, err2 := redistest.FreePort()
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		p := &proc{t: t, logs: &logbuf.Buffer{}, resp: "127.0.0.1:" + strconv.Itoa(resp), http: "127.0.0.1:" + strconv.Itoa(http),
			bin: bin, dir: dir, done: make(chan error, 1)}
		err := p.start(append([]string{"--listen", p.resp, "--http", p.http, "--data-dir", dir}, extra...))
		if err == nil {
			return p, nil
		}
		logs := p.logs.String()
		taken := strings.Contains(logs, "listen on "+p.resp) || strings.Contains(logs, "listen on "+p.http)
		if attempt == 3 || !taken || !strings.Contains(logs, "address already in use") {
			return nil, fmt.Errorf("%v\n%s", err, logs)
		}
	}
}

// restartProc starts old's binary again on its data directory with
// --data-dir and extra flags alone (a cluster node's directory remembers
// its addresses), and waits for PING at old's address.
func restartProc(t testing.TB, old *proc, extra ...string) *proc {
	t.Helper()
	p := &proc{t: t, logs: &logbuf.Buffer{}, resp: old.resp, http: old.http, bin: old.bin, dir: old.dir, done: make(chan error, 1)}
	return p.run(append([]string{"--data-dir", old.dir}, extra...))
}

// run starts p's binary with args and waits for PING at p.resp (see
// start); it fails the test if the binary does not come up.
func (p *proc) run(args []string) *proc {
	p.t.Helper()
	if err := p.start(args); err != nil {
		p.t.Fatalf("%v\n%s", err, p.logs)
	}
	return p
}

// start starts p's binary with args and waits for PING at p.resp. The
// secrets among args (which a data directory never remembers) are the
// password its client AUTHs with and the token it reads GET /cluster with.
// It returns an error if the binary exits or does not answer within 20 s.
func (p *proc) start(args []string) error {
	t := p.t
	t.Helper()
	pass := ""
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--admin-token":
			p.token = args[i+1]
		case "--requirepass":
			pass = args[i+1]
		}
	}
	if p.token == "" {
		p.token = pass
	}
	p.cmd = exec.Command(p.bin, args...)
	p.cmd.Stderr = p.logs
	noteLogs(t, p.logs)
	if err := p.cmd.Start(); err != nil {
		return err
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.cmd.Process.Kill() })
	p.client = redis.NewClient(&redis.Options{Addr: p.resp, MaxRetries: -1, Password: pass})
	t.Cleanup(func() { p.client.Close() })
	deadline := time.Now().Add(20 * time.Second)
	for p.client.Ping(context.Background()).Err() != nil {
		select {
		case err := <-p.done:
			return fmt.Errorf("rlserver exited at start: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			return errors.New("rlserver did not answer PING within 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// stop sends SIGTERM and asserts a clean exit.
func (p *proc) stop() {
	p.t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logs)
		}
	case <-time.After(30 * time.Second):
		p.t.Fatalf("no exit within 30s of SIGTERM\n%s", p.logs)
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	p.t.Helper()
	p.cmd.Process.Kill()
	<-p.done
}

func (p *proc) do(args ...any) any {
	p.t.Helper()
	v, err := p.client.Do(context.Background(), args...).Result()
	if err != nil {
		p.t.Fatalf("%v: %v", args, err)
	}
	return v
}

// remaining returns the third integer of an RL.CHECK or RL.PEEK reply.
func (p *proc) remaining(args ...any) int64 {
	p.t.Helper()
	v, ok := p.do(args...).([]any)
	if !ok || len(v) != 5 {
		p.t.Fatalf("%v: reply %v", args, v)
	}
	return v[2].(int64)
}

// TestRestartKeepsCountsAndRules: 7 hits on fixed 10 per 366 days (see
// testutil.NoRollover), SIGTERM, restart on the same directory: the next check has
// exactly 2 remaining. Rules made over RESP and HTTP survive SIGTERM, and
// kill -9 right after they were acknowledged.
func TestRestartKeepsCountsAndRules(t *testing.T) {
	parallel(t)
	bin, dir := buildBinary(t), t.TempDir()
	p := startProc(t, bin, dir)
	for i := 0; i < 7; i++ {
		p.do("RL.CHECK", "k", "fixed", 10, testutil.NoRollover)
	}
	p.do("RL.RULE.SET", "resp-rule", `{"target":"/a","tier":"*","key_type":"ip","algo":"token","limit":5,"window":"1m"}`)
	postRule(t, p, `{"id":"http-rule","target":"/b","tier":"free","key_type":"user","algo":"gcra","limit":9,"window":"1h"}`)
	p.stop()

	p = startProc(t, bin, dir)
	if r := p.remaining("RL.CHECK", "k", "fixed", 10, testutil.NoRollover); r != 2 {
		t.Fatalf("after SIGTERM and restart: remaining %d, want 2", r)
	}
	assertRules(t, p, "http-rule", "resp-rule")
	p.do("RL.RULE.SET", "resp-rule-2", `{"target":"/c","tier":"*","key_type":"ip","algo":"fixed","limit":1,"window":"1s"}`)
	postRule(t, p, `{"id":"http-rule-2","target":"/d","tier":"*","key_type":"ip","algo":"leaky","limit":3,"window":"1m"}`)
	p.do("RL.RULE.DEL", "resp-rule")
	p.kill()

	p = startProc(t, bin, dir)
	assertRules(t, p, "http-rule", "http-rule-2", "resp-rule-2")
	if r := p.remaining("RL.PEEK", "k", "fixed", 10, testutil.NoRollover); r != 2 {
		t.Fatalf("after kill -9: remaining %d, want 2", r)
	}
	p.stop()
}

func postRule(t *testing.T, p *proc, body string) {
	t.Helper()
	res, err := http.Post("http://"+p.http+"/rules", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("POST /rules: %s", res.Status)
	}
}

func assertRules(t *testing.T, p *proc, want ...string) {
	t.Helper()
	var ids []string
	for _, js := range p.do("RL.RULE.LIST").([]any) {
		s := js.(string)
		i := strings.Index(s, `"id":"`) + 6
		ids = append(ids, s[i:i+strings.IndexByte(s[i:], '"')])
	}
	sort.Strings(ids)
	if strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Fatalf("rules %v, want %v\n%s", ids, want, p.logs)
	}
}

// TestBadDataDirectoryRefusesToStart: a directory whose database is gone
// or unreadable is refused with a line that names it, never started empty.
func TestBadDataDirectoryRefusesToStart(t *testing.T) {
	parallel(t)
	bin := buildBinary(t)
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, db string)
		want  string
	}{
		{"database removed", func(t *testing.T, db string) { os.RemoveAll(db) }, "lost its database"},
		{"manifest garbled", func(t *testing.T, db string) { garble(t, newest(t, db, "MANIFEST-*"), 0, 4096) }, "is damaged"},
		{"another node's directory", nil, "belongs to another node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := startProc(t, bin, dir)
			p.do("RL.CHECK", "k", "token", 10, "1h")
			p.stop()
			args := []string{"--listen", testutil.FreeAddr(t), "--http", "", "--data-dir", dir}
			if tc.spoil != nil {
				tc.spoil(t, filepath.Join(dir, "db"))
			} else {
				args = append(args, "--node-id", "other")
			}
			out, err := exec.Command(bin, args...).CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), dir) {
				t.Fatalf("start: err %v, output %q; want an exit naming %s and %q", err, out, dir, tc.want)
			}
		})
	}
}

// TestCorruptLogTail: the newest WAL of the database cut short or with
// garbled bytes at its end, as a crash mid-write or a bad sector leaves it:
// the node starts with every change committed before that run (or refuses
// with a clear error), never with an empty state.
func TestCorruptLogTail(t *testing.T) {
	parallel(t)
	bin := buildBinary(t)
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, wal string)
	}{
		{"cut", func(t *testing.T, wal string) { cut(t, wal, 100) }},
		{"garbled", func(t *testing.T, wal string) { garble(t, wal, -200, 100) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := startProc(t, bin, dir)
			for i := 0; i < 5; i++ {
				p.do("RL.CHECK", "before", "fixed", 10, testutil.NoRollover)
			}
			p.stop()
			p = startProc(t, bin, dir, "--consistency", "strong")
			for i := 0; i < 50; i++ {
				p.do("RL.CHECK", fmt.Sprint("during:", i), "token", 10, "1h")
			}
			p.kill()
			tc.spoil(t, newest(t, filepath.Join(dir, "db"), "*.log"))
			q, failed := tryStart(t, bin, dir)
			if failed != "" {
				if !strings.Contains(failed, dir) {
					t.Fatalf("refused without naming the directory: %s", failed)
				}
				t.Logf("refused, clearly: %s", failed)
				return
			}
			if r := q.remaining("RL.PEEK", "before", "fixed", 10, testutil.NoRollover); r != 5 {
				t.Fatalf("the run before the damaged one: remaining %d, want 5\n%s", r, q.logs)
			}
			q.stop()
		})
	}
}

// tryStart starts bin on dir with extra flags; it returns the process, or
// the output of a start that exited.
func tryStart(t *testing.T, bin, dir string, extra ...string) (*proc, string) {
	t.Helper()
	resp := testutil.FreeAddr(t)
	cmd := exec.Command(bin, append([]string{"--listen", resp, "--http", "", "--data-dir", dir}, extra...)...)
	logs := &logbuf.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	c := redis.NewClient(&redis.Options{Addr: resp, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	deadline := time.Now().Add(20 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		select {
		case <-done:
			return nil, logs.String()
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("neither started nor exited within 20s\n%s", logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return &proc{t: t, cmd: cmd, logs: logs, resp: resp, client: c, done: done}, ""
}

// newest returns the newest file in dir matching pattern.
func newest(t *testing.T, dir, pattern string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, pattern))
	if len(files) == 0 {
		t.Fatalf("no %s in %s", pattern, dir)
	}
	sort.Strings(files)
	return files[len(files)-1]
}

// cut removes the last n bytes of path.
func cut(t *testing.T, path string, n int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, max(0, fi.Size()-n)); err != nil {
		t.Fatal(err)
	}
}

// garble overwrites n bytes of path at off (from the end if negative).
func garble(t *testing.T, path string, off, n int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off = max(0, int64(len(data))+off)
	}
	for i := off; i < off+n && i < int64(len(data)); i++ {
		data[i] ^= 0x5a
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
