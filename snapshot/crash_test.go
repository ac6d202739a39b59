package snapshot

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rlserver/rlserver/internal/testseed"
	"github.com/rlserver/rlserver/raftlog"
)

// writtenSnapshot is a snapshot as it was written.
type writtenSnapshot struct {
	id          string
	index, term uint64
	data        []byte
}

func writeSnapshot(t *testing.T, s *Store, index uint64, size int) writtenSnapshot {
	t.Helper()
	d := payload(index, size)
	return writtenSnapshot{commitSnapshot(t, s, index, 1, d), index, 1, d}
}

// afterCrash reopens a crash image of fs with a new Store of group 1 and
// checks that it lists exactly want (newest first), each read back whole,
// and that no other chunk is left.
func afterCrash(fs *vfs.MemFS, cfg vfs.CrashCloneCfg, retain int, want ...writtenSnapshot) error {
	db, err := raftlog.OpenDB("db", raftlog.Options{FS: fs.CrashClone(cfg), MustExist: true})
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	defer db.Close()
	s, err := NewStore(db, 1, retain, nil)
	if err != nil {
		return fmt.Errorf("NewStore: %w", err)
	}
	metas, err := s.List()
	if err != nil {
		return err
	}
	var got, wantIDs []string
	for _, m := range metas {
		got = append(got, m.ID)
	}
	chunks := 0
	for _, w := range want {
		wantIDs = append(wantIDs, w.id)
		chunks += chunksOf(len(w.data))
		if err := checkSnapshot(s, w.id, w.index, w.term, w.data); err != nil {
			return err
		}
	}
	if !slices.Equal(got, wantIDs) {
		return fmt.Errorf("List = %v, want %v", got, wantIDs)
	}
	if m, c := countKeysErr(db, 1); m != len(want) || c != chunks {
		return fmt.Errorf("%d metadata and %d chunk keys, want %d and %d", m, c, len(want), chunks)
	}
	return nil
}

func countKeysErr(db *pebble.DB, group uint32) (metas, chunks int) {
	lo, hi := raftlog.NamespaceSnapshot.Bounds(group)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return -1, -1
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if it.Key()[raftlog.PrefixLen] == kindMeta {
			metas++
		} else {
			chunks++
		}
	}
	return metas, chunks
}

// TestCrash: a snapshot whose Close returned survives a crash, with or
// without part of the unsynced data; one whose Close did not run never
// appears, and its chunks are gone after NewStore; pruning and
// cancelling hold.
func TestCrash(t *testing.T) {
	rng := testseed.Rand(t)
	random := func() vfs.CrashCloneCfg {
		return vfs.CrashCloneCfg{UnsyncedDataPercent: 1 + rng.IntN(100), RNG: rand.New(rand.NewPCG(rng.Uint64(), 1))}
	}
	all := vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(rng.Uint64(), 2))}
	fs := vfs.NewCrashableMem()
	db := openOn(t, fs, "db")
	defer mustClose(t, db)
	s := mustStore(t, db, 1, 2)
	check := func(what string, cfg vfs.CrashCloneCfg, want ...writtenSnapshot) {
		t.Helper()
		if err := afterCrash(fs, cfg, 2, want...); err != nil {
			t.Fatalf("%s, crash keeping %d%% of unsynced data: %v", what, cfg.UnsyncedDataPercent, err)
		}
	}

	a := writeSnapshot(t, s, 10, 3*ChunkSize+5)
	check("after Close", vfs.CrashCloneCfg{}, a)
	check("after Close", random(), a)

	open := createSink(t, s, 20, 1, payload(20, 5*ChunkSize)) // 5 chunks committed without sync
	check("with a sink open", vfs.CrashCloneCfg{}, a)
	check("with a sink open", all, a) // its chunks are in the image, and NewStore removes them
	check("with a sink open", random(), a)

	if err := open.Close(); err != nil {
		t.Fatal(err)
	}
	b := writtenSnapshot{open.ID(), 20, 1, payload(20, 5*ChunkSize)}
	check("after the second Close", vfs.CrashCloneCfg{}, b, a)

	c := writeSnapshot(t, s, 30, ChunkSize/2) // prunes a, retain 2
	check("after pruning", vfs.CrashCloneCfg{}, c, b)
	check("after pruning", random(), c, b)

	// A cancelled sink whose chunks a later commit made durable, and whose
	// unsynced deletion the crash undoes: NewStore removes them.
	cancelled := createSink(t, s, 40, 1, payload(40, 2*ChunkSize+1))
	d := writeSnapshot(t, s, 50, 10) // prunes b; its synced commit makes the two chunks durable
	if err := cancelled.Cancel(); err != nil {
		t.Fatal(err)
	}
	if _, chunks := imageKeys(t, fs); chunks != chunksOf(len(c.data))+chunksOf(len(d.data))+2 {
		t.Fatalf("the crash image holds %d chunks: the cancelled sink's 2 should be back", chunks)
	}
	check("after Cancel", vfs.CrashCloneCfg{}, d, c)
	check("after Cancel", all, d, c)
	check("after Cancel", random(), d, c)
}

// imageKeys counts group 1's keys in a crash image of fs, as the database
// holds them before any Store cleans up.
func imageKeys(t *testing.T, fs *vfs.MemFS) (metas, chunks int) {
	t.Helper()
	db, err := raftlog.OpenDB("db", raftlog.Options{FS: fs.CrashClone(vfs.CrashCloneCfg{}), MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, db)
	return countKeys(t, db, 1)
}

// TestCrashCatchesUnsyncedCommit shows that the crash check has teeth: a
// metadata commit without sync is lost in the crash image, and the check
// says so.
func TestCrashCatchesUnsyncedCommit(t *testing.T) {
	fs := vfs.NewCrashableMem()
	db := openOn(t, fs, "db")
	defer mustClose(t, db)
	s := mustStore(t, db, 1, 2)
	a := writeSnapshot(t, s, 10, ChunkSize+1)
	s.sync = pebble.NoSync
	b := writeSnapshot(t, s, 20, ChunkSize+1)
	err := afterCrash(fs, vfs.CrashCloneCfg{}, 2, b, a)
	if err == nil {
		t.Fatal("a snapshot committed without sync survived the crash: the check cannot see a lost commit")
	}
	t.Logf("as expected: %v", err)
	if err := afterCrash(fs, vfs.CrashCloneCfg{}, 2, a); err != nil {
		t.Fatalf("the crash image should hold the synced snapshot alone: %v", err)
	}
}
