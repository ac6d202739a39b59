package snapshot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/rlserver/rlserver/raftlog"
)

// openMem opens a node database on a fresh in-memory filesystem, closed
// when the test ends.
func openMem(t testing.TB) *pebble.DB {
	t.Helper()
	db := openOn(t, vfs.NewMem(), "db")
	t.Cleanup(func() { mustClose(t, db) })
	return db
}

// openOn opens the database in dir on fs; the caller closes it.
func openOn(t testing.TB, fs vfs.FS, dir string) *pebble.DB {
	t.Helper()
	db, err := raftlog.OpenDB(dir, raftlog.Options{FS: fs})
	if err != nil {
		t.Fatalf("OpenDB: %v", err)
	}
	return db
}

func mustClose(t testing.TB, db *pebble.DB) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

func mustStore(t testing.TB, db *pebble.DB, group uint32, retain int) *Store {
	t.Helper()
	s, err := NewStore(db, group, retain, nil)
	if err != nil {
		t.Fatalf("NewStore(group %d): %v", group, err)
	}
	return s
}

var testConfig = raft.Configuration{Servers: []raft.Server{
	{Suffrage: raft.Voter, ID: "n1", Address: "127.0.0.1:7001"},
	{Suffrage: raft.Nonvoter, ID: "n2", Address: "[::1]:7002"},
}}

// payload returns n bytes that depend on seed and on their offset, so that a
// misplaced chunk shows.
func payload(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	b := make([]byte, n+8)
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
	}
	return b[:n]
}

// createSink starts a snapshot and writes d to it in pieces of varied size.
func createSink(t testing.TB, s *Store, index, term uint64, d []byte) raft.SnapshotSink {
	t.Helper()
	k, err := s.Create(1, index, term, testConfig, index-1, nil)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	for off, step := 0, 1; off < len(d); step = step*3 + 1 {
		end := min(off+step, len(d))
		if n, err := k.Write(d[off:end]); err != nil || n != end-off {
			t.Fatalf("Write: %d, %v", n, err)
		}
		off = end
	}
	return k
}

// commitSnapshot writes a snapshot of d and closes it; it returns its ID.
func commitSnapshot(t testing.TB, s *Store, index, term uint64, d []byte) string {
	t.Helper()
	k := createSink(t, s, index, term, d)
	if err := k.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return k.ID()
}

// readBack opens id and reads it whole.
func readBack(s *Store, id string) (*raft.SnapshotMeta, []byte, error) {
	m, rc, err := s.Open(id)
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(rc)
	if cerr := rc.Close(); err == nil {
		err = cerr
	}
	return m, b, err
}

// checkSnapshot reads id back and compares it with what was written.
func checkSnapshot(s *Store, id string, index, term uint64, d []byte) error {
	m, got, err := readBack(s, id)
	if err != nil {
		return fmt.Errorf("read %s: %w", id, err)
	}
	if m.ID != id || m.Index != index || m.Term != term || m.Size != int64(len(d)) || m.Version != 1 ||
		m.ConfigurationIndex != index-1 || fmt.Sprint(m.Configuration) != fmt.Sprint(testConfig) {
		return fmt.Errorf("meta of %s: %+v", id, *m)
	}
	if !bytes.Equal(got, d) {
		return fmt.Errorf("%s: read %d bytes that differ from the %d written", id, len(got), len(d))
	}
	return nil
}

// listIDs lists the IDs of the snapshots, newest first.
func listIDs(t testing.TB, s *Store) []string {
	t.Helper()
	metas, err := s.List()
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var out []string
	for _, m := range metas {
		out = append(out, m.ID)
	}
	return out
}

// countKeys counts the keys of group's snapshot namespace, by kind.
func countKeys(t testing.TB, db *pebble.DB, group uint32) (metas, chunks int) {
	t.Helper()
	lo, hi := raftlog.NamespaceSnapshot.Bounds(group)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		switch it.Key()[raftlog.PrefixLen] {
		case kindMeta:
			metas++
		case kindChunk:
			chunks++
		default:
			t.Fatalf("unexpected key %x", it.Key())
		}
	}
	return metas, chunks
}

func chunksOf(size int) int { return (size + ChunkSize - 1) / ChunkSize }
