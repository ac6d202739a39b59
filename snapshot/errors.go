package snapshot

import "errors"

// Errors of the snapshot store. Each is returned wrapped with %w and
// context; test with errors.Is.
var (
	// ErrNoSnapshot is returned by Store.Open for an id that names no
	// committed snapshot (never committed, cancelled, or pruned).
	ErrNoSnapshot = errors.New("snapshot: no such snapshot")

	// ErrCorruptSnapshot is returned when stored data is not what was
	// committed: a metadata record that does not decode, and, from a
	// reader, a missing or extra chunk, a size or a CRC-32C that differs
	// from the metadata's. A reader reports it instead of io.EOF, so a
	// corrupt snapshot is never read to its end without an error.
	ErrCorruptSnapshot = errors.New("snapshot: corrupt snapshot")

	// ErrClosed is returned by a sink's Write after Close or Cancel, and
	// by a reader's Read after Close.
	ErrClosed = errors.New("snapshot: use after close")

	// ErrBadRetain is returned by NewStore for a retain below 1.
	ErrBadRetain = errors.New("snapshot: must retain at least one snapshot")

	// ErrSnapshotVersion is returned by Store.Create for a raft snapshot
	// version other than 1, the only one raft writes today.
	ErrSnapshotVersion = errors.New("snapshot: unsupported raft snapshot version")
)
