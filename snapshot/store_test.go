package snapshot

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

func TestWriteListOpen(t *testing.T) {
	for _, size := range []int{0, 1, 1000, ChunkSize - 1, ChunkSize, ChunkSize + 1, 5<<20 + 3} {
		db := openMem(t)
		s := mustStore(t, db, 1, 3)
		d := payload(uint64(size), size)
		id := commitSnapshot(t, s, 100, 7, d)
		if got := listIDs(t, s); !slices.Equal(got, []string{id}) {
			t.Fatalf("size %d: List = %v, want [%s]", size, got, id)
		}
		if err := checkSnapshot(s, id, 100, 7, d); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if metas, chunks := countKeys(t, db, 1); metas != 1 || chunks != chunksOf(size) {
			t.Fatalf("size %d: %d metadata and %d chunk keys, want 1 and %d", size, metas, chunks, chunksOf(size))
		}
		// A fresh Store reads the same.
		if err := checkSnapshot(mustStore(t, db, 1, 3), id, 100, 7, d); err != nil {
			t.Fatalf("size %d, new Store: %v", size, err)
		}
	}
}

func TestReadInSmallPieces(t *testing.T) {
	s := mustStore(t, openMem(t), 1, 1)
	d := payload(1, 3*ChunkSize+17)
	id := commitSnapshot(t, s, 10, 1, d)
	_, rc, err := s.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var got []byte
	buf := make([]byte, 4093) // not a divisor of the chunk size
	for {
		n, err := rc.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, d) {
		t.Fatal("read back differs")
	}
	if n, err := rc.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("Read after the end = %d, %v", n, err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Read(buf); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close = %v", err)
	}
	if err := rc.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestListNewestFirst(t *testing.T) {
	s := mustStore(t, openMem(t), 1, 10)
	var want []string
	for _, c := range []struct{ index, term uint64 }{{10, 1}, {20, 1}, {20, 2}, {5, 3}, {20, 2}} {
		want = append(want, commitSnapshot(t, s, c.index, c.term, []byte("x")))
	}
	// Highest term, then index, then the latest created.
	want = []string{want[3], want[4], want[2], want[1], want[0]}
	if got := listIDs(t, s); !slices.Equal(got, want) {
		t.Fatalf("List = %v, want %v", got, want)
	}
}

func TestCancel(t *testing.T) {
	db := openMem(t)
	s := mustStore(t, db, 1, 2)
	keep := commitSnapshot(t, s, 5, 1, payload(5, 1000))
	k := createSink(t, s, 10, 1, payload(1, 3*ChunkSize+5))
	if m, c := countKeys(t, db, 1); m != 1 || c != 1+3 {
		t.Fatalf("before Cancel: %d metadata and %d chunk keys", m, c)
	}
	if err := k.Cancel(); err != nil {
		t.Fatal(err)
	}
	if got := listIDs(t, s); !slices.Equal(got, []string{keep}) {
		t.Fatalf("List after Cancel = %v", got)
	}
	if m, c := countKeys(t, db, 1); m != 1 || c != 1 {
		t.Fatalf("after Cancel: %d metadata and %d chunk keys, want 1 and 1", m, c)
	}
	if _, err := k.Write([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Cancel = %v", err)
	}
	if err := k.Close(); err != nil || len(listIDs(t, s)) != 1 {
		t.Fatalf("Close after Cancel = %v, List %v", err, listIDs(t, s))
	}
	if _, _, err := s.Open(k.ID()); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("Open of a cancelled snapshot = %v", err)
	}
}

func TestRetainPrunes(t *testing.T) {
	db := openMem(t)
	s := mustStore(t, db, 1, 2)
	var all []string
	for i := uint64(1); i <= 5; i++ {
		all = append(all, commitSnapshot(t, s, i*10, 1, payload(i, int(i)*ChunkSize/2)))
	}
	if got := listIDs(t, s); !slices.Equal(got, []string{all[4], all[3]}) {
		t.Fatalf("List = %v, want the newest two", got)
	}
	if m, c := countKeys(t, db, 1); m != 2 || c != chunksOf(5*ChunkSize/2)+chunksOf(4*ChunkSize/2) {
		t.Fatalf("%d metadata and %d chunk keys left, want 2 and %d", m, c, chunksOf(5*ChunkSize/2)+chunksOf(2*ChunkSize))
	}
	for _, id := range all[:3] {
		if _, _, err := s.Open(id); !errors.Is(err, ErrNoSnapshot) {
			t.Fatalf("Open(%s), pruned = %v", id, err)
		}
	}
	for i, id := range all[3:] {
		if err := checkSnapshot(s, id, uint64(i+4)*10, 1, payload(uint64(i+4), (i+4)*ChunkSize/2)); err != nil {
			t.Fatal(err)
		}
	}
	// A store opened with a smaller retain prunes to it at once.
	s1 := mustStore(t, db, 1, 1)
	if got := listIDs(t, s1); !slices.Equal(got, []string{all[4]}) {
		t.Fatalf("List with retain 1 = %v", got)
	}
	if m, c := countKeys(t, db, 1); m != 1 || c != chunksOf(5*ChunkSize/2) {
		t.Fatalf("retain 1: %d metadata and %d chunk keys", m, c)
	}
}

// TestOpenSurvivesPruning: raft may send a snapshot to a follower while a
// newer one prunes it; the reader keeps its view.
func TestOpenSurvivesPruning(t *testing.T) {
	db := openMem(t)
	s := mustStore(t, db, 1, 1)
	d := payload(1, 2*ChunkSize+1)
	old := commitSnapshot(t, s, 10, 1, d)
	_, rc, err := s.Open(old)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	first := make([]byte, 10)
	if _, err := io.ReadFull(rc, first); err != nil {
		t.Fatal(err)
	}
	commitSnapshot(t, s, 20, 1, []byte("newer"))
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Open(old); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("the old snapshot was not pruned: %v", err)
	}
	rest, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(append(first, rest...), d) {
		t.Fatalf("reading a pruned snapshot opened before: %d bytes, %v", len(rest), err)
	}
}

