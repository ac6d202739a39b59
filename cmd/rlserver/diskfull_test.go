package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/testutil"
)

// The full-disk tests run the real binary on a small tmpfs that the test
// mounts, and fill it as another process would.

// Flags of the full-disk tests: a reserve and a ballast small enough for
// a 512 MiB tmpfs (Pebble preallocates each WAL at 110% of its 32 MiB
// memtable, and while memtables ramp up after a start several WALs are
// alive at once), and a snapshot taken often, so that snapshots run
// while the disk fills.
var diskFlags = []string{"--min-free-disk", "48mb", "--disk-ballast", "16mb", "--snapshot-entries", "256",
	"--snapshot-interval", "200ms", "--max-log-limit", fmt.Sprint(crashLimit)}

// mountTmpfs mounts a tmpfs of size on a new directory, unmounted when
// the test ends (after the processes it started are killed). It skips the
// test when not run as root; CI runs as root.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs to fill needs root; run the full-disk tests as root (CI does)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v\n%s", dir, err, out)
	}
	t.Cleanup(func() {
		// The processes were killed, maybe not yet reaped: wait for the
		// mount to be free, then detach it anyway.
		for i := 0; i < 50; i++ {
			if exec.Command("umount", dir).Run() == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", dir, err, out)
		}
	})
	return dir
}

// fillDisk takes every free byte of dir's filesystem, as another process
// filling the disk would: fallocate calls of most of what statfs says is
// free (tmpfs gives back all of a call that fails, so a call that meets
// the node's own writes is tried again at half the size, never more),
// then writes until the filesystem refuses. It returns the filler file's path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil || fs.Type != tmpfsMagic {
		t.Fatalf("%s is not the tmpfs the test mounted (statfs type %#x, %v): refusing to fill it", dir, fs.Type, err)
	}
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var size int64
	for part := int64(1) << 40; part >= 1<<20; {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		free := int64(st.Bavail) * st.Bsize
		n := min(free-free/16, part) // the rest in the next rounds
		if free < 1<<20 {
			break
		}
		switch err := syscall.Fallocate(int(f.Fd()), 0, size, n); {
		case err == nil:
			size += n
		case errors.Is(err, syscall.ENOSPC):
			part = n / 2 // given back whole: the node wrote meanwhile
		default:
			t.Fatalf("fallocate %d bytes: %v", n, err)
		}
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			return path
		}
	}
}

// tmpfsMagic is statfs's f_type of a tmpfs (TMPFS_MAGIC).
const tmpfsMagic = 0x01021994

// watchBelow samples dir's free space every millisecond and sends the
// moment it is first below n (or after 20s, the moment it gave up).
func watchBelow(dir string, n int64) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			var st syscall.Statfs_t
			if syscall.Statfs(dir, &st) == nil && int64(st.Bavail)*st.Bsize < n {
				break
			}
			time.Sleep(time.Millisecond)
		}
		ch <- time.Now()
	}()
	return ch
}

// diskLoad is crashLoad's clients, which go on after a MISCONF reply (the
// refused check is counted in its key's inflight, as one that may have
// awaitMisconf waits up to 10 s, after the disk was filled, for l's first
// MISCONF answer from p, failing the test with p's log if none comes.
func awaitMisconf(t *testing.T, l *diskLoad, p *proc) {
	t.Helper()
	if testutil.Poll(10*time.Second, func() error {
		if l.misconf.Load() == 0 {
			return errors.New("no MISCONF yet")
		}
		return nil
	}) != nil {
		t.Fatalf("no MISCONF within 10s of filling the disk\n%s", p.logs)
	}
}

// been admitted) and record any other error.
type diskLoad struct {
	*crashLoad
	misconf   atomic.Int64
	firstMisc atomic.Int64 // Unix ns of the first MISCONF reply
	mu        sync.Mutex
	others    []string // errors other than MISCONF
	allowedAt atomic.Int64
}

