package raftlog

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/rlserver/rlserver/internal/testseed"
)

// crashModel is what a group's store must hold after any crash: every
// write that returned, nothing that a returned deletion removed.
type crashModel struct {
	group  uint32
	logs   map[uint64]*raft.Log
	stable map[string][]byte
	top    uint64 // the highest index ever stored: deleted ones are checked up to it
}

func newCrashModel(group uint32) *crashModel {
	return &crashModel{group: group, logs: map[uint64]*raft.Log{}, stable: map[string][]byte{}}
}

func (m *crashModel) bounds() (first, last uint64) {
	for i := range m.logs {
		if first == 0 || i < first {
			first = i
		}
		last = max(last, i)
	}
	return first, last
}

// check opens a Store of the model's group in db and compares.
func (m *crashModel) check(db *pebble.DB) error {
	s, err := New(db, m.group)
	if err != nil {
		return err
	}
	first, last := m.bounds()
	if err := checkLogs(s, m.logs, 1, m.top+1, first, last); err != nil {
		return err
	}
	for k, want := range m.stable {
		got, err := s.Get([]byte(k))
		if err != nil || !bytes.Equal(got, want) {
			return fmt.Errorf("stable %q = %x, %v; want %x", k, got, err, want)
		}
	}
	return nil
}

// crashOp is one write to a store, applied to the model once it returned.
type crashOp struct {
	name string
	do   func(s *Store) error
	then func(m *crashModel)
}

// randomOp picks raft's kinds of writes: appends (sometimes after a gap or
// over a conflicting suffix), prefix and suffix truncations, a hole in the
// middle, everything, and stable-store writes.
func randomOp(rng *rand.Rand, m *crashModel) crashOp {
	first, last := m.bounds()
	switch k := rng.IntN(10); {
	case k < 4 || last == 0:
		from := last + 1 + uint64(rng.IntN(2)*rng.IntN(5)) // a gap now and then
		if k == 0 && last > 3 {
			from = last - uint64(rng.IntN(3)) // overwrite the tail, as after a conflict
		}
		ls := randomEntries(rng, m.group, from, from+uint64(rng.IntN(20)))
		return crashOp{fmt.Sprintf("StoreLogs(%d-%d)", from, ls[len(ls)-1].Index),
			func(s *Store) error { return s.StoreLogs(ls) },
			func(m *crashModel) {
				for _, l := range ls {
					m.logs[l.Index], m.top = l, max(m.top, l.Index)
				}
			}}
	case k < 6:
		return deleteOp(0, first+uint64(rng.IntN(int(last-first+1))))
	case k < 7:
		return deleteOp(first+uint64(rng.IntN(int(last-first+1))), last+uint64(rng.IntN(3)))
	case k < 8:
		lo := first + uint64(rng.IntN(int(last-first+1)))
		if rng.IntN(5) == 0 {
			return deleteOp(0, last)
		}
		return deleteOp(lo, lo+uint64(rng.IntN(4)))
	default:
		key, val := fmt.Sprintf("key%d", rng.IntN(4)), rng.Uint64()
		if rng.IntN(2) == 0 {
			return crashOp{"SetUint64(" + key + ")",
				func(s *Store) error { return s.SetUint64([]byte(key), val) },
				func(m *crashModel) { m.stable[key] = bytesOf(val) }}
		}
		v := fmt.Appendf(nil, "value %d", val)
		return crashOp{"Set(" + key + ")",
			func(s *Store) error { return s.Set([]byte(key), v) },
			func(m *crashModel) { m.stable[key] = v }}
	}
}

func deleteOp(lo, hi uint64) crashOp {
	return crashOp{fmt.Sprintf("DeleteRange(%d, %d)", lo, hi),
		func(s *Store) error { return s.DeleteRange(lo, hi) },
		func(m *crashModel) {
			for i := range m.logs {
				if lo <= i && i <= hi {
					delete(m.logs, i)
				}
			}
		}}
}

