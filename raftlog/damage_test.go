package raftlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
)

// TestScan: Scan reports the bounds, the gaps between them and the
// entries that cannot be decoded, reading every one.
func TestScan(t *testing.T) {
	db := openMem(t)
	s := mustNew(t, db, 1)
	if sc, err := s.Scan(); err != nil || sc.Entries != 0 || sc.First != 0 || sc.Last != 0 {
		t.Fatalf("empty log: %+v %v", sc, err)
	}
	mustStore(t, s, entries(1, 3, 10))
	mustStore(t, s, entries(1, 14, 20))
	mustStore(t, s, entries(1, 22, 22))
	mustStore(t, mustNew(t, db, 2), entries(2, 1, 50)) // another group is not scanned
	// Garble the values of 5 and 6, and of 20, behind the Store's back.
	for _, i := range []uint64{5, 6, 20} {
		if err := db.Set(LogKey(1, i), []byte("garbage"), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := s.Scan()
	if err != nil {
		t.Fatal(err)
	}
	want := Scanned{First: 3, Last: 22, Entries: 16,
		Gaps:       []Range{{11, 13}, {21, 21}},
		Unreadable: []Range{{5, 6}, {20, 20}}}
	if fmt.Sprint(sc.First, sc.Last, sc.Entries, sc.Gaps, sc.Unreadable) != fmt.Sprint(want.First, want.Last, want.Entries, want.Gaps, want.Unreadable) {
		t.Fatalf("Scan = %+v, want %+v", sc, want)
	}
	if !errors.Is(sc.BadErr, ErrCorrupt) || !strings.Contains(sc.BadErr.Error(), "log 5") {
		t.Fatalf("BadErr %v, want ErrCorrupt naming entry 5", sc.BadErr)
	}
}

// TestGroups: the groups holding keys of a namespace, each found once.
func TestGroups(t *testing.T) {
	db := openMem(t)
	for _, g := range []uint32{7, 0, 3, 1 << 31} {
		mustStore(t, mustNew(t, db, g), entries(g, 1, 5))
	}
	mustNew(t, db, 9).SetUint64([]byte("CurrentTerm"), 1)
	got, err := Groups(db, NamespaceLog)
	if err != nil || fmt.Sprint(got) != fmt.Sprint([]uint32{0, 3, 7, 1 << 31}) {
		t.Fatalf("Groups(log) = %v %v", got, err)
	}
	if got, _ := Groups(db, NamespaceStable); fmt.Sprint(got) != "[9]" {
		t.Fatalf("Groups(stable) = %v", got)
	}
}

// walLog is a WALWatcher that checks its promise: a WAL it is told of
// exists, and one it is told is going has not gone yet.
type walLog struct {
	t    *testing.T
	fs   vfs.FS
	dir  string
	mu   sync.Mutex
	live []uint64
	seen int
	fail error // WALRemoving's answer
}

func (w *walLog) WALCreated(num uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.fs.Stat(filepath.Join(w.dir, WALName(num))); err != nil {
		w.t.Errorf("WALCreated(%d) before the file exists: %v", num, err)
	}
	w.live = append(w.live, num)
	w.seen++
}

func (w *walLog) WALRemoving(num uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.fs.Stat(filepath.Join(w.dir, WALName(num))); err != nil {
		w.t.Errorf("WALRemoving(%d) after the file is gone: %v", num, err)
	}
	if w.fail != nil {
		return w.fail
	}
	w.live = slices.DeleteFunc(w.live, func(n uint64) bool { return n == num })
	return nil
}

// check fails unless the WALs in the directory are exactly those the
// watcher holds.
func (w *walLog) check(when string) {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	files, err := WALFiles(w.fs, w.dir)
	live := slices.Sorted(slices.Values(w.live))
	if err != nil || fmt.Sprint(files) != fmt.Sprint(live) {
		w.t.Fatalf("%s: WAL files %v, the watcher holds %v (%v)", when, files, live, err)
	}
}

// TestWALWatcher: through rotations (the first memtables are small),
// flushes, the reuse of obsolete WALs and a reopen, the watcher hears of
// every WAL created after it exists and of every WAL removed or reused
// before it goes, so that its list is the directory's. A watcher that
// refuses a removal keeps the file, and Pebble goes on.
func TestWALWatcher(t *testing.T) {
	fs, dir := vfs.Default, t.TempDir()
	w := &walLog{t: t, fs: fs, dir: dir}
	db, err := OpenDB(dir, Options{WALs: w})
	if err != nil {
		t.Fatal(err)
	}
	s := mustNew(t, db, 1)
	big := func(lo, hi uint64) []*raft.Log {
		ls := entries(1, lo, hi)
		for _, l := range ls {
			l.Data = make([]byte, 64<<10)
		}
		return ls
	}
	next := uint64(1)
	for round := 0; round < 6; round++ {
		mustStore(t, s, big(next, next+15)) // 1 MiB
		next += 16
		if round%2 == 1 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.check("after rotations and flushes")
	if w.seen < 3 {
		t.Fatalf("only %d WALs created: the test proves little", w.seen)
	}
	w.mu.Lock()
	w.fail = errors.New("refused")
	w.mu.Unlock()
	mustStore(t, s, big(next, next+31))
	next += 32
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	w.check("with removals refused")
	mustClose(t, db)
	w.mu.Lock()
	w.fail = nil
	w.mu.Unlock()
	db, err = OpenDB(dir, Options{WALs: w})
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, db)
	w.check("after a reopen, which deletes the WALs left")
	if sc, err := mustNew(t, db, 1).Scan(); err != nil || sc.Entries != next-1 || len(sc.Gaps)+len(sc.Unreadable) > 0 {
		t.Fatalf("after all that: %+v %v", sc, err)
	}
}

// suffixLog records what a SuffixWatcher hears, and the Store's last index
// when it does.
type suffixLog struct {
	s      *Store
	events []string
	fail   error
}

func (l *suffixLog) Lowering(group uint32, last uint64) error {
	now, _ := l.s.LastIndex()
	l.events = append(l.events, fmt.Sprintf("lowering %d %d->%d", group, now, last))
	return l.fail
}

func (l *suffixLog) Lowered(group uint32) {
	now, _ := l.s.LastIndex()
	l.events = append(l.events, fmt.Sprintf("lowered %d at %d", group, now))
}

// TestSuffixWatcher: a deletion that lowers the last index is told before
// it is committed (with the index that will be last, below any hole) and
// after; other deletions are not; a refusal stops the deletion.
func TestSuffixWatcher(t *testing.T) {
	s := mustNew(t, openMem(t), 4)
	l := &suffixLog{s: s}
	s.Watch(l)
	mustStore(t, s, entries(4, 1, 10))
	mustStore(t, s, entries(4, 20, 30))
	for _, r := range [][2]uint64{{1, 3}, {5, 6}, {28, 40}, {20, 27}} {
		if err := s.DeleteRange(r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"lowering 4 30->27", "lowered 4 at 27", "lowering 4 27->10", "lowered 4 at 10"}
	if fmt.Sprint(l.events) != fmt.Sprint(want) {
		t.Fatalf("events %q, want %q", l.events, want)
	}
	l.fail, l.events = errors.New("no"), nil
	if err := s.DeleteRange(9, 10); err == nil || fmt.Sprint(l.events) != "[lowering 4 10->8]" {
		t.Fatalf("refused deletion: %v, events %q", err, l.events)
	}
	if last, _ := s.LastIndex(); last != 10 {
		t.Fatalf("a refused deletion deleted: last %d", last)
	}
}

// TestCheckFiles: each file through which Pebble finds the rest of the
// database, missing or damaged, is named; a sound or absent database has
// no problems.
func TestCheckFiles(t *testing.T) {
	seed := t.TempDir()
	db, err := OpenDB(seed, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustStore(t, mustNew(t, db, 1), entries(1, 1, 100))
	mustClose(t, db)
	if p, err := CheckFiles(vfs.Default, seed); len(p) != 0 || err != nil {
		t.Fatalf("a sound database: %v %v", p, err)
	}
	if p, _ := CheckFiles(vfs.Default, t.TempDir()); len(p) != 0 {
		t.Fatalf("an empty directory: %v", p)
	}
	glob := func(dir, pattern string) string {
		m, _ := filepath.Glob(filepath.Join(dir, pattern))
		if len(m) == 0 {
			t.Fatalf("no %s", pattern)
		}
		return m[0]
	}
	for _, tc := range []struct {
		name, pattern string
		spoil         func(path string) error
		want          string
		spare         bool
	}{
		{"manifest marker removed", "marker.manifest.*", os.Remove, "marker.manifest.*", false},
		{"format marker removed", "marker.format-version.*", os.Remove, "marker.format-version.*", false},
		{"MANIFEST removed", "MANIFEST-*", os.Remove, "MANIFEST-", false},
		{"OPTIONS cut", "OPTIONS-*", func(p string) error { return os.Truncate(p, 1000) }, "OPTIONS-", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(seed)); err != nil {
				t.Fatal(err)
			}
			if err := tc.spoil(glob(dir, tc.pattern)); err != nil {
				t.Fatal(err)
			}
			p, err := CheckFiles(vfs.Default, dir)
			if err != nil || len(p) != 1 || !strings.HasPrefix(p[0].Name, tc.want) || p[0].Spare != tc.spare {
				t.Fatalf("CheckFiles = %+v %v, want one problem with %s (spare %v)", p, err, tc.want, tc.spare)
			}
		})
	}
}

// TestCheckBlobFiles: a blob file of the current version that is missing
// or cut is named before any value is read from it (which would panic in
// Pebble v2.1).
func TestCheckBlobFiles(t *testing.T) {
	dir := t.TempDir()
	db, err := OpenDB(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ls := entries(1, 1, 40)
	for _, l := range ls {
		l.Data = make([]byte, 4<<10) // separated into a blob file by the flush
	}
	mustStore(t, mustNew(t, db, 1), ls)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if p := CheckBlobFiles(db, vfs.Default, dir); len(p) != 0 {
		t.Fatalf("sound: %v", p)
	}
	mustClose(t, db)
	blobs, _ := filepath.Glob(filepath.Join(dir, "*.blob"))
	if len(blobs) == 0 {
		t.Fatal("no blob file")
	}
	for _, spoil := range []func(string) error{
		func(p string) error { return os.Truncate(p, 100) },
		os.Remove,
	} {
		if err := spoil(blobs[0]); err != nil {
			t.Fatal(err)
		}
		db, err := OpenDB(dir, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		p := CheckBlobFiles(db, vfs.Default, dir)
		mustClose(t, db)
		if len(p) != 1 || p[0].Name != filepath.Base(blobs[0]) {
			t.Fatalf("CheckBlobFiles = %+v, want %s", p, filepath.Base(blobs[0]))
		}
	}
}

// TestOpenReadOnlyChangesNothing: a read-only open replays the WALs into
// memory and writes no file.
func TestOpenReadOnlyChangesNothing(t *testing.T) {
	dir := t.TempDir()
	db, err := OpenDB(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustStore(t, mustNew(t, db, 1), entries(1, 1, 50))
	mustClose(t, db)
	before := listing(t, dir)
	db, err = OpenDB(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if sc, err := mustNew(t, db, 1).Scan(); err != nil || sc.Entries != 50 {
		t.Fatalf("read-only: %+v %v", sc, err)
	}
	if err := db.Set([]byte("x"), nil, pebble.Sync); err == nil {
		t.Fatal("a write to a read-only database succeeded")
	}
	mustClose(t, db)
	if after := listing(t, dir); after != before {
		t.Fatalf("files changed: %s\nthen %s", before, after)
	}
	if _, err := OpenDB(t.TempDir(), Options{ReadOnly: true}); !errors.Is(err, ErrNoDB) {
		t.Fatalf("read-only, no database: %v", err)
	}
}

// listing names every file of dir with its size.
func listing(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range ents {
		fi, _ := e.Info()
		fmt.Fprintf(&b, "%s:%d ", e.Name(), fi.Size())
	}
	return b.String()
}