func startDiskLoad(t *testing.T, addr string) *diskLoad {
	d := &diskLoad{crashLoad: &crashLoad{keys: make([][]*crashKey, crashClients)}}
	l := d.crashLoad
	for c := range l.keys {
		for _, algo := range crashAlgos {
			for k := 0; k < crashKeys; k++ {
				l.keys[c] = append(l.keys[c], &crashKey{name: fmt.Sprintf("disk:%s:%d:%d", algo, c, k), algo: algo})
			}
		}
		l.wg.Add(1)
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1, ReadTimeout: 10 * time.Second})
		go d.client(rdb, l.keys[c])
	}
	return d
}

func (d *diskLoad) client(rdb *redis.Client, keys []*crashKey) {
	l := d.crashLoad
	defer l.wg.Done()
	defer rdb.Close()
	for i := 0; !l.stop.Load(); i++ {
		k := keys[i%len(keys)]
		k.inflight++
		v, err := rdb.Do(context.Background(), "RL.CHECK", k.name, k.algo, crashLimit, crashWindow).Slice()
		switch {
		case err != nil && strings.HasPrefix(err.Error(), "MISCONF "):
			d.misconf.Add(1)
			d.firstMisc.CompareAndSwap(0, time.Now().UnixNano())
			time.Sleep(time.Millisecond) // as a client that backs off
			continue
		case err != nil:
			d.mu.Lock()
			d.others = append(d.others, err.Error())
			d.mu.Unlock()
			return
		}
		k.inflight--
		l.total.Add(1)
		if v[0] == int64(1) {
			k.tally++
			k.acks = append(k.acks, time.Now())
			d.allowedAt.Store(time.Now().UnixNano())
		}
	}
}

// TestDiskFull fills the data directory's disk under load, in strong and
// fast mode: the clients get -MISCONF and no other error, the server does
// not crash, PING, RL.PEEK, INFO, /readyz and /metrics answer and show the
// condition, the log stays short, service resumes once the space is freed,
// SIGTERM exits 0, and after a restart every acknowledged admission is
// there (a graceful stop forgets nothing in either mode).
func TestDiskFull(t *testing.T) {
	parallel(t)
	bin := buildBinary(t)
	for _, mode := range []string{"strong", "fast"} {
		t.Run(mode, func(t *testing.T) {
			mnt := mountTmpfs(t, "512m")
			dir := filepath.Join(mnt, "data")
			flags := append([]string{"--consistency", mode}, diskFlags...)
			p := startProc(t, bin, dir, flags...)
			for i := 0; i < 5; i++ {
				p.do("RL.CHECK", "probe", "fixed", 1000, testutil.NoRollover)
			}
			l := startDiskLoad(t, p.resp)
			time.Sleep(1500 * time.Millisecond)
			if l.total.Load() < 1000 {
				t.Fatalf("only %d checks before the fill", l.total.Load())
			}

			logsBefore := p.logs.String()
			crossed := watchBelow(mnt, 48<<20) // --min-free-disk
			fillStart := time.Now()
			filler := fillDisk(t, mnt)
			filled := time.Now()
			awaitMisconf(t, l, p)
			firstMisc := time.Unix(0, l.firstMisc.Load())
			assertServesReads(t, p)
			assertShowsCondition(t, p, true)
			time.Sleep(time.Second)
			quiet := p.logs.String() // the condition goes on: the log must not grow
			time.Sleep(time.Second)
			select {
			case <-p.process.Exited():
				t.Fatalf("the server exited on a full disk: %v\n%s", p.process.Err(), p.logs)
			default:
			}
			assertServesReads(t, p)
			during := diskLines(p.logs.String()[len(logsBefore):])
			if grew := diskLines(p.logs.String()[len(quiet):]); grew > 0 || during > 8 {
				t.Fatalf("%d log lines during the condition, %d in its last second; want a few, then none:\n%s", during, grew, p.logs.String()[len(logsBefore):])
			}

			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			freed := time.Now()
			if r := waitCheck(t, p, "probe", 10*time.Second); r != 994 {
				t.Fatalf("probe after the space came back: remaining %d, want 994", r)
			}
			resumed := time.Since(freed)
			assertShowsCondition(t, p, false)
			time.Sleep(500 * time.Millisecond)
			l.stop.Store(true)
			l.wg.Wait()
			if len(l.others) > 0 {
				t.Fatalf("clients got errors other than MISCONF: %q", l.others)
			}
			if time.Unix(0, l.allowedAt.Load()).Before(freed) {
				t.Fatalf("no check was allowed after the space came back")
			}
			p.stop()
			logs := p.logs.String()
			lines := strings.Count(logs, "\n")
			t.Logf("%s: %d checks, %d MISCONF; the fill took %s; first MISCONF %s after the free space went below --min-free-disk (%s before the fill ended); resumed %s after the space was freed; %d log lines during the condition, %d in all",
				mode, l.total.Load(), l.misconf.Load(), filled.Sub(fillStart).Round(time.Millisecond),
				firstMisc.Sub(<-crossed).Round(time.Millisecond), filled.Sub(firstMisc).Round(time.Millisecond),
				resumed.Round(time.Millisecond), during, lines)
			if testing.Verbose() {
				t.Logf("the server's log:\n%s", logs)
			}
			if strings.Count(logs, "pebble background error") > 2 || strings.Contains(logs, "panic") {
				t.Fatalf("background errors repeated, or a panic:\n%s", logs)
			}

			q := startProc(t, bin, dir, flags...)
			missing, tally := l.compare(t, q)
			t.Logf("%s: %d allowed, %d missing after SIGTERM and restart", mode, tally, missing)
			if missing != 0 {
				t.Fatalf("%s mode forgot %d acknowledged admissions of %d", mode, missing, tally)
			}
			if r := q.remaining("RL.PEEK", "probe", "fixed", 1000, testutil.NoRollover); r != 994 {
				t.Fatalf("probe after restart: remaining %d, want 994", r)
			}
			q.stop()
		})
	}
}

