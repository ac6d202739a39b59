package raftlog

import "errors"

// Errors of this package. Each is returned wrapped with %w and context
// (test with errors.Is), except ErrKeyNotFound, which is returned as it
// is because raft compares its text (see ErrKeyNotFound).
var (
	// ErrKeyNotFound is returned by Store.Get and Store.GetUint64 for a key
	// that was never set. Its text is exactly "not found": hashicorp/raft
	// tells a missing key from a failure by comparing err.Error() with that
	// text (HasExistingState in api.go, NewRaft and requestVote in
	// raft.go), so it is never wrapped.
	ErrKeyNotFound = errors.New("not found")

	// ErrCorrupt is returned when a stored record or key cannot be decoded:
	// a log entry whose checksum, version or lengths are wrong, a log key of
	// the wrong length, a uint64 that is not 8 bytes. Nothing in this
	// package panics on bad data.
	ErrCorrupt = errors.New("raftlog: corrupt record")

	// ErrNoDB is returned by OpenDB when Options.MustExist is set and the
	// directory holds no database.
	ErrNoDB = errors.New("raftlog: no database in the directory")
)
