package raftlog

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// FileProblem is a file of the database directory that is missing or
// damaged, found by CheckFiles.
type FileProblem struct {
	// Name is the file's name in the directory (a pattern such as
	// "marker.manifest.*" for a marker that is missing).
	Name string
	// What says what is wrong.
	What string
	// Spare is true for a file that holds no data and that Pebble writes
	// again when it is missing (an OPTIONS file): removing it loses
	// nothing.
	Spare bool
}

// CheckFiles checks, without opening it, the files through which Pebble
// finds the rest of an existing database in dir: the markers that name the
// current MANIFEST and the format version, that MANIFEST, and the newest
// OPTIONS file, which must parse and agree with the options OpenDB uses.
// Pebble's own errors for these say little of which file is at fault. A
// directory without a MANIFEST (no database) has no problems.
func CheckFiles(fs vfs.FS, dir string) ([]FileProblem, error) {
	if fs == nil {
		fs = vfs.Default
	}
	names, err := fs.List(dir)
	if err != nil {
		return nil, nil // no directory: OpenDB says what it makes of that
	}
	slices.Sort(names)
	var manifests, options []string
	var manifestMarker, formatMarker string
	for _, n := range names {
		switch {
		case strings.HasPrefix(n, "MANIFEST-"):
			manifests = append(manifests, n)
		case strings.HasPrefix(n, "OPTIONS-"):
			options = append(options, n)
		case strings.HasPrefix(n, "marker.manifest."):
			manifestMarker = n
		case strings.HasPrefix(n, "marker.format-version."):
			formatMarker = n
		}
	}
	if len(manifests) == 0 && manifestMarker == "" {
		return nil, nil
	}
	var found []FileProblem
	if formatMarker == "" {
		found = append(found, FileProblem{Name: "marker.format-version.*", What: "is missing: it records the database's format"})
	}
	if manifestMarker == "" {
		found = append(found, FileProblem{Name: "marker.manifest.*", What: "is missing: it names the current MANIFEST"})
	} else if cur := manifestMarker[strings.LastIndexByte(manifestMarker, '.')+1:]; !slices.Contains(manifests, cur) {
		found = append(found, FileProblem{Name: cur, What: "is missing: it lists the database's tables"})
	}
	if len(options) > 0 {
		newest := options[len(options)-1]
		if err := checkOptions(fs, dir, newest); err != nil {
			found = append(found, FileProblem{Name: newest, What: fmt.Sprintf("is damaged (%v)", err), Spare: true})
		}
	}
	return found, nil
}

// checkOptions checks that OPTIONS file name agrees with OpenDB's options,
// as Pebble does when it opens the database.
func checkOptions(fs vfs.FS, dir, name string) error {
	f, err := fs.Open(fs.PathJoin(dir, name))
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	opts := &pebble.Options{FS: fs}
	tune(opts, 0)
	opts.EnsureDefaults()
	return opts.CheckCompatibility(dir, string(data))
}

// Exists reports whether dir on fs holds a database: a MANIFEST, or the
// marker that names one.
func Exists(fs vfs.FS, dir string) bool {
	if fs == nil {
		fs = vfs.Default
	}
	names, err := fs.List(dir)
	if err != nil {
		return false
	}
	for _, n := range names {
		if strings.HasPrefix(n, "MANIFEST-") || strings.HasPrefix(n, "marker.manifest.") {
			return true
		}
	}
	return false
}
