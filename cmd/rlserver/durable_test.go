package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/logbuf"
	"github.com/rlserver/rlserver/internal/rlproc"
	"github.com/rlserver/rlserver/internal/testutil"
)

// proc is an rlserver process started by a test: the rlproc.Proc that
// runs it, the addresses it serves and a client of its RESP address.
type proc struct {
	t       testing.TB
	process *rlproc.Proc
	logs    *logbuf.Buffer // process.Log(): its stdout and stderr
	resp    string
	http    string
	bin     string
	dir     string
	tls     *tls.Config // of its client, if it serves RESP over TLS
	client  *redis.Client
	token   string // the bearer token of its admin endpoints (GET /cluster), if it has one
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
	return launch(t, bin, dir, nil, func(resp, http string) []string {
		return append([]string{"--listen", resp, "--http", http, "--data-dir", dir}, extra...)
	})
}

// launch starts bin with the flags args returns for a RESP and an HTTP
// address on free ports (rlproc.OnFreeAddrs: started again on others if
// another process took one), and waits for PING through a client with
// tc (nil: plain TCP); dir is the proc's data directory.
func launch(t testing.TB, bin, dir string, tc *tls.Config, args func(resp, http string) []string) (*proc, error) {
	var p *proc
	_, err := rlproc.OnFreeAddrs(2, func(addrs []string) (*rlproc.Proc, error) {
		p = &proc{t: t, resp: addrs[0], http: addrs[1], bin: bin, dir: dir, tls: tc}
		err := p.start(args(p.resp, p.http))
		return p.process, err
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// restartProc starts old's binary again on its data directory with
// --data-dir and extra flags alone (a cluster node's directory remembers
// its addresses), and waits for PING at old's address.
func restartProc(t testing.TB, old *proc, extra ...string) *proc {
	t.Helper()
	p := &proc{t: t, resp: old.resp, http: old.http, bin: old.bin, dir: old.dir}
	return p.run(append([]string{"--data-dir", old.dir}, extra...))
}

// run starts p's binary with args and waits for PING at p.resp (see
// start); it fails the test if the binary does not come up.
func (p *proc) run(args []string) *proc {
	p.t.Helper()
	if err := p.start(args); err != nil {
		p.t.Fatal(err)
	}
	return p
}

// start starts p's binary with args and waits for PING at p.resp. The
// secrets among args (which a data directory never remembers) are the
// password its client AUTHs with and the token it reads GET /cluster with.
// It returns an error, with the log, if the binary exits or does not
// answer within 20 s (rlproc.Proc.WaitPing); the process is killed when
// the test ends.
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
	rp, err := rlproc.Start("rlserver", p.bin, args, nil)
	if err != nil {
		return err
	}
	p.process, p.logs = rp, rp.Log()
	noteLogs(t, p.logs)
	t.Cleanup(func() { rp.Signal(os.Kill) })
	c := redis.NewClient(&redis.Options{Addr: p.resp, MaxRetries: -1, Password: pass, TLSConfig: p.tls})
	p.client = c
	t.Cleanup(func() { c.Close() })
	return rp.WaitPing(p.resp, 20*time.Second, func() error { return c.Ping(context.Background()).Err() })
}

// stop sends SIGTERM and asserts a clean exit within 30 s.
func (p *proc) stop() {
	p.t.Helper()
	if err := p.process.Stop(30 * time.Second); err != nil {
		p.t.Fatalf("%v\n%s", err, p.logs)
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	p.t.Helper()
	p.process.Kill()
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
	p := &proc{t: t, resp: testutil.FreeAddr(t), bin: bin, dir: dir}
	err := p.start(append([]string{"--listen", p.resp, "--http", "", "--data-dir", dir}, extra...))
	switch {
	case errors.Is(err, rlproc.ErrExited):
		return nil, p.logs.String()
	case err != nil:
		t.Fatalf("neither started nor exited: %v", err)
	}
	return p, ""
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
