package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testutil"
)

// The damaged-directory tests run the real binary. A directory whose
// write-ahead log or tables lost or cut a file is refused at start with
// one line that names the file (exit status non-zero, never a panic);
// with --accept-data-loss the node starts on what is left, logs the loss
// at ERROR and serves; a start after that is clean.

// wals returns the WAL files of a data directory's database, oldest first.
func wals(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "db", "*.log"))
	sort.Strings(m)
	if len(m) == 0 {
		t.Fatalf("no WAL in %s", dir)
	}
	return m
}

// walsSettle waits until the WALs in dir have not changed (names and
// sizes) for quiet, or fails the test after limit.
func walsSettle(t *testing.T, dir string, quiet, limit time.Duration) {
	t.Helper()
	state := func() string {
		var b strings.Builder
		for _, w := range wals(t, dir) {
			fi, err := os.Stat(w)
			if err == nil {
				fmt.Fprintf(&b, "%s=%d ", filepath.Base(w), fi.Size())
			}
		}
		return b.String()
	}
	last, since, deadline := state(), time.Now(), time.Now().Add(limit)
	for time.Since(since) < quiet {
		if time.Now().After(deadline) {
			t.Fatalf("the WALs still changed %v after the load stopped: %s", limit, last)
		}
		time.Sleep(50 * time.Millisecond)
		if now := state(); now != last {
			last, since = now, time.Now()
		}
	}
}

// refused runs bin on dir with extra flags and fails unless it exits with
// one line of output, starting "rlserver: ", that holds every one of want;
// it returns that line.
func refused(t *testing.T, bin, dir string, want []string, extra ...string) string {
	t.Helper()
	q, out := tryStart(t, bin, dir, extra...)
	if q != nil {
		q.kill()
		t.Fatalf("started on a damaged directory (want a refusal naming %q)\n%s", want, q.logs)
	}
	if strings.Contains(out, "panic") || strings.Contains(out, "goroutine ") {
		t.Fatalf("a panic, not a refusal:\n%s", out)
	}
	line := strings.TrimSpace(out)
	if strings.Contains(line, "\n") || !strings.HasPrefix(line, "rlserver: ") {
		t.Fatalf("want one line starting \"rlserver: \", got:\n%s", out)
	}
	for _, w := range want {
		if !strings.Contains(line, w) {
			t.Errorf("the refusal does not name %q: %s", w, line)
		}
	}
	return line
}

// errorLines returns the lines of a log at level ERROR.
func errorLines(logs string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "level=ERROR") {
			out = append(out, l)
		}
	}
	return out
}

// TestDamagedWALs is the report's case: strong-mode load, every reply
// received, a pause longer than the mark interval, kill -9; then the
// newest WAL removed or cut (to nothing, at 400,000 bytes, inside its last
// record) and the oldest WAL removed. Each is refused with one line naming
// the WAL, instead of a silent start without acknowledged admissions (or,
// for the oldest, a panic in raft); with --accept-data-loss the node
// starts, logs at ERROR what was lost, and serves, and a plain start
// after it is clean.
func TestDamagedWALs(t *testing.T) {
	parallel(t)
	bin, seed := buildBinary(t), t.TempDir()
	flags := []string{"--consistency", "strong", "--max-log-limit", fmt.Sprint(crashLimit)}
	p := startProc(t, bin, seed, flags...)
	l := startLoad(t, p.resp)
	// Two seconds of load, and on a busy machine as long as it takes the
	// node to write a third WAL (the newest and the oldest are cut below).
	time.Sleep(2 * time.Second)
	testutil.WaitFor(t, 60*time.Second, "a third WAL under the load", func() bool { return len(wals(t, seed)) >= 3 })
	l.stop.Store(true)
	l.wg.Wait()
	// The mark's next round covers every reply, and what the load set off
	// (a snapshot, the log's truncation after it) ends: on a busy machine
	// either can take longer than a fixed pause.
	walsSettle(t, seed, 500*time.Millisecond, 20*time.Second)
	p.kill()
	if n := len(wals(t, seed)); n < 2 {
		t.Fatalf("%d WALs after the load: the test proves little", n)
	}
	cut := func(size func(int64) int64) func(string) error {
		return func(path string) error {
			fi, err := os.Stat(path)
			if err != nil {
				return err
			}
			return os.Truncate(path, size(fi.Size()))
		}
	}
	for _, tc := range []struct {
		name   string
		oldest bool
		spoil  func(path string) error
		want   string
	}{
		{"newest removed", false, os.Remove, "is missing"},
		{"newest cut to 0 bytes", false, cut(func(int64) int64 { return 0 }), "lost records synced before"},
		{"newest cut to 400000 bytes", false, cut(func(n int64) int64 { return min(n/2, 400000) }), "lost records synced before"},
		{"newest cut inside its last record", false, cut(func(n int64) int64 { return n - 5 }), "lost records synced before"},
		{"oldest removed", true, os.Remove, "is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testutil.CopyDir(t, seed)
			ws := wals(t, dir)
			wal := ws[len(ws)-1]
			if tc.oldest {
				wal = ws[0]
			}
			if err := tc.spoil(wal); err != nil {
				t.Fatal(err)
			}
			line := refused(t, bin, dir, []string{"is damaged", filepath.Base(wal), tc.want, "--accept-data-loss"}, flags...)
			t.Logf("refused: %s", line)
			q := startProc(t, bin, dir, append(flags, "--accept-data-loss")...)
			errs := errorLines(q.logs.String())
			if len(errs) == 0 || !strings.Contains(strings.Join(errs, "\n"), filepath.Base(wal)) {
				t.Fatalf("with --accept-data-loss: ERROR lines %q, want one naming %s", errs, filepath.Base(wal))
			}
			missing, tally := l.compare(t, q)
			t.Logf("with --accept-data-loss: %d of %d acknowledged admissions missing; ERROR lines:\n%s",
				missing, tally, strings.Join(errs, "\n"))
			q.stop()
			r := startProc(t, bin, dir, flags...)
			if errs := errorLines(r.logs.String()); len(errs) > 0 {
				t.Fatalf("the start after the accepted one logged %q", errs)
			}
			r.stop()
		})
	}
}