func bytesOf(v uint64) []byte {
	return []byte{byte(v >> 56), byte(v >> 48), byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

func randomEntries(rng *rand.Rand, group uint32, lo, hi uint64) []*raft.Log {
	ls := entries(group, lo, hi)
	for _, l := range ls {
		l.Data = randBytes(rng.IntN(2000)*rng.IntN(2)+rng.IntN(2)*rng.IntN(2)*rng.IntN(50_000), rng.Uint32)
	}
	return ls
}

// crashCheck takes a crash image of fs and checks every model against it.
func crashCheck(fs *vfs.MemFS, cfg vfs.CrashCloneCfg, models ...*crashModel) error {
	clone := fs.CrashClone(cfg)
	db, err := OpenDB("db", Options{FS: clone, MustExist: true})
	if err != nil {
		return fmt.Errorf("reopen after the crash: %w", err)
	}
	defer db.Close()
	for _, m := range models {
		if err := m.check(db); err != nil {
			return fmt.Errorf("group %d: %w", m.group, err)
		}
	}
	return nil
}

// TestCrash runs random writes on two groups of a crashable filesystem and
// after every one that returned takes a crash image holding only what was
// synced (and now and then a random part of what was not): reopened, it
// holds everything those calls wrote and nothing they deleted.
func TestCrash(t *testing.T) {
	rng := testseed.Rand(t)
	fs := vfs.NewCrashableMem()
	db := openOn(t, fs, "db")
	defer mustClose(t, db)
	models := []*crashModel{newCrashModel(1), newCrashModel(2)}
	stores := []*Store{mustNew(t, db, 1), mustNew(t, db, 2)}
	ops := 100
	if testing.Short() {
		ops = 30
	}
	for i := 0; i < ops; i++ {
		g := rng.IntN(2)
		op := randomOp(rng, models[g])
		if err := op.do(stores[g]); err != nil {
			t.Fatalf("op %d, group %d, %s: %v", i, g+1, op.name, err)
		}
		op.then(models[g])
		if err := crashCheck(fs, vfs.CrashCloneCfg{}, models...); err != nil {
			t.Fatalf("after op %d, group %d, %s, a crash: %v", i, g+1, op.name, err)
		}
		if i%8 == 7 {
			cfg := vfs.CrashCloneCfg{UnsyncedDataPercent: 1 + rng.IntN(99), RNG: rand.New(rand.NewPCG(rng.Uint64(), 0))}
			if err := crashCheck(fs, cfg, models...); err != nil {
				t.Fatalf("after op %d, group %d, %s, a crash keeping %d%% of the unsynced data: %v",
					i, g+1, op.name, cfg.UnsyncedDataPercent, err)
			}
		}
		if i%40 == 39 {
			if err := db.Flush(); err != nil { // later ops then delete from sstables, not the memtable
				t.Fatal(err)
			}
		}
	}
}

// TestCrashCatchesUnsyncedWrites shows that the crash check has teeth: the
// same writes committed without sync are lost, or come back after being
// deleted, in the crash image, and the check says so.
func TestCrashCatchesUnsyncedWrites(t *testing.T) {
	fs := vfs.NewCrashableMem()
	db := openOn(t, fs, "db")
	defer mustClose(t, db)
	s := mustNew(t, db, 1)
	m := newCrashModel(1)
	apply := func(op crashOp) {
		t.Helper()
		if err := op.do(s); err != nil {
			t.Fatal(err)
		}
		op.then(m)
	}
	ls := entries(1, 1, 10)
	store := crashOp{"StoreLogs(1-10)", func(s *Store) error { return s.StoreLogs(ls) },
		func(m *crashModel) {
			for _, l := range ls {
				m.logs[l.Index], m.top = l, max(m.top, l.Index)
			}
		}}
	apply(store)
	if err := crashCheck(fs, vfs.CrashCloneCfg{}, m); err != nil {
		t.Fatalf("synced: %v", err)
	}

	s.write = pebble.NoSync
	apply(deleteOp(1, 5))
	if err := crashCheck(fs, vfs.CrashCloneCfg{}, m); err == nil {
		t.Fatal("an unsynced DeleteRange survived the crash: the check cannot see lost deletions")
	} else {
		t.Logf("unsynced DeleteRange, as expected: %v", err)
	}
	more := entries(1, 11, 12)
	apply(crashOp{"StoreLogs(11-12)", func(s *Store) error { return s.StoreLogs(more) },
		func(m *crashModel) {
			for _, l := range more {
				m.logs[l.Index], m.top = l, max(m.top, l.Index)
			}
		}})
	apply(crashOp{"Set(k)", func(s *Store) error { return s.Set([]byte("k"), []byte("v")) },
		func(m *crashModel) { m.stable["k"] = []byte("v") }})
	clone := fs.CrashClone(vfs.CrashCloneCfg{})
	db2, err := OpenDB("db", Options{FS: clone})
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, db2)
	s2 := mustNew(t, db2, 1)
	if last, _ := s2.LastIndex(); last != 10 {
		t.Fatalf("LastIndex after a crash lost unsynced appends = %d, want 10", last)
	}
	if first, _ := s2.FirstIndex(); first != 1 {
		t.Fatalf("FirstIndex after a crash lost an unsynced deletion = %d, want 1 (deleted entries back)", first)
	}
	if _, err := s2.Get([]byte("k")); !isNotFound(err) {
		t.Fatalf("an unsynced Set survived: %v", err)
	}
	// Once synced again, the crash image is whole.
	s.write = pebble.Sync
	apply(crashOp{"Set(k2)", func(s *Store) error { return s.Set([]byte("k2"), []byte("v")) },
		func(m *crashModel) { m.stable["k2"] = []byte("v") }})
	if err := crashCheck(fs, vfs.CrashCloneCfg{}, m); err != nil {
		t.Fatalf("a synced write after unsynced ones makes them durable too (one WAL), yet: %v", err)
	}
}
