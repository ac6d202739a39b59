package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
)

// openMem opens a database on a fresh in-memory filesystem, closed when
// the test ends.
func openMem(t testing.TB) *pebble.DB {
	t.Helper()
	db := openOn(t, vfs.NewMem(), "db")
	t.Cleanup(func() { mustClose(t, db) })
	return db
}

// openOn opens the database in dir on fs; the caller closes it.
func openOn(t testing.TB, fs vfs.FS, dir string) *pebble.DB {
	t.Helper()
	db, err := OpenDB(dir, Options{FS: fs})
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

func mustNew(t testing.TB, db *pebble.DB, group uint32) *Store {
	t.Helper()
	s, err := New(db, group)
	if err != nil {
		t.Fatalf("New(group %d): %v", group, err)
	}
	return s
}

// entry returns a distinctive entry for index in a group.
func entry(group uint32, index uint64) *raft.Log {
	return &raft.Log{
		Index:      index,
		Term:       index/10 + 1,
		Type:       raft.LogType(index % 6),
		Data:       fmt.Appendf(nil, "g%d-i%d", group, index),
		Extensions: fmt.Appendf(nil, "ext%d", index%3),
		AppendedAt: time.Unix(1_700_000_000+int64(index), int64(index)*1000),
	}
}

// entries returns entry(group, i) for i from lo to hi.
func entries(group uint32, lo, hi uint64) []*raft.Log {
	var ls []*raft.Log
	for i := lo; i <= hi; i++ {
		ls = append(ls, entry(group, i))
	}
	return ls
}

// sameLog reports how got differs from want, or "" if it does not.
func sameLog(got, want *raft.Log) string {
	switch {
	case got.Index != want.Index || got.Term != want.Term || got.Type != want.Type:
		return fmt.Sprintf("index/term/type %d/%d/%v, want %d/%d/%v",
			got.Index, got.Term, got.Type, want.Index, want.Term, want.Type)
	case !bytes.Equal(got.Data, want.Data):
		return fmt.Sprintf("data %q, want %q", trim(got.Data), trim(want.Data))
	case !bytes.Equal(got.Extensions, want.Extensions):
		return fmt.Sprintf("extensions %q, want %q", got.Extensions, want.Extensions)
	case !got.AppendedAt.Equal(want.AppendedAt) || got.AppendedAt.IsZero() != want.AppendedAt.IsZero():
		return fmt.Sprintf("appendedAt %v, want %v", got.AppendedAt, want.AppendedAt)
	}
	return ""
}

func trim(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

// checkLogs verifies that s holds exactly the entries of want (by index)
// among indexes lo to hi, and that its bounds are first and last.
func checkLogs(s *Store, want map[uint64]*raft.Log, lo, hi, first, last uint64) error {
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	if f != first || l != last {
		return fmt.Errorf("bounds %d-%d, want %d-%d", f, l, first, last)
	}
	for i := lo; i <= hi; i++ {
		var got raft.Log
		err := s.GetLog(i, &got)
		w, ok := want[i]
		switch {
		case !ok && err != raft.ErrLogNotFound:
			return fmt.Errorf("GetLog(%d) = %v, want raft.ErrLogNotFound", i, err)
		case ok && err != nil:
			return fmt.Errorf("GetLog(%d): %v", i, err)
		case ok:
			if d := sameLog(&got, w); d != "" {
				return fmt.Errorf("GetLog(%d): %s", i, d)
			}
		}
	}
	return nil
}

// byIndex maps entries by index.
func byIndex(ls ...[]*raft.Log) map[uint64]*raft.Log {
	m := make(map[uint64]*raft.Log)
	for _, l := range ls {
		for _, e := range l {
			m[e.Index] = e
		}
	}
	return m
}

func mustStore(t testing.TB, s *Store, ls []*raft.Log) {
	t.Helper()
	if err := s.StoreLogs(ls); err != nil {
		t.Fatalf("StoreLogs: %v", err)
	}
}

func isNotFound(err error) bool {
	return err != nil && err.Error() == "not found" && errors.Is(err, ErrKeyNotFound)
}