// TestDamagedFiles: a directory with tables and blob files (fast mode, keys
// of a KiB, so that the log fills memtables quickly), stopped cleanly; then
// each kind of file removed or cut. Each is refused with one line that
// names the file, never a panic (Pebble panics when it reads a value from
// a missing blob file); the refusals that --accept-data-loss can go past
// do, and the node serves.
func TestDamagedFiles(t *testing.T) {
	parallel(t)
	bin, seed := buildBinary(t), t.TempDir()
	p := startProc(t, bin, seed)
	key := strings.Repeat("k", 1000)
	for b := 0; b < 80; b++ {
		pipe := p.client.Pipeline()
		for i := 0; i < 500; i++ {
			pipe.Do(context.Background(), "RL.CHECK", fmt.Sprintf("%s:%d", key, b*500+i), "fixed", 100, "1h")
		}
		if _, err := pipe.Exec(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	p.stop()
	first := func(t *testing.T, dir, pattern string) string {
		m, _ := filepath.Glob(filepath.Join(dir, "db", pattern))
		if len(m) == 0 {
			t.Fatalf("no %s in the database", pattern)
		}
		sort.Strings(m)
		return m[0]
	}
	first(t, seed, "*.sst")
	first(t, seed, "*.blob")
	halve := func(path string) error {
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		return os.Truncate(path, fi.Size()/2)
	}
	for _, tc := range []struct {
		name   string
		file   string // a pattern under the data directory
		spoil  func(path string) error
		want   string // "" is the file's base name
		accept bool   // --accept-data-loss starts on it
		starts bool   // nothing was lost: it starts, without a flag
		still  string // with --accept-data-loss the refusal holds this; default "cannot be repaired"
	}{
		{name: "table removed", file: "db/*.sst", spoil: os.Remove, want: "type sstable"},
		{name: "table cut", file: "db/*.sst", spoil: halve},
		{name: "blob file removed", file: "db/*.blob", spoil: os.Remove},
		{name: "blob file cut", file: "db/*.blob", spoil: halve},
		{name: "MANIFEST removed", file: "db/MANIFEST-*", spoil: os.Remove},
		{name: "manifest marker removed", file: "db/marker.manifest.*", spoil: os.Remove, want: "marker.manifest"},
		{name: "OPTIONS cut", file: "db/OPTIONS-*", spoil: func(p string) error { return os.Truncate(p, 1000) }, accept: true},
		{name: "mark file removed", file: "rlserver.mark", spoil: os.Remove, accept: true},
		{name: "mark file cut", file: "rlserver.mark", spoil: halve, accept: true},
		{name: "node id file garbled", file: "rlserver.id", spoil: func(p string) error { return os.WriteFile(p, []byte("nodeX\n"), 0o644) },
			want: "rlserver.mark", still: "belongs to another node"},
		{name: "node id file removed", file: "rlserver.id", spoil: os.Remove, starts: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testutil.CopyDir(t, seed)
			path := filepath.Join(dir, tc.file)
			if strings.HasPrefix(tc.file, "db/") {
				path = first(t, dir, strings.TrimPrefix(tc.file, "db/"))
			}
			if err := tc.spoil(path); err != nil {
				t.Fatal(err)
			}
			if tc.starts {
				startProc(t, bin, dir).stop()
				return
			}
			want := cmp.Or(tc.want, filepath.Base(path))
			line := refused(t, bin, dir, []string{want})
			t.Logf("refused: %s", line)
			if tc.accept {
				q := startProc(t, bin, dir, "--accept-data-loss")
				if errs := errorLines(q.logs.String()); len(errs) == 0 {
					t.Errorf("with --accept-data-loss: nothing logged at ERROR")
				}
				q.stop()
				return
			}
			refused(t, bin, dir, []string{want, cmp.Or(tc.still, "cannot be repaired")}, "--accept-data-loss")
		})
	}
}