// TestUnfinishedSinkRemoved: a sink never closed (the process died) is not
// listed, and the next NewStore removes its chunks.
func TestUnfinishedSinkRemoved(t *testing.T) {
	db := openMem(t)
	s := mustStore(t, db, 1, 2)
	keep := commitSnapshot(t, s, 5, 1, payload(5, ChunkSize+1))
	k := createSink(t, s, 10, 1, payload(10, 4*ChunkSize+1)) // 4 chunks written, the tail still in memory
	if got := listIDs(t, s); !slices.Equal(got, []string{keep}) {
		t.Fatalf("List with an open sink = %v", got)
	}
	if _, _, err := s.Open(k.ID()); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("Open of an unfinished snapshot = %v", err)
	}
	if m, c := countKeys(t, db, 1); m != 1 || c != 2+4 {
		t.Fatalf("before: %d metadata and %d chunk keys", m, c)
	}
	s2 := mustStore(t, db, 1, 2) // the restart
	if m, c := countKeys(t, db, 1); m != 1 || c != 2 {
		t.Fatalf("after NewStore: %d metadata and %d chunk keys, want 1 and 2", m, c)
	}
	if err := checkSnapshot(s2, keep, 5, 1, payload(5, ChunkSize+1)); err != nil {
		t.Fatal(err)
	}
	// A later snapshot never reuses the abandoned one's number.
	if id := commitSnapshot(t, s2, 10, 1, []byte("again")); id == k.ID() {
		t.Fatalf("new snapshot reuses the ID %s", id)
	}
}

