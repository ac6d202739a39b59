package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
)

// Range is the indexes From to To, both included.
type Range struct{ From, To uint64 }

// String returns "From-To", or "From" for one index.
func (r Range) String() string {
	if r.From == r.To {
		return fmt.Sprint(r.From)
	}
	return fmt.Sprintf("%d-%d", r.From, r.To)
}

// Scanned is what Scan found in a group's log.
type Scanned struct {
	// First and Last are the lowest and highest index stored; both 0 when
	// the log is empty. Entries counts the entries stored.
	First, Last, Entries uint64
	// Gaps are the indexes between First and Last with no entry, in order.
	Gaps []Range
	// Unreadable are the entries stored whose value cannot be read or
	// decoded, in order; BadErr is the first of their errors.
	Unreadable []Range
	BadErr     error
}

// Scan reads and decodes every entry of the group's log, in index order,
// and says where it found none (gaps) or could not read one. It reads the
// whole log, so it is meant for a check at start, before raft, which
// panics on an entry it cannot read between the snapshot and the last
// index. An error that stops the iteration itself (a file of the database
// cannot be read) is returned with what was found before it.
func (s *Store) Scan() (Scanned, error) {
	var sc Scanned
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: s.logLo, UpperBound: s.logHi})
	if err != nil {
		return sc, fmt.Errorf("raftlog: group %d: scan the log: %w", s.group, err)
	}
	var l raft.Log
	for ok := it.First(); ok; ok = it.Next() {
		key := it.Key()
		if len(key) != logKeyLen {
			sc.bad(sc.Last+1, fmt.Errorf("%w: group %d: log key %x", ErrCorrupt, s.group, key))
			continue
		}
		index := binary.BigEndian.Uint64(key[PrefixLen:])
		switch {
		case sc.Entries == 0:
			sc.First = index
		case index > sc.Last+1:
			sc.Gaps = addRange(sc.Gaps, sc.Last+1, index-1)
		}
		sc.Last, sc.Entries = index, sc.Entries+1
		v, err := it.ValueAndErr()
		if err == nil {
			err = decodeEntry(v, index, &l)
		}
		if err != nil {
			sc.bad(index, fmt.Errorf("raftlog: group %d: log %d: %w", s.group, index, err))
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return sc, fmt.Errorf("raftlog: group %d: scan the log after index %d: %w", s.group, sc.Last, err)
	}
	return sc, nil
}

// bad records that the entry at index cannot be read.
func (sc *Scanned) bad(index uint64, err error) {
	if sc.BadErr == nil {
		sc.BadErr = err
	}
	sc.Unreadable = addRange(sc.Unreadable, index, index)
}

// addRange appends from-to to rs, merged with the last range if it
// follows it.
func addRange(rs []Range, from, to uint64) []Range {
	if n := len(rs); n > 0 && rs[n-1].To != math.MaxUint64 && rs[n-1].To+1 == from {
		rs[n-1].To = to
		return rs
	}
	return append(rs, Range{from, to})
}

// Groups returns the ids of the groups that hold any key under namespace
// ns in db, in increasing order. It seeks once per group.
func Groups(db *pebble.DB, ns Namespace) ([]uint32, error) {
	lo, hi := []byte{byte(ns)}, []byte{byte(ns) + 1}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("raftlog: list the groups: %w", err)
	}
	var groups []uint32
	for ok := it.First(); ok; {
		key := it.Key()
		if len(key) < PrefixLen {
			ok = it.Next()
			continue
		}
		g := binary.BigEndian.Uint32(key[1:PrefixLen])
		groups = append(groups, g)
		if g == math.MaxUint32 {
			break
		}
		ok = it.SeekGE(ns.Prefix(g + 1))
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, fmt.Errorf("raftlog: list the groups: %w", err)
	}
	return groups, nil
}

// CheckBlobFiles returns a problem for each blob file that the database's
// current version refers to and that is missing from dir on fs, or whose
// size differs from the one the MANIFEST recorded. Pebble checks its
// tables so when it opens, but not its blob files, and (v2.1) panics when
// it reads a value from a blob file that is gone or cut: call it before
// reading values of a database that may have been damaged.
func CheckBlobFiles(db *pebble.DB, fs vfs.FS, dir string) []FileProblem {
	if fs == nil {
		fs = vfs.Default
	}
	v := db.DebugCurrentVersion()
	var bad []FileProblem
	for bf := range v.BlobFiles.All() {
		name := fmt.Sprintf("%06d.blob", uint64(bf.Physical.FileNum))
		fi, err := fs.Stat(fs.PathJoin(dir, name))
		switch {
		case err != nil:
			bad = append(bad, FileProblem{Name: name, What: "is missing"})
		case uint64(fi.Size()) != bf.Physical.Size:
			bad = append(bad, FileProblem{Name: name,
				What: fmt.Sprintf("holds %d bytes, not the %d the MANIFEST recorded", fi.Size(), bf.Physical.Size)})
		}
	}
	return bad
}