// diskLines counts the lines of logs, less those of snapshots (the test
// takes one every few hundred changes, and a change may slip in before
// the disk is full).
func diskLines(logs string) int {
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		if line != "" && !strings.Contains(line, "snapshot") {
			n++
		}
	}
	return n
}

// assertServesReads: PING, RL.PEEK (of the probe key, charged 5 times
// before the fill) and INFO answer while the disk is full.
func assertServesReads(t *testing.T, p *proc) {
	t.Helper()
	if v := p.do("PING"); v != "PONG" {
		t.Fatalf("PING: %v", v)
	}
	if r := p.remaining("RL.PEEK", "probe", "fixed", 1000, testutil.NoRollover); r != 995 {
		t.Fatalf("RL.PEEK probe on a full disk: remaining %d, want 995", r)
	}
}

// assertShowsCondition: INFO persistence, /readyz, /metrics, the status
// page's figures (writes) and an HTTP check show the condition (low) or
// its absence.
func assertShowsCondition(t *testing.T, p *proc, low bool) {
	t.Helper()
	info := p.do("INFO", "persistence").(string)
	readyz, rcode := httpDo(t, "GET", "http://"+p.http+"/readyz", "")
	metrics, _ := httpDo(t, "GET", "http://"+p.http+"/metrics", "")
	check, ccode := httpDo(t, "POST", "http://"+p.http+"/v1/check", `{"key":"http-probe","algo":"fixed","limit":10,"window":"1h"}`)
	st, err := stats(p)
	if err != nil {
		t.Fatalf("GET /v1/stats: %v", err)
	}
	if (st.Writes == "ok") == low || low && !strings.Contains(st.Writes, "MISCONF") {
		t.Fatalf("GET /v1/stats: writes %q with the disk low %v", st.Writes, low)
	}
	if low {
		if !strings.Contains(info, "rl_disk_status:low") || !strings.Contains(info, "rl_log_status:disk_low") ||
			rcode != http.StatusServiceUnavailable || !strings.Contains(readyz, "MISCONF disk space low") ||
			!strings.Contains(metrics, "rlserver_disk_low 1") ||
			ccode != http.StatusServiceUnavailable || !strings.Contains(check, `"error":"MISCONF`) {
			t.Fatalf("the condition does not show:\nINFO %s\n/readyz %d %s\n/v1/check %d %s\nmetric %v", info, rcode, readyz, ccode, check,
				strings.Contains(metrics, "rlserver_disk_low 1"))
		}
		return
	}
	if !strings.Contains(info, "rl_disk_status:ok") || !strings.Contains(info, "rl_log_status:ok") || rcode != http.StatusOK ||
		!strings.Contains(metrics, "rlserver_disk_low 0") || ccode != http.StatusOK {
		t.Fatalf("the condition did not clear:\nINFO %s\n/readyz %d %s\n/v1/check %d %s", info, rcode, readyz, ccode, check)
	}
}

