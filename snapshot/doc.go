// Package snapshot keeps the FSM snapshots of rlserver's Raft groups.
//
// Store implements raft.SnapshotStore in the node's Pebble database (the
// one package raftlog opens), under raftlog.NamespaceSnapshot and the
// group's id: a snapshot's data in chunks of ChunkSize bytes, written as
// the FSM streams it, and a metadata record, committed with pebble.Sync by
// the sink's Close, that makes it exist. Readers stream the chunks back
// and verify a CRC-32C of the data. DESIGN.md describes the layout, the
// commit protocol, retention and what a crash leaves.
//
// What the FSM writes into a snapshot (the codec) lives in this package
// too, in the files named codec*.go.
package snapshot
