// Package datadir is a node's data directory: one Pebble database that
// holds the Raft log, stable store and snapshots of every group of the
// node (packages raftlog and snapshot, keyed by group), the node id file,
// the cluster layout, and the mark file that lets a start find what a
// lost or cut file took with it. cluster/DESIGN.md explains the checks a
// start makes (sections "Start" and "Damaged files").
//
// Where each part lives:
//
//   - Storage, OpenStorage and its checks before anything changes, the
//     node id, Layout, the groups' stores (storage.go).
//   - Damage found at start and its repair with AcceptDataLoss
//     (damage.go); a hole in a log bridged by a snapshot of the state
//     replayed around it (bridge.go).
//   - The mark file: its format and its two slots (mark.go), and the
//     marker that keeps it true while the node runs (marker.go).
//   - The rlserver_disk_* series of the free-space guard (metrics.go).
//
// Imports go one way: package cluster imports datadir, never the other
// way round. What datadir needs of the replication core, the replay of a
// group's entries into a state for a bridge, it is given as a function
// (StorageOptions.Replay, a Replayer), which cluster.OpenStorage sets.
package datadir
