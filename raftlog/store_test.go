package raftlog

import (
	"bytes"
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/rlserver/rlserver/internal/testseed"
)

func TestEmptyStore(t *testing.T) {
	s := mustNew(t, openMem(t), 1)
	if err := checkLogs(s, nil, 0, 5, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(0, math.MaxUint64); err != nil {
		t.Fatalf("DeleteRange on an empty log: %v", err)
	}
	if err := s.StoreLogs(nil); err != nil {
		t.Fatalf("StoreLogs(nil): %v", err)
	}
	if st := s.Stats(); st.Syncs != 0 || st.Appends != 0 {
		t.Fatalf("no-op calls committed: %+v", st)
	}
}

func TestStoreOneAndMany(t *testing.T) {
	s := mustNew(t, openMem(t), 1)
	one := entry(1, 1)
	if err := s.StoreLog(one); err != nil {
		t.Fatal(err)
	}
	if err := checkLogs(s, byIndex([]*raft.Log{one}), 0, 3, 1, 1); err != nil {
		t.Fatal(err)
	}
	many := entries(1, 2, 300)
	mustStore(t, s, many)
	if err := checkLogs(s, byIndex([]*raft.Log{one}, many), 0, 301, 1, 300); err != nil {
		t.Fatal(err)
	}
	// An entry with nothing optional set round-trips as such.
	bare := &raft.Log{Index: 301, Term: 9}
	if err := s.StoreLog(bare); err != nil {
		t.Fatal(err)
	}
	var got raft.Log
	if err := s.GetLog(301, &got); err != nil || got.Data != nil || got.Extensions != nil || !got.AppendedAt.IsZero() {
		t.Fatalf("GetLog(bare) = %+v, %v", got, err)
	}
	st := s.Stats()
	if st.Appends != 3 || st.Entries != 301 || st.Syncs != 3 || st.Bytes == 0 || st.AppendTime < st.LastAppend || st.LastAppend <= 0 {
		t.Fatalf("stats after three appends of 301 entries: %+v", st)
	}
}

func TestGetLogMissingAndGaps(t *testing.T) {
	s := mustNew(t, openMem(t), 7)
	a, b := entries(7, 5, 9), entries(7, 20, 22) // a gap from 10 to 19, as after a snapshot install
	mustStore(t, s, a)
	mustStore(t, s, b)
	if err := checkLogs(s, byIndex(a, b), 0, 30, 5, 22); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := s.GetLog(math.MaxUint64, &l); err != raft.ErrLogNotFound {
		t.Fatalf("GetLog(max) = %v", err)
	}
}

func TestDeleteRange(t *testing.T) {
	const n = 20
	for _, c := range []struct {
		name          string
		lo, hi        uint64
		first, last   uint64 // after the deletion
		gone          [2]uint64
		syncs         uint64 // commits made by DeleteRange
		again         uint64 // StoreLogs then appends this index
		first2, last2 uint64
	}{
		{"prefix", 1, 5, 6, 20, [2]uint64{1, 5}, 1, 21, 6, 21},
		{"prefix from 0", 0, 12, 13, 20, [2]uint64{1, 12}, 1, 21, 13, 21},
		{"suffix", 15, 20, 1, 14, [2]uint64{15, 20}, 1, 15, 1, 15},
		{"suffix past the end", 18, math.MaxUint64, 1, 17, [2]uint64{18, 20}, 1, 18, 1, 18},
		{"middle", 8, 11, 1, 20, [2]uint64{8, 11}, 1, 21, 1, 21},
		{"everything", 1, 20, 0, 0, [2]uint64{1, 20}, 1, 40, 40, 40},
		{"everything and more", 0, math.MaxUint64, 0, 0, [2]uint64{1, 20}, 1, 1, 1, 1},
		{"one", 20, 20, 1, 19, [2]uint64{20, 20}, 1, 20, 1, 20},
		{"nothing below", 0, 0, 1, 20, [2]uint64{1, 0}, 0, 21, 1, 21},
		{"nothing above", 21, 30, 1, 20, [2]uint64{1, 0}, 0, 21, 1, 21},
		{"reversed", 10, 5, 1, 20, [2]uint64{1, 0}, 0, 21, 1, 21},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := mustNew(t, openMem(t), 3)
			all := entries(3, 1, n)
			mustStore(t, s, all)
			if err := s.DeleteRange(c.lo, c.hi); err != nil {
				t.Fatal(err)
			}
			want := byIndex(all)
			for i := c.gone[0]; i <= c.gone[1]; i++ {
				delete(want, i)
			}
			if err := checkLogs(s, want, 0, n+2, c.first, c.last); err != nil {
				t.Fatalf("after DeleteRange(%d, %d): %v", c.lo, c.hi, err)
			}
			if got := s.Stats().Syncs - 1; got != c.syncs {
				t.Fatalf("DeleteRange committed %d times, want %d", got, c.syncs)
			}
			// The cache agrees with what a fresh Store reads from the database.
			if err := checkLogs(mustNew(t, s.db, 3), want, 0, n+2, c.first, c.last); err != nil {
				t.Fatalf("a new Store after DeleteRange(%d, %d): %v", c.lo, c.hi, err)
			}
			e := entry(3, c.again)
			mustStore(t, s, []*raft.Log{e})
			want[c.again] = e
			if err := checkLogs(s, want, 0, 45, c.first2, c.last2); err != nil {
				t.Fatalf("after storing %d again: %v", c.again, err)
			}
		})
	}
}

