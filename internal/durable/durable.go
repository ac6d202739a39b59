// Package durable writes small files that must survive a crash whole or
// not at all: the node's identity and mark files, its remembered
// settings, the decision clock's mark. It works on a Pebble vfs.FS, so
// that the data directory's tests can hand it a file system of their own;
// callers on the real disk pass vfs.Default.
package durable

import (
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// WriteFile writes data as the file at path, whole or not at all: into
// path.tmp, synced, renamed over path, and the directory synced.
func WriteFile(fs vfs.FS, path string, data []byte) error {
	f, err := fs.Create(path+".tmp", vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(path+".tmp", path)
	}
	if err == nil {
		err = SyncDir(fs, filepath.Dir(path))
	}
	return err
}

// SyncDir makes the entries of directory dir durable.
func SyncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
