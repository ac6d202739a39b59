package cluster

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rlserver/rlserver/cluster/datadir"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/logbuf"
	"github.com/rlserver/rlserver/internal/testseed"
	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/raftlog"
	"github.com/rlserver/rlserver/shards"
)

// The damage tests build one data directory of a standalone node whose
// database has everything a damage can hit: tables and blob files (a
// snapshot, then a flush), and two write-ahead logs that hold entries in
// no table yet. Each case copies it, spoils one file, and opens it as a
// node would: without AcceptDataLoss the start is refused with ErrDamaged
// and a text that names the file; with it, the start goes on and logs the
// loss at ERROR, or (for what cannot be repaired) is refused still.

// The files of the data directory that the cases damage.
const (
	dbDir    = datadir.DBDir
	markFile = datadir.MarkFile
	idFile   = datadir.IDFile
)

// damageParams: a large limit, so that every check is admitted and the
// count a key holds is the checks it had; the window does not end during
// a test (see noRollover).
var damageParams = engine.Params{Limit: 1 << 40, Window: noRollover}

// seeded is the directory the cases copy, built once.
type seeded struct {
	dir    string
	clock  *fakeClock
	keys   []string // every key checked, once each round
	rounds int64    // how many times each key was checked
	live   []string // the WALs (base names) that hold records in no table
}

// seedDirectory makes the shared directory: rounds of checks of keys of a
// KiB (so that entries are large and the first WALs fill), a snapshot and
// a flush into tables and blob files, then more rounds into new WALs; and
// a clean stop, which brings the mark file up to date.
func seedDirectory(t *testing.T) *seeded {
	t.Helper()
	s := &seeded{dir: t.TempDir(), clock: newClock()}
	for i := 0; i < 300; i++ {
		s.keys = append(s.keys, fmt.Sprintf("%04d:%s", i, strings.Repeat("k", 1000)))
	}
	disk, n := openStorageNode(t, s.dir, StorageOptions{}, s.clock)
	round := func() {
		for _, k := range s.keys {
			if r, err := n.Check([]byte(k), engine.Fixed, damageParams, 1, s.clock.advance(1e6)); err != nil || !r.Allowed {
				t.Fatalf("check: %+v %v", r, err)
			}
		}
		syncNode(t, n)
	}
	for i := 0; i < 3; i++ {
		round()
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if err := disk.DB.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ { // enough to fill more than one new WAL
		round()
	}
	s.rounds = 23
	closeNode(t, n)
	// Pebble's live WALs are the newest ones; the older ones it keeps to
	// reuse their files hold only records that are in tables.
	wals := globSorted(t, filepath.Join(s.dir, dbDir), "*.log")
	for _, w := range wals[len(wals)-int(disk.DB.Metrics().WAL.Files):] {
		s.live = append(s.live, filepath.Base(w))
	}
	if err := disk.Close(); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(s.dir, dbDir)
	for _, want := range []string{"*.sst", "*.blob", "MANIFEST-*", "OPTIONS-*"} {
		if m, _ := filepath.Glob(filepath.Join(db, want)); len(m) == 0 {
			t.Fatalf("the seeded database has no %s", want)
		}
	}
	if len(s.live) < 2 || len(s.live) == len(wals) {
		t.Fatalf("the seeded database has %d live WALs of %d, want 2 or more, and one that is not", len(s.live), len(wals))
	}
	return s
}

// openStorageNode opens the directory and a standalone node on it.
func openStorageNode(t testing.TB, dir string, o StorageOptions, clock *fakeClock) (*Storage, *Node) {
	t.Helper()
	disk, err := OpenStorage(dir, o)
	if err != nil {
		t.Fatalf("OpenStorage: %v", err)
	}
	n := open(t, &storage{logs: disk.Logs, stable: disk.Logs, snaps: disk.Snaps}, clock, func(c *Config) {
		c.NodeID, c.ReuseEntries, c.Store = disk.NodeID, true, shards.NewStore(shards.Options{})
	})
	if err := disk.MarkInitialised(); err != nil {
		t.Fatal(err)
	}
	return disk, n
}

// globSorted returns the names of the files in dir matching pattern, in
// order.
func globSorted(t testing.TB, dir, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}

// dirDigest hashes every file's name and bytes under dir.
func dirDigest(t testing.TB, dir string) [32]byte {
	t.Helper()
	h := sha256.New()
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Fprintf(h, "%s\n", strings.TrimPrefix(path, dir))
		_, err = io.Copy(h, f)
		return err
	})
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