// httpDo sends a request with an optional JSON body and returns the
// response's body and status.
func httpDo(t *testing.T, method, url, body string) (string, int) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b), res.StatusCode
}

// waitCheck charges key (fixed, 1000 per 366 days: see testutil.NoRollover) until
// the server admits it instead of answering MISCONF, and returns the
// remaining count.
func waitCheck(t *testing.T, p *proc, key string, within time.Duration) int64 {
	t.Helper()
	var v []any
	if err := testutil.Poll(within, func() (err error) {
		v, err = p.client.Do(context.Background(), "RL.CHECK", key, "fixed", 1000, testutil.NoRollover).Slice()
		if err != nil && !strings.HasPrefix(err.Error(), "MISCONF ") {
			return testutil.Stop(err)
		}
		return err
	}); err != nil {
		t.Fatalf("RL.CHECK %s: %v\n%s", key, err, p.logs)
	}
	return v[2].(int64)
}

// TestStartOnFullDisk: on a disk with no room, a new data directory is
// refused at once with one clear line; a data directory with its ballast
// starts read-only (the ballast is given up): PING and RL.PEEK answer with
// the state it held, changes get MISCONF, /readyz says why, and once space
// is freed it serves changes again and stops with exit 0 on SIGTERM.
func TestStartOnFullDisk(t *testing.T) {
	parallel(t)
	bin := buildBinary(t)
	mnt := mountTmpfs(t, "256m")
	dir := filepath.Join(mnt, "data")
	p := startProc(t, bin, dir, diskFlags...)
	for i := 0; i < 5; i++ {
		p.do("RL.CHECK", "probe", "fixed", 1000, testutil.NoRollover)
	}
	p.stop()
	filler := fillDisk(t, mnt)

	fresh := filepath.Join(mnt, "fresh")
	start := time.Now()
	out, err := exec.Command(bin, append([]string{"--listen", testutil.FreeAddr(t), "--http", "", "--data-dir", fresh}, diskFlags...)...).CombinedOutput()
	took := time.Since(start)
	var exit *exec.ExitError
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if !errors.As(err, &exit) || len(lines) != 1 || !strings.Contains(lines[0], "--min-free-disk") || !strings.Contains(lines[0], fresh) {
		t.Fatalf("start on a full disk: %v after %s, output %q; want an exit with one line naming the directory and --min-free-disk", err, took, out)
	}
	t.Logf("new directory on a full disk: exit %d after %s: %s", exit.ExitCode(), took.Round(time.Millisecond), lines[0])

	q := startProc(t, bin, dir, diskFlags...)
	assertServesReads(t, q)
	if _, err := q.client.Do(context.Background(), "RL.CHECK", "probe", "fixed", 1000, testutil.NoRollover).Result(); err == nil ||
		!strings.HasPrefix(err.Error(), "MISCONF ") {
		t.Fatalf("RL.CHECK on a read-only start: %v, want MISCONF", err)
	}
	assertShowsCondition(t, q, true)
	if _, err := os.Stat(filepath.Join(dir, "rlserver.ballast")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the ballast is still there (%v): the start should have used its room", err)
	}
	if !strings.Contains(q.logs.String(), "started read-only") {
		t.Fatalf("the log does not say the start is read-only:\n%s", q.logs)
	}
	os.Remove(filler)
	if r := waitCheck(t, q, "probe", 10*time.Second); r != 994 {
		t.Fatalf("probe after the space came back: remaining %d, want 994", r)
	}
	assertShowsCondition(t, q, false)
	q.stop()
}

