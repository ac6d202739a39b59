// Package raftlog keeps what github.com/hashicorp/raft stores durably — the
// Raft log and the stable store — in one Pebble database per node.
//
// Every Raft group of a node shares that database, so that all their writes
// commit through one write-ahead log and concurrent commits share its
// fsyncs. Keys begin with a one-byte Namespace (the log, the stable store,
// the snapshot store of package snapshot, the node's metadata) and the
// group id; DESIGN.md has the table.
//
// OpenDB opens the database with our options; New returns the Store of one
// group, which implements raft.LogStore and raft.StableStore. Every write
// is committed with pebble.Sync before it returns, so whatever a call that
// returned nil wrote survives a crash, and whatever it deleted stays
// deleted.
//
// The package imports nothing else of rlserver and keeps no global state.
package raftlog