func remove(path string) func(t *testing.T) {
	return func(t *testing.T) {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// cutTo truncates path to size(its size).
func cutTo(path string, size func(n int64) int64) func(t *testing.T) {
	return func(t *testing.T) {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, size(fi.Size())); err != nil {
			t.Fatal(err)
		}
	}
}

func zero(int64) int64   { return 0 }
func half(n int64) int64 { return n / 2 }

func overwrite(path, text string) func(t *testing.T) {
	return func(t *testing.T) {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Outcomes of a damage case that are not errors.
var (
	errLossless   = errors.New("a start that lost nothing")
	errOrLossless = errors.New("ErrDamaged, or a start that lost nothing")
)

// damageCase is one way a file of the directory is lost or cut, and the
// outcome DESIGN.md documents for it.
type damageCase struct {
	name string
	// spoil damages the copy; its argument is the copy's paths.
	spoil func(p paths) func(t *testing.T)
	// want: the error Is this, and its text holds names; errLossless:
	// the start goes on, and nothing was lost; errOrLossless: either
	// ErrDamaged, or a start that lost nothing (which of the two depends
	// on what Pebble can still find).
	want    error
	names   func(p paths) []string
	anyName bool // one of names will do
	// With AcceptDataLoss the start goes on, logging at ERROR a line that
	// holds logged, unless the refusal was ErrUnrepairable: then it is
	// refused still.
	logged string
}

// paths are the files of a copy of the seeded directory.
type paths struct {
	dir, db               string
	oldestWAL, newestWAL  string // the oldest and newest WAL written after the flush
	flushedWAL            string // a WAL whose records are all in tables, kept for reuse
	sst, blob             string
	manifest, options     string
	manifestMark, fmtMark string
}

func (s *seeded) pathsOf(t testing.TB, dir string) paths {
	db := filepath.Join(dir, dbDir)
	first := func(pattern string) string {
		m := globSorted(t, db, pattern)
		if len(m) == 0 {
			t.Fatalf("no %s", pattern)
		}
		return m[0]
	}
	wals := globSorted(t, db, "*.log")
	return paths{dir: dir, db: db, oldestWAL: filepath.Join(db, s.live[0]), newestWAL: filepath.Join(db, s.live[len(s.live)-1]), flushedWAL: wals[0],
		sst: first("*.sst"), blob: first("*.blob"), manifest: first("MANIFEST-*"),
		options:      globSorted(t, db, "OPTIONS-*")[len(globSorted(t, db, "OPTIONS-*"))-1],
		manifestMark: first("marker.manifest.*"), fmtMark: first("marker.format-version.*")}
}

func base(path string) []string { return []string{filepath.Base(path)} }

var damageCases = []damageCase{
	{name: "newest WAL removed", spoil: func(p paths) func(*testing.T) { return remove(p.newestWAL) },
		want: ErrDamaged, names: func(p paths) []string { return base(p.newestWAL) }, logged: base0("is missing")},
	{name: "newest WAL cut to 0 bytes", spoil: func(p paths) func(*testing.T) { return cutTo(p.newestWAL, zero) },
		want: ErrDamaged, names: lostFrom(func(p paths) string { return p.newestWAL }), logged: base0("lost records")},
	{name: "newest WAL cut in the middle of its records", spoil: func(p paths) func(*testing.T) { return cutRecords(p.newestWAL, 0.5) },
		want: ErrDamaged, names: lostFrom(func(p paths) string { return p.newestWAL }), logged: base0("lost records")},
	{name: "newest WAL cut inside its last record", spoil: func(p paths) func(*testing.T) { return cutRecords(p.newestWAL, -1) },
		want: ErrDamaged, names: lostFrom(func(p paths) string { return p.newestWAL }), logged: base0("lost records")},
	{name: "oldest WAL removed", spoil: func(p paths) func(*testing.T) { return remove(p.oldestWAL) },
		want: ErrDamaged, names: func(p paths) []string { return base(p.oldestWAL) }, logged: base0("is missing")},
	{name: "flushed WAL removed", spoil: func(p paths) func(*testing.T) { return remove(p.flushedWAL) },
		want: ErrDamaged, names: func(p paths) []string { return base(p.flushedWAL) }, logged: base0("is missing")},
	// Pebble refuses a WAL that is not the newest and does not end
	// cleanly; a cut that happens to fall between two chunks looks clean
	// to it, and then the entries after the cut are missing.
	{name: "oldest WAL cut", spoil: func(p paths) func(*testing.T) { return cutRecords(p.oldestWAL, 0.5) },
		want: ErrDamaged, names: func(p paths) []string { return append(base(p.oldestWAL), "log entries") }, anyName: true, logged: base0("log entries")},
	{name: "table removed", spoil: func(p paths) func(*testing.T) { return remove(p.sst) },
		want: ErrUnrepairable, names: func(p paths) []string { return []string{strings.TrimSuffix(filepath.Base(p.sst), ".sst")} }},
	{name: "table cut", spoil: func(p paths) func(*testing.T) { return cutTo(p.sst, half) },
		want: ErrUnrepairable, names: func(p paths) []string { return base(p.sst) }},
	{name: "blob file removed", spoil: func(p paths) func(*testing.T) { return remove(p.blob) },
		want: ErrUnrepairable, names: func(p paths) []string { return base(p.blob) }},
	{name: "blob file cut", spoil: func(p paths) func(*testing.T) { return cutTo(p.blob, half) },
		want: ErrUnrepairable, names: func(p paths) []string { return base(p.blob) }},
	{name: "MANIFEST removed", spoil: func(p paths) func(*testing.T) { return remove(p.manifest) },
		want: ErrUnrepairable, names: func(p paths) []string { return base(p.manifest) }},
	// Pebble reads the edits before the cut; what it then no longer knows
	// of is lost unless the WALs it kept for reuse still hold it.
	{name: "MANIFEST cut to its first edit", spoil: func(p paths) func(*testing.T) { return cutTo(p.manifest, func(int64) int64 { return 60 }) },
		want: errOrLossless, names: func(paths) []string { return nil }, logged: base0("")},
	{name: "manifest marker removed", spoil: func(p paths) func(*testing.T) { return remove(p.manifestMark) },
		want: ErrUnrepairable, names: func(p paths) []string { return []string{"marker.manifest"} }},
	{name: "format marker removed", spoil: func(p paths) func(*testing.T) { return remove(p.fmtMark) },
		want: ErrUnrepairable, names: func(p paths) []string { return []string{"marker.format-version"} }},
	{name: "OPTIONS removed", spoil: func(p paths) func(*testing.T) { return remove(p.options) }, want: errLossless},
	{name: "OPTIONS cut", spoil: func(p paths) func(*testing.T) { return cutTo(p.options, func(int64) int64 { return 1000 }) },
		want: ErrDamaged, names: func(p paths) []string { return base(p.options) }, logged: base0("holds no data")},
	{name: "mark file removed", spoil: func(p paths) func(*testing.T) { return remove(filepath.Join(p.dir, markFile)) },
		want: ErrDamaged, names: func(p paths) []string { return []string{markFile + " is missing"} }, logged: base0(markFile)},
	{name: "mark file cut", spoil: func(p paths) func(*testing.T) { return cutTo(filepath.Join(p.dir, markFile), half) },
		want: ErrDamaged, names: func(p paths) []string { return []string{markFile + " is damaged"} }, logged: base0(markFile)},
	{name: "node id file removed", spoil: func(p paths) func(*testing.T) { return remove(filepath.Join(p.dir, idFile)) },
		want: errLossless},
	{name: "node id file garbled", spoil: func(p paths) func(*testing.T) { return overwrite(filepath.Join(p.dir, idFile), "nodeX\n") },
		want: ErrNodeID, names: func(p paths) []string { return []string{idFile, markFile, `"node1"`} }},
}

// lostFrom names the WAL that lost records, and says so.
func lostFrom(wal func(paths) string) func(paths) []string {
	return func(p paths) []string { return []string{filepath.Base(wal(p)), "lost records synced before"} }
}

func base0(s string) string { return s }

// TestDamagedDirectory: each way a file of the data directory can be lost
// or cut gives the documented outcome: a refusal that names the file (and
// changes nothing), then, with AcceptDataLoss, a start on what is left
// with the loss logged at ERROR, after which a plain start is clean; never
// a panic, never a silent loss.
func TestDamagedDirectory(t *testing.T) {
	s := seedDirectory(t)
	for _, tc := range damageCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each case its own copy; they wait on Pebble's syncs
			dir := testutil.CopyDir(t, s.dir)
			p := s.pathsOf(t, dir)
			tc.spoil(p)(t)
			before := dirDigest(t, dir)
			disk, err := OpenStorage(dir, StorageOptions{})
			if tc.want == errLossless || tc.want == errOrLossless && err == nil {
				if err != nil {
					t.Fatalf("OpenStorage: %v, want a clean start (nothing was lost)", err)
				}
				disk.Close()
				if kept := s.kept(t, dir, StorageOptions{}); kept != s.checks() {
					t.Fatalf("a clean start kept %d checks of %d: a silent loss", kept, s.checks())
				}
				return
			}
			if tc.want == errOrLossless {
				tc.want = ErrDamaged
			}
			if !errors.Is(err, tc.want) {
				if disk != nil {
					disk.Close()
				}
				t.Fatalf("OpenStorage: %v, want %v", err, tc.want)
			}
			named := 0
			for _, name := range tc.names(p) {
				if strings.Contains(err.Error(), name) {
					named++
				} else if !tc.anyName {
					t.Errorf("the error does not name %q: %v", name, err)
				}
			}
			if tc.anyName && named == 0 {
				t.Errorf("the error names none of %q: %v", tc.names(p), err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("the error is not one line: %q", err)
			}
			if errors.Is(tc.want, ErrDamaged) && dirDigest(t, dir) != before {
				t.Errorf("the refused start changed the directory")
			}
			tc.want = err
			checkAccept(t, s, dir, tc)
		})
	}
}

// checkAccept opens dir with AcceptDataLoss and checks the outcome; tc.want
// is the error of the start without it.
func checkAccept(t *testing.T, s *seeded, dir string, tc damageCase) {
	t.Helper()
	var logs logbuf.Buffer
	o := StorageOptions{AcceptDataLoss: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	if !errors.Is(tc.want, ErrDamaged) || errors.Is(tc.want, ErrUnrepairable) {
		disk, err := OpenStorage(dir, o)
		if err == nil || err.Error() != tc.want.Error() {
			if disk != nil {
				disk.Close()
			}
			t.Fatalf("with AcceptDataLoss: %v, want %v still", err, tc.want)
		}
		return
	}
	kept := s.kept(t, dir, o)
	errs := logs.Lines("level=ERROR")
	if len(errs) == 0 || !strings.Contains(strings.Join(errs, "\n"), tc.logged) {
		t.Errorf("with AcceptDataLoss: ERROR lines %q, want one holding %q", errs, tc.logged)
	}
	t.Logf("with AcceptDataLoss: %d of %d checks kept; logged %q", kept, s.checks(), errs)
	again, err := OpenStorage(dir, StorageOptions{})
	if err != nil {
		t.Fatalf("a start after the accepted one: %v", err)
	}
	again.Close()
}

// checks returns how many checks the seeded directory holds.
func (s *seeded) checks() int64 { return s.rounds * int64(len(s.keys)) }

// kept opens a node on dir with o and returns how many checks its keys
// hold.
func (s *seeded) kept(t *testing.T, dir string, o StorageOptions) int64 {
	t.Helper()
	disk, n := openStorageNode(t, dir, o, s.clock)
	defer disk.Close()
	defer closeNode(t, n)
	var kept int64
	for _, k := range s.keys {
		r, _ := n.Check([]byte(k), engine.Fixed, damageParams, 0, s.clock.now())
		kept += damageParams.Limit - r.Remaining
	}
	return kept
}

// cutRecords cuts the WAL at path at frac of the bytes its records take
// (the rest is Pebble's end-of-log trailer), or, for a negative frac, in
// the middle of its last record.
func cutRecords(path string, frac float64) func(t *testing.T) {
	return func(t *testing.T) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var num uint64
		fmt.Sscanf(filepath.Base(path), "%d.log", &num)
		r := newRecordReader(f, record.NewReader, num)
		var ends []int64
		for {
			rr, err := r.Next()
			if err == nil {
				_, err = io.Copy(io.Discard, rr)
			}
			if err != nil {
				break
			}
			ends = append(ends, r.Offset())
		}
		f.Close()
		if len(ends) < 2 {
			t.Fatalf("%s holds %d records", path, len(ends))
		}
		at := int64(frac * float64(ends[len(ends)-1]))
		if frac < 0 {
			at = (ends[len(ends)-2] + ends[len(ends)-1]) / 2
		}
		if err := os.Truncate(path, at); err != nil {
			t.Fatal(err)
		}
	}
}

// newRecordReader calls newReader (record.NewReader, whose log number
// type is internal to Pebble) with num.
func newRecordReader[N ~uint64](f io.Reader, newReader func(io.Reader, N) *record.Reader, num uint64) *record.Reader {
	return newReader(f, N(num))
}

// TestCrashIsNotDamage: a crash at any moment — what was synced survives,
// and a random part of what was not — never looks like damage: with the
// mark written every millisecond, across WAL rotations, snapshots and
// flushes, every crash image opens without ErrDamaged, and a node starts
// on some of them. (The mark only ever claims what is durable: a WAL once
// it exists, an index once it is synced, a counter once the database
// holds it.) 30 crashes, which take in a snapshot, a flush and three node
// starts; TestLongCrashIsNotDamage (make test-long) makes 100.
func TestCrashIsNotDamage(t *testing.T) {
	crashIsNotDamage(t, 30)
}

// TestLongCrashIsNotDamage is TestCrashIsNotDamage with 100 crashes, four
// rounds of snapshots and flushes.
func TestLongCrashIsNotDamage(t *testing.T) {
	testutil.LongOnly(t)
	crashIsNotDamage(t, 100)
}

func crashIsNotDamage(t *testing.T, steps int) {
	rng := testseed.Rand(t)
	fs, clock := vfs.NewCrashableMem(), newClock()
	disk, n := openStorageNode(t, "/data", StorageOptions{FS: fs, MarkInterval: time.Millisecond}, clock)
	var keys [][]byte
	for i := 0; i < 200; i++ {
		keys = append(keys, fmt.Appendf(nil, "%04d:%s", i, strings.Repeat("c", 1000)))
	}
	for i := 0; i < steps; i++ {
		for j := 0; j < 100; j++ {
			n.Check(keys[rng.IntN(len(keys))], engine.Fixed, damageParams, 1, clock.advance(1e6))
		}
		if i%2 == 0 {
			syncNode(t, n)
		}
		switch i % 25 {
		case 11:
			if err := n.Snapshot(); err != nil {
				t.Fatal(err)
			}
		case 23:
			if err := disk.DB.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		cfg := vfs.CrashCloneCfg{}
		if i%2 == 1 {
			cfg = vfs.CrashCloneCfg{UnsyncedDataPercent: 1 + rng.IntN(99), RNG: rand.New(rand.NewPCG(rng.Uint64(), 0))}
		}
		img := fs.CrashClone(cfg)
		if i%10 == 9 {
			d2, n2 := openStorageNode(t, "/data", StorageOptions{FS: img}, clock)
			closeNode(t, n2)
			d2.Close()
			continue
		}
		st, err := OpenStorage("/data", StorageOptions{FS: img})
		if err != nil {
			t.Fatalf("a crash image after step %d (%d%% of the unsynced data) is refused: %v", i, cfg.UnsyncedDataPercent, err)
		}
		st.Close()
	}
	closeNode(t, n)
	disk.Close()
}

// TestAcceptBridgesAHole: entries lost from the middle of the log (a WAL
// removed, say) are refused, naming them; with AcceptDataLoss the node
// keeps every entry after the hole: only the changes made in the hole that
// no later entry wrote again are lost, to the check.
func TestAcceptBridgesAHole(t *testing.T) {
	dir, clock := t.TempDir(), newClock()
	disk, n := openStorageNode(t, dir, StorageOptions{}, clock)
	phase := func(prefix string, keys, times int) (first, last uint64) {
		first, _ = disk.Logs.LastIndex()
		for r := 0; r < times; r++ {
			for k := 0; k < keys; k++ {
				n.Check(fmt.Appendf(nil, "%s%d", prefix, k), engine.Fixed, damageParams, 1, clock.advance(1e6))
			}
			syncNode(t, n)
		}
		last, _ = disk.Logs.LastIndex()
		return first + 1, last
	}
	phase("a", 10, 5)
	holeFrom, holeTo := phase("b", 10, 3)
	phase("a", 5, 2)
	phase("c", 10, 1)
	closeNode(t, n)
	disk.Close()
	if holeTo < holeFrom {
		t.Fatalf("phase b wrote no entry (%d-%d)", holeFrom, holeTo)
	}
	db, err := raftlog.OpenDB(filepath.Join(dir, dbDir), raftlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteRange(raftlog.LogKey(groupID, holeFrom), raftlog.LogKey(groupID, holeTo+1), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()

	hole := raftlog.Range{From: holeFrom, To: holeTo}.String()
	if _, err := OpenStorage(dir, StorageOptions{}); !errors.Is(err, ErrDamaged) ||
		!strings.Contains(err.Error(), "log entries "+hole+" are missing") {
		t.Fatalf("OpenStorage: %v, want ErrDamaged naming entries %s", err, hole)
	}
	var logs logbuf.Buffer
	disk, n = openStorageNode(t, dir, StorageOptions{AcceptDataLoss: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, clock)
	if errs := strings.Join(logs.Lines("level=ERROR"), "\n"); !strings.Contains(errs, "lost=["+hole+"]") {
		t.Errorf("ERROR lines %s, want the lost entries %s", errs, hole)
	}
	want := map[string]int64{"a0": 7, "a4": 7, "a5": 5, "a9": 5, "b0": 0, "b9": 0, "c0": 1, "c9": 1}
	for k, w := range want {
		r, _ := n.Check([]byte(k), engine.Fixed, damageParams, 0, clock.now())
		if got := damageParams.Limit - r.Remaining; got != w {
			t.Errorf("%s counts %d, want %d", k, got, w)
		}
	}
	closeNode(t, n)
	disk.Close()
	if st, err := OpenStorage(dir, StorageOptions{}); err != nil {
		t.Fatalf("the next start: %v", err)
	} else {
		st.Close()
	}
}