func TestIDsUniqueAndRising(t *testing.T) {
	db := openMem(t)
	s := mustStore(t, db, 1, 1)
	frozen := time.Unix(1_800_000_000, 0)
	s.now = func() time.Time { return frozen }
	seen := map[string]bool{}
	var last uint64
	for i := 0; i < 50; i++ {
		k, err := s.Create(1, 10, 2, testConfig, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		num, ok := numOf(k.ID())
		if seen[k.ID()] || !ok || num <= last {
			t.Fatalf("ID %s after number %d (seen: %v)", k.ID(), last, seen[k.ID()])
		}
		if i == 0 && k.ID() != "2-10-1800000000000" {
			t.Fatalf("ID %s, want term-index-milliseconds 2-10-1800000000000", k.ID())
		}
		seen[k.ID()], last = true, num
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// After a restart with the clock behind, numbers still rise.
	s2 := mustStore(t, db, 1, 1)
	s2.now = func() time.Time { return frozen.Add(-time.Hour) }
	k, _ := s2.Create(1, 10, 2, testConfig, 1, nil)
	if num, _ := numOf(k.ID()); num <= last {
		t.Fatalf("after a restart: number %d, last %d", num, last)
	}
	k.Cancel()
}

func TestStats(t *testing.T) {
	s := mustStore(t, openMem(t), 1, 1)
	if st := s.Stats(); st != (Stats{}) {
		t.Fatalf("Stats before any snapshot = %+v", st)
	}
	clock := time.Unix(1_800_000_000, 0)
	s.now = func() time.Time { clock = clock.Add(1500 * time.Millisecond); return clock }
	commitSnapshot(t, s, 10, 1, payload(1, 12345))
	createSink(t, s, 20, 1, payload(1, 99)).Cancel()
	if st := s.Stats(); st.Snapshots != 1 || st.LastSize != 12345 || st.LastDuration != 1500*time.Millisecond {
		t.Fatalf("Stats = %+v, want 1 snapshot of 12345 bytes in 1.5s", st)
	}
}

func TestArgumentErrors(t *testing.T) {
	db := openMem(t)
	if _, err := NewStore(db, 1, 0, nil); !errors.Is(err, ErrBadRetain) {
		t.Fatalf("retain 0: %v", err)
	}
	s := mustStore(t, db, 1, 1)
	if _, err := s.Create(0, 1, 1, testConfig, 1, nil); !errors.Is(err, ErrSnapshotVersion) {
		t.Fatalf("version 0: %v", err)
	}
	id := commitSnapshot(t, s, 10, 3, []byte("x"))
	for _, bad := range []string{"", "junk", "3-10", "3-10-x", "4-10-" + id[len("3-10-"):], "3-11-" + id[len("3-10-"):]} {
		if _, _, err := s.Open(bad); !errors.Is(err, ErrNoSnapshot) {
			t.Fatalf("Open(%q) = %v, want ErrNoSnapshot", bad, err)
		}
	}
}

func TestGroupsAreIsolated(t *testing.T) {
	db := openMem(t)
	a, b := mustStore(t, db, 1, 1), mustStore(t, db, 2, 1)
	ida := commitSnapshot(t, a, 10, 1, payload(1, ChunkSize+1))
	idb := commitSnapshot(t, b, 11, 1, payload(2, 2*ChunkSize+1))
	unfinished := createSink(t, a, 20, 1, payload(3, 2*ChunkSize)) // group 1's sink, open
	// A restart of group 2 and its pruning leave group 1 alone.
	b = mustStore(t, db, 2, 1)
	commitSnapshot(t, b, 30, 1, []byte("prunes idb"))
	if m, c := countKeys(t, db, 1); m != 1 || c != 2+2 {
		t.Fatalf("group 1 after group 2's restart and pruning: %d metadata, %d chunks", m, c)
	}
	if got := listIDs(t, a); !slices.Equal(got, []string{ida}) {
		t.Fatalf("group 1 lists %v", got)
	}
	if _, _, err := a.Open(idb); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("group 1 opens group 2's snapshot: %v", err)
	}
	if err := unfinished.Close(); err != nil {
		t.Fatal(err)
	}
	if err := checkSnapshot(a, unfinished.ID(), 20, 1, payload(3, 2*ChunkSize)); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptionIsReported damages a committed snapshot directly in Pebble
// in each way and reads it: an error, never a clean io.EOF.
func TestCorruptionIsReported(t *testing.T) {
	size := 3*ChunkSize + 100
	for _, c := range []struct {
		name   string
		damage func(db *pebble.DB, k keys, num uint64) error
	}{
		{"a flipped byte", func(db *pebble.DB, k keys, num uint64) error {
			return rewrite(db, k.chunk(num, 1), func(v []byte) []byte { v[1000] ^= 1; return v })
		}},
		{"a missing chunk", func(db *pebble.DB, k keys, num uint64) error {
			return db.Delete(k.chunk(num, 2), pebble.Sync)
		}},
		{"a missing last chunk", func(db *pebble.DB, k keys, num uint64) error {
			return db.Delete(k.chunk(num, 3), pebble.Sync)
		}},
		{"an extra chunk", func(db *pebble.DB, k keys, num uint64) error {
			return db.Set(k.chunk(num, 4), []byte("more"), pebble.Sync)
		}},
		{"a truncated chunk", func(db *pebble.DB, k keys, num uint64) error {
			return rewrite(db, k.chunk(num, 0), func(v []byte) []byte { return v[:len(v)-1] })
		}},
		{"a longer chunk", func(db *pebble.DB, k keys, num uint64) error {
			return rewrite(db, k.chunk(num, 3), func(v []byte) []byte { return append(v, 0) })
		}},
		{"two chunks swapped", func(db *pebble.DB, k keys, num uint64) error {
			var c0 []byte
			if err := rewrite(db, k.chunk(num, 0), func(v []byte) []byte { c0 = bytes.Clone(v); return v }); err != nil {
				return err
			}
			var c1 []byte
			if err := rewrite(db, k.chunk(num, 1), func(v []byte) []byte { c1 = bytes.Clone(v); return c0 }); err != nil {
				return err
			}
			return db.Set(k.chunk(num, 0), c1, pebble.Sync)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := openMem(t)
			s := mustStore(t, db, 1, 1)
			id := commitSnapshot(t, s, 10, 1, payload(1, size))
			num, _ := numOf(id)
			if err := c.damage(db, s.keys, num); err != nil {
				t.Fatal(err)
			}
			if _, _, err := readBack(s, id); !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("reading the damaged snapshot: %v, want ErrCorruptSnapshot", err)
			}
		})
	}
	t.Run("metadata", func(t *testing.T) {
		db := openMem(t)
		s := mustStore(t, db, 1, 1)
		id := commitSnapshot(t, s, 10, 1, payload(1, 10))
		num, _ := numOf(id)
		if err := rewrite(db, s.keys.meta(num), func(v []byte) []byte { v[3] ^= 0x40; return v }); err != nil {
			t.Fatal(err)
		}
		if _, err := s.List(); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("List = %v", err)
		}
		if _, _, err := s.Open(id); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("Open = %v", err)
		}
		if _, err := NewStore(db, 1, 1, nil); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("NewStore = %v", err)
		}
	})
}