// TestDeleteRangeThenOverwrite is what a follower does when the leader's
// log conflicts with its own: delete the suffix, store the leader's.
func TestDeleteRangeThenOverwrite(t *testing.T) {
	s := mustNew(t, openMem(t), 1)
	mustStore(t, s, entries(1, 1, 10))
	if err := s.DeleteRange(6, 10); err != nil {
		t.Fatal(err)
	}
	newer := entries(1, 6, 8)
	for _, e := range newer {
		e.Term, e.Data = 99, []byte("leader's")
	}
	mustStore(t, s, newer)
	if err := checkLogs(s, byIndex(entries(1, 1, 5), newer), 0, 12, 1, 8); err != nil {
		t.Fatal(err)
	}
}

func TestGetLogOwnsMemory(t *testing.T) {
	s := mustNew(t, openMem(t), 1)
	mustStore(t, s, entries(1, 1, 2))
	var got raft.Log
	if err := s.GetLog(1, &got); err != nil {
		t.Fatal(err)
	}
	want := entry(1, 1)
	// Later writes, flushes and compactions must not change what GetLog returned.
	for i := 0; i < 3; i++ {
		over := entry(1, 1)
		over.Data = bytes.Repeat([]byte{'x'}, len(over.Data))
		mustStore(t, s, []*raft.Log{over})
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if d := sameLog(&got, want); d != "" {
		t.Fatalf("the entry GetLog returned changed: %s", d)
	}
	// Appending to Data does not overwrite Extensions (they share one allocation).
	_ = append(got.Data, "more"...)
	if !bytes.Equal(got.Extensions, want.Extensions) {
		t.Fatalf("appending to Data changed Extensions to %q", got.Extensions)
	}
}

func TestLargeEntries(t *testing.T) {
	s := mustNew(t, openMem(t), 1)
	rng := testseed.Rand(t)
	var big []*raft.Log
	for i := uint64(1); i <= 4; i++ {
		e := entry(1, i)
		e.Data = randBytes(3<<20+rng.IntN(1<<20), rng.Uint32)
		big = append(big, e)
	}
	mustStore(t, s, big[:1])
	mustStore(t, s, big[1:]) // one batch of about 12 MB, past the memtable size
	if err := checkLogs(s, byIndex(big), 0, 5, 1, 4); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(1, 2); err != nil {
		t.Fatal(err)
	}
	if err := checkLogs(s, byIndex(big[2:]), 0, 5, 3, 4); err != nil {
		t.Fatal(err)
	}
}

func TestGroupsAreIsolated(t *testing.T) {
	db := openMem(t)
	groups := []uint32{0, 1, 2, 256, math.MaxUint32}
	stores := make(map[uint32]*Store)
	for k, g := range groups {
		s := mustNew(t, db, g)
		stores[g] = s
		mustStore(t, s, entries(g, uint64(k+1), uint64(10*(k+1))))
		if err := s.SetUint64([]byte("CurrentTerm"), uint64(g)+7); err != nil {
			t.Fatal(err)
		}
	}
	// Deleting everything in one group leaves the others alone.
	if err := stores[1].DeleteRange(0, math.MaxUint64); err != nil {
		t.Fatal(err)
	}
	for k, g := range groups {
		lo, hi := uint64(k+1), uint64(10*(k+1))
		want := byIndex(entries(g, lo, hi))
		if g == 1 {
			want, lo, hi = nil, 0, 0
		}
		for _, s := range []*Store{stores[g], mustNew(t, db, g)} {
			if err := checkLogs(s, want, 0, 60, lo, hi); err != nil {
				t.Fatalf("group %d: %v", g, err)
			}
			if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != uint64(g)+7 {
				t.Fatalf("group %d: CurrentTerm = %d, %v", g, v, err)
			}
		}
	}
	if _, err := mustNew(t, db, 3).Get([]byte("CurrentTerm")); !isNotFound(err) {
		t.Fatalf("group 3 sees another group's key: %v", err)
	}
}

func TestReopenOnDisk(t *testing.T) {
	dir := t.TempDir()
	db := openOn(t, vfs.Default, dir)
	s := mustNew(t, db, 4)
	all := entries(4, 1, 50)
	mustStore(t, s, all)
	if err := s.DeleteRange(1, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(45, 50); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("n1")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("LastVoteTerm"), 12); err != nil {
		t.Fatal(err)
	}
	mustClose(t, db)

	db, err := OpenDB(dir, Options{MustExist: true})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer mustClose(t, db)
	s = mustNew(t, db, 4)
	if err := checkLogs(s, byIndex(all[10:44]), 0, 55, 11, 44); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "n1" {
		t.Fatalf("LastVoteCand = %q, %v", v, err)
	}
	if v, err := s.GetUint64([]byte("LastVoteTerm")); err != nil || v != 12 {
		t.Fatalf("LastVoteTerm = %d, %v", v, err)
	}
}

func TestMustExist(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenDB(dir, Options{MustExist: true}); !errors.Is(err, ErrNoDB) {
		t.Fatalf("OpenDB(MustExist) of an empty directory = %v, want ErrNoDB", err)
	}
	if _, err := OpenDB("db", Options{FS: vfs.NewMem(), MustExist: true}); !errors.Is(err, ErrNoDB) {
		t.Fatalf("OpenDB(MustExist) on an empty filesystem = %v, want ErrNoDB", err)
	}
}

func TestStableStore(t *testing.T) {
	s := mustNew(t, openMem(t), 1)
	// Misses look as raft expects: the text "not found", and nil / 0.
	if v, err := s.Get([]byte("CurrentTerm")); v != nil || !isNotFound(err) {
		t.Fatalf("Get miss = %q, %v; want nil, \"not found\"", v, err)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); v != 0 || !isNotFound(err) {
		t.Fatalf("GetUint64 miss = %d, %v; want 0, \"not found\"", v, err)
	}
	// raft's own reading of a fresh store.
	snaps := raft.NewInmemSnapshotStore()
	if has, err := raft.HasExistingState(s, s, snaps); err != nil || has {
		t.Fatalf("HasExistingState on a fresh store = %v, %v", has, err)
	}
	for _, kv := range []struct{ k, v string }{{"a", "1"}, {"a", "22"}, {"empty", ""}, {"", "empty key"}} {
		if err := s.Set([]byte(kv.k), []byte(kv.v)); err != nil {
			t.Fatal(err)
		}
		if v, err := s.Get([]byte(kv.k)); err != nil || string(v) != kv.v || v == nil {
			t.Fatalf("Get(%q) = %q, %v; want %q", kv.k, v, err, kv.v)
		}
	}
	for _, v := range []uint64{0, 1, math.MaxUint64} {
		if err := s.SetUint64([]byte("CurrentTerm"), v); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetUint64([]byte("CurrentTerm")); err != nil || got != v {
			t.Fatalf("GetUint64 = %d, %v; want %d", got, err, v)
		}
	}
	if has, err := raft.HasExistingState(s, s, snaps); err != nil || !has {
		t.Fatalf("HasExistingState with a current term = %v, %v", has, err)
	}
	if _, err := s.GetUint64([]byte("a")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("GetUint64 of a 2-byte value = %v, want ErrCorrupt", err)
	}
	// Stable keys are not log entries.
	if f, _ := s.FirstIndex(); f != 0 {
		t.Fatalf("FirstIndex after stable writes = %d", f)
	}
	if st := s.Stats(); st.Syncs != 7 {
		t.Fatalf("Syncs after 7 stable writes = %d", st.Syncs)
	}
}

func TestCorruptData(t *testing.T) {
	db := openMem(t)
	s := mustNew(t, db, 1)
	mustStore(t, s, entries(1, 1, 3))
	key := appendLogKey(NamespaceLog.Prefix(1), 2)
	v, closer, err := db.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(v)
	closer.Close()
	bad[len(bad)/2] ^= 0x10
	if err := db.Set(key, bad, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := s.GetLog(2, &l); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("GetLog of a flipped bit = %v, want ErrCorrupt", err)
	}
	// The entry of index 3 stored under index 1's key.
	if err := db.Set(appendLogKey(NamespaceLog.Prefix(1), 1), appendEntry(nil, entry(1, 3)), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.GetLog(1, &l); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("GetLog of a misplaced entry = %v, want ErrCorrupt", err)
	}
	// A key in the log's range that is not a log key.
	if err := db.Set(append(NamespaceLog.Prefix(1), 9), nil, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if _, err := New(db, 1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("New over a short log key = %v, want ErrCorrupt", err)
	}
}

// TestConcurrentUse runs raft's pattern under the race detector: one
// goroutine appends, another truncates the prefix as snapshots would,
// others read; groups append at the same time.
func TestConcurrentUse(t *testing.T) {
	db := openMem(t)
	s := mustNew(t, db, 1)
	other := mustNew(t, db, 2)
	const batches, per = 60, 5
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(4)
	go func() { // the leader loop
		defer wg.Done()
		defer close(done)
		for b := uint64(0); b < batches; b++ {
			if err := s.StoreLogs(entries(1, b*per+1, b*per+per)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() { // another group
		defer wg.Done()
		for b := uint64(0); b < batches; b++ {
			if err := other.StoreLogs(entries(2, b*per+1, b*per+per)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() { // compaction after snapshots
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if last, _ := s.LastIndex(); last > 20 {
				if err := s.DeleteRange(0, last-20); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	go func() { // replication reading the oldest entries
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			first, _ := s.FirstIndex()
			var l raft.Log
			if err := s.GetLog(first, &l); err != nil && err != raft.ErrLogNotFound {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	fresh := mustNew(t, db, 1)
	f1, _ := s.FirstIndex()
	f2, _ := fresh.FirstIndex()
	l1, _ := s.LastIndex()
	l2, _ := fresh.LastIndex()
	if f1 != f2 || l1 != l2 || l1 != batches*per {
		t.Fatalf("cached bounds %d-%d, database %d-%d, want last %d", f1, l1, f2, l2, batches*per)
	}
	if l, _ := other.LastIndex(); l != batches*per {
		t.Fatalf("other group's last = %d", l)
	}
}
