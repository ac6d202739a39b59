package raftlog

import (
	"runtime"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Pacing of Pebble's background writes. With one P (rlserver --procs 1),
// a memtable flush or a compaction is a chain of goroutines (the flush and
// its blob-file writers) that keeps the P busy for tens of milliseconds,
// yielding only in short syscalls that keep the P. The Go scheduler polls
// the network only when its P finds nothing else to run, or from sysmon
// when no poll happened for 10 ms, so the event loop's ready connections
// wait that long. A pause — a short sleep, which parks the writer — every
// PaceBytes written to a table or blob file lets the P run out of work,
// poll the network and serve the loop between the blocks.
const (
	// PaceBytes is how much a flush or compaction writes to one table or
	// blob file between two pauses: about a quarter of a millisecond of
	// encoding and copying on this machine.
	PaceBytes = 128 << 10
	// PauseFor is each pause's sleep: long enough for the scheduler to
	// reach its network poll before the sleeper is due again. An idle P
	// sleeps in the poll for at least a millisecond, which bounds what the
	// pauses cost a flush on an idle node (one millisecond per PaceBytes).
	PauseFor = 20 * time.Microsecond
)

// Pause is a yield for background work that may keep the only P busy.
// runtime.Gosched queues the caller behind every goroutine already
// runnable (a sleep alone does not: a sleeper whose timer expired while
// others ran is readied into the P's next slot, ahead of the queue), and
// the sleep then lets the P go idle and poll the network, which Gosched
// alone never makes it do.
func Pause() {
	runtime.Gosched()
	time.Sleep(PauseFor)
}

// pacedFS is the database's filesystem with writes to table and blob files
// paced (see PaceBytes); the WAL, MANIFEST and everything else are not.
type pacedFS struct {
	vfs.FS
	pause func() // Pause; tests count the calls
}

// paced reports whether name is a table or a blob file.
func paced(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")
}

// Create creates name, paced if it is a table or blob file.
func (fs pacedFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil || !paced(name) {
		return f, err
	}
	return &pacedFile{File: f, pause: fs.pause}, nil
}

// Unwrap returns the filesystem underneath.
func (fs pacedFS) Unwrap() vfs.FS { return fs.FS }

// pacedFile pauses every PaceBytes written. A file is written by one
// goroutine at a time.
type pacedFile struct {
	vfs.File
	pause func()
	since int // bytes written since the last pause
}

// Write writes p and pauses if PaceBytes were written since the last pause.
func (f *pacedFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.wrote(n)
	return n, err
}

// WriteAt writes p at off, pacing like Write.
func (f *pacedFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	f.wrote(n)
	return n, err
}

// wrote counts n bytes written and pauses every PaceBytes.
func (f *pacedFile) wrote(n int) {
	f.since += n
	if f.since >= PaceBytes {
		f.since = 0
		f.pause()
	}
}