// rewrite replaces the value under key with f of a copy of it.
func rewrite(db *pebble.DB, key []byte, f func([]byte) []byte) error {
	v, closer, err := db.Get(key)
	if err != nil {
		return err
	}
	nv := f(bytes.Clone(v))
	closer.Close()
	return db.Set(key, nv, pebble.Sync)
}

// TestDeleteAndReader: Delete removes one snapshot, its metadata and its
// chunks, and leaves the others; NewReader lists and reads them and
// writes nothing, leaving an unfinished snapshot's chunks where they are.
func TestDeleteAndReader(t *testing.T) {
	db := openMem(t)
	s := mustStore(t, db, 1, 3)
	a := commitSnapshot(t, s, 5, 1, payload(5, 2*ChunkSize+1))
	b := commitSnapshot(t, s, 9, 1, payload(9, ChunkSize+3))
	createSink(t, s, 12, 1, payload(12, 2*ChunkSize+1)) // unfinished: 2 chunks written
	r, err := NewReader(db, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := listIDs(t, r); !slices.Equal(got, []string{b, a}) {
		t.Fatalf("reader lists %v", got)
	}
	if err := checkSnapshot(r, a, 5, 1, payload(5, 2*ChunkSize+1)); err != nil {
		t.Fatal(err)
	}
	if m, c := countKeys(t, db, 1); m != 2 || c != 3+2+2 {
		t.Fatalf("NewReader wrote: %d metadata and %d chunk keys", m, c)
	}
	if err := s.Delete(b); err != nil {
		t.Fatal(err)
	}
	if got := listIDs(t, s); !slices.Equal(got, []string{a}) {
		t.Fatalf("after Delete: %v", got)
	}
	if m, c := countKeys(t, db, 1); m != 1 || c != 3+2 {
		t.Fatalf("after Delete: %d metadata and %d chunk keys, want 1 and 5", m, c)
	}
	if err := s.Delete(b); err != nil {
		t.Fatalf("deleting it again: %v", err)
	}
	if err := s.Delete("nonsense"); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("Delete(nonsense) = %v", err)
	}
	if err := checkSnapshot(s, a, 5, 1, payload(5, 2*ChunkSize+1)); err != nil {
		t.Fatal(err)
	}
}
