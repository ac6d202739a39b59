package raftlog

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// WALWatcher hears of the write-ahead log files of a database opened with
// Options.WALs, so that its owner can keep a list of the WAL files that must
// exist and tell, at the next start, one that was removed by someone else.
// Pebble calls both methods synchronously, from its own goroutines (its
// commit pipeline among them): they must not call into the database.
type WALWatcher interface {
	// WALCreated is called once WAL num and its directory entry are
	// durable, before Pebble writes a record to it.
	WALCreated(num uint64)
	// WALRemoving is called before Pebble removes WAL num, or renames it to
	// reuse its file for a new WAL. An error keeps the file: Pebble creates
	// the new WAL as a new file instead, or leaves the old one for the next
	// open to delete.
	WALRemoving(num uint64) error
}

// WALName returns the file name of WAL num in the database's directory.
func WALName(num uint64) string { return fmt.Sprintf("%06d.log", num) }

// walNum returns the number of the WAL file named name (a base name), or
// false if name is not a WAL's.
func walNum(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, ".log")
	if !ok || len(digits) < 6 {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

// WALFiles returns the numbers of the WAL files in the database directory
// dir on fs, in increasing order. A missing directory holds none.
func WALFiles(fs vfs.FS, dir string) ([]uint64, error) {
	if fs == nil {
		fs = vfs.Default
	}
	names, err := fs.List(dir)
	if err != nil {
		if _, serr := fs.Stat(dir); serr != nil {
			return nil, nil
		}
		return nil, fmt.Errorf("raftlog: list %s: %w", dir, err)
	}
	var nums []uint64
	for _, name := range names {
		if n, ok := walNum(name); ok {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	return nums, nil
}

// walFS is the filesystem of a database opened with Options.WALs: it tells
// the watcher before a WAL file of dir goes away.
type walFS struct {
	vfs.FS
	dir string // as PathDir gives it for a file of the directory
	w   WALWatcher
}

// newWALFS returns fs watched by w for the WALs of the database in dir.
func newWALFS(fs vfs.FS, dir string, w WALWatcher) *walFS {
	return &walFS{FS: fs, dir: fs.PathDir(fs.PathJoin(dir, "x")), w: w}
}

// wal returns the number of the WAL at path, if path is a WAL of the
// database's directory.
func (fs *walFS) wal(path string) (uint64, bool) {
	if fs.FS.PathDir(path) != fs.dir {
		return 0, false
	}
	return walNum(fs.FS.PathBase(path))
}

// Remove tells the watcher before it removes a WAL; the watcher's error
// keeps the file.
func (fs *walFS) Remove(name string) error {
	if n, ok := fs.wal(name); ok {
		if err := fs.w.WALRemoving(n); err != nil {
			return err
		}
	}
	return fs.FS.Remove(name)
}

// ReuseForWrite tells the watcher before it renames a WAL for reuse; if
// the watcher refuses, the new WAL is created as a new file and the old
// one stays (ReuseForWrite's contract allows either).
func (fs *walFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if n, ok := fs.wal(oldname); ok {
		if err := fs.w.WALRemoving(n); err != nil {
			return fs.FS.Create(newname, category)
		}
	}
	return fs.FS.ReuseForWrite(oldname, newname, category)
}

// Unwrap returns the filesystem underneath.
func (fs *walFS) Unwrap() vfs.FS { return fs.FS }