// TestSignalDuringAStuckStartExits: a signal during a start that cannot
// end (abandonStart's ctx done, started never closed) exits the process
// with status 1 and one line after the grace; a start that ends in time
// keeps the process.
func TestSignalDuringAStuckStartExits(t *testing.T) {
	parallel(t)
	if os.Getenv("RL_TEST_ABANDON") != "" {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		started := make(chan struct{})
		if os.Getenv("RL_TEST_ABANDON") == "in-time" {
			go func() { time.Sleep(10 * time.Millisecond); close(started) }()
		}
		abandonStart(ctx, started, 200*time.Millisecond)
		time.Sleep(400 * time.Millisecond)
		os.Exit(0)
	}
	for mode, wantExit := range map[string]int{"stuck": 1, "in-time": 0} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSignalDuringAStuckStartExits$")
		cmd.Env = append(os.Environ(), "RL_TEST_ABANDON="+mode)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		}
		if code != wantExit || (wantExit == 1 && (!strings.Contains(string(out), "did not end within 200ms") || time.Since(start) > 5*time.Second)) {
			t.Fatalf("%s: exit %d after %s, output %q; want exit %d", mode, code, time.Since(start), out, wantExit)
		}
	}
}

// TestKill9OnFullDiskFastForgetsAtMostTheLastIntervals: in fast mode, a
// kill -9 while the disk is full (checks refused, the changes admitted
// before the refusal on their way to the log) and a restart once space is
// back forget at most what TestKill9FastForgetsAtMostTheLastIntervals
// allows: the admissions acknowledged within three flush intervals of
// the last one.
func TestKill9OnFullDiskFastForgetsAtMostTheLastIntervals(t *testing.T) {
	alone(t)
	bin := buildBinary(t)
	mnt := mountTmpfs(t, "512m")
	dir := filepath.Join(mnt, "data")
	const interval = 100 * time.Millisecond
	flags := append([]string{"--consistency", "fast", "--flush-interval", interval.String()}, diskFlags...)
	p := startProc(t, bin, dir, flags...)
	l := startDiskLoad(t, p.resp)
	time.Sleep(1500 * time.Millisecond)
	filler := fillDisk(t, mnt)
	awaitMisconf(t, l, p)
	time.Sleep(300 * time.Millisecond)
	p.kill()
	l.stop.Store(true)
	l.wg.Wait()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	q := startProc(t, bin, dir, flags...)
	missing, tally := l.compare(t, q)
	window := 3 * interval
	bound := l.acksSince(l.lastAck().Add(-window))
	t.Logf("fast, kill -9 on a full disk: %d checks, %d MISCONF, %d allowed, %d missing; bound %d (allowed within %s of the last reply)",
		l.total.Load(), l.misconf.Load(), tally, missing, bound, window)
	if missing > bound {
		t.Fatalf("forgot %d admissions, more than the %d acknowledged within %s of the last reply", missing, bound, window)
	}
	if bound >= tally/2 {
		t.Fatalf("the bound (%d of %d) says nothing: the load was too short", bound, tally)
	}
	q.stop()
}
