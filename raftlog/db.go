package raftlog

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	crdberrors "github.com/cockroachdb/errors"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options says how OpenDB opens a node's database.
type Options struct {
	// FS is the filesystem; nil means the operating system's disk. Tests
	// pass vfs.NewMem() or vfs.NewCrashableMem().
	FS vfs.FS
	// Logger receives Pebble's log lines and events; nil discards them.
	Logger *slog.Logger
	// MustExist makes OpenDB fail with ErrNoDB instead of creating a
	// database, for a data directory that should already hold one.
	MustExist bool
	// WALs, when set, hears of the database's WAL files as Pebble creates
	// and removes them, from the start of OpenDB on (see WALWatcher).
	WALs WALWatcher
	// ReadOnly opens an existing database (else ErrNoDB) without changing
	// a file: the WALs are replayed into memory only, nothing is flushed
	// or deleted, and writes fail. It is for checking a directory before
	// a start that may refuse it.
	ReadOnly bool
	// MemTableSize is the size of each of Pebble's memtables; 0 is
	// DefaultMemTableSize. A node bounded by --maxmemory takes less (see
	// MemTableFor), since up to MemTableBudget of them are in memory at once.
	MemTableSize int64
	// CacheSize is the size of Pebble's block cache; 0 is
	// DefaultCacheSize.
	CacheSize int64
}

// formatVersion pins Pebble's on-disk format, so that a newer Pebble never
// ratchets it on its own (which would stop an older build from opening
// the directory). It is the newest format of Pebble v2.1 and includes WAL
// sync chunks, which let recovery tell a torn WAL tail (a crash) from
// corruption in the middle.
const formatVersion = pebble.FormatValueSeparation

// OpenDB opens, or creates unless o.MustExist, the Pebble database of a
// node in dir. Every Raft group's Store and snapshot store of the node
// live in it (see Namespace). The caller owns the database: it closes it
// once nothing uses it any more — after every Raft on it has shut down and
// every snapshot reader is closed, since Pebble panics on a closed DB.
func OpenDB(dir string, o Options) (*pebble.DB, error) {
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	fs := o.FS
	if fs == nil {
		fs = vfs.Default
	}
	fs = pacedFS{FS: fs, pause: Pause}
	events := eventListener(logger)
	if o.WALs != nil && !o.ReadOnly {
		fs = newWALFS(fs, dir, o.WALs)
		events.WALCreated = func(info pebble.WALCreateInfo) {
			if info.Err == nil {
				o.WALs.WALCreated(uint64(info.FileNum))
			}
		}
	}
	opts := &pebble.Options{
		FS:                 fs,
		Logger:             pebbleLogger{logger},
		EventListener:      events,
		ErrorIfNotExists:   o.MustExist,
		ReadOnly:           o.ReadOnly,
		FormatMajorVersion: formatVersion,
	}
	if o.FS == nil || o.FS == vfs.Default {
		opts.WithFSDefaults() // the disk health checks Pebble adds when it picks the disk itself
	}
	tune(opts, o.MemTableSize)
	if o.CacheSize > 0 {
		opts.CacheSize = o.CacheSize
	}
	opts.Experimental.CompactionScheduler = &compactions{} // one per database; no ticker
	db, err := pebble.Open(dir, opts)
	if errors.Is(err, pebble.ErrDBDoesNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNoDB, dir)
	}
	if err != nil {
		if details := crdberrors.GetAllDetails(err); len(details) > 0 {
			// Pebble keeps the file it failed on (the WAL it was replaying)
			// in the error's details, which Error() leaves out.
			return nil, fmt.Errorf("raftlog: open %s: %w (%s)", dir, err, strings.Join(details, "; "))
		}
		return nil, fmt.Errorf("raftlog: open %s: %w", dir, err)
	}
	return db, nil
}

// DefaultMemTableSize is the size of each of Pebble's memtables. It is
// larger than Pebble's default (4 MiB) so that log entries, which live only
// until the next snapshot truncates the log, are often deleted while still
// in the memtable, and the flush that writes it to a table elides them
// rather than writing them to be compacted away later.
const DefaultMemTableSize = 32 << 20

// DefaultCacheSize is Pebble's default block cache, which raftlog keeps.
const DefaultCacheSize = 8 << 20

// CacheFor returns the block cache size for a node whose memory is bounded
// by maxMemory bytes (0: no bound, DefaultCacheSize): a thirty-second of
// it, within [1 MiB, DefaultCacheSize]. The Raft log reads back little (a
// follower catching up, a restart), so a small cache costs little.
func CacheFor(maxMemory int64) int64 {
	if maxMemory <= 0 {
		return DefaultCacheSize
	}
	return min(DefaultCacheSize, max(maxMemory/32, 1<<20))
}

// MemTableBudget is how many memtables' worth of memory Pebble may hold at
// once: the mutable one, and one queued or being flushed (Pebble's default
// MemTableStopWritesThreshold, 2, stops writes rather than queue more).
const MemTableBudget = 2

// MinMemTableSize is the smallest memtable MemTableFor gives.
const MinMemTableSize = 2 << 20

// MemTableFor returns the memtable size for a node whose memory is bounded
// by maxMemory bytes (0: no bound, DefaultMemTableSize): a thirty-second of
// it, so that the memtables take at most a sixteenth of the bound, within
// [MinMemTableSize, DefaultMemTableSize]. Smaller memtables flush more often,
// so more short-lived log entries reach a table before they are deleted:
// more disk writes, in exchange for a process that fits its bound.
func MemTableFor(maxMemory int64) int64 {
	if maxMemory <= 0 {
		return DefaultMemTableSize
	}
	return min(max(maxMemory/32, MinMemTableSize), DefaultMemTableSize)
}

// tune sets the options that suit a Raft log: tables are not compressed
// (log entries are short-lived, and compressing them took about 4% of a
// loaded node's CPU), memtables are large (DefaultMemTableSize unless the node's memory is bounded), and values of a
// KiB and more — log entries, snapshot chunks — are separated into blob
// files when a memtable is flushed, so that compactions move only their
// keys: an entry is written once more by the flush and never again, and
// dropped with its blob file once the log is truncated behind a snapshot.
// Without it, compactions rewrote every entry they met (about 3% of a
// loaded node's CPU, and twice the disk writes).
func tune(opts *pebble.Options, memTable int64) {
	if memTable <= 0 {
		memTable = DefaultMemTableSize
	}
	opts.MemTableSize = uint64(memTable)
	opts.TargetFileSizes[0] = memTable
	opts.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{Enabled: true, MinimumSize: 1 << 10, MaxBlobReferenceDepth: 10,
			RewriteMinimumAge: time.Minute, TargetGarbageRatio: 0.5}
	}
	for i := range opts.Levels {
		opts.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
	}
}
