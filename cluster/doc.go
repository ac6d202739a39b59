// Package cluster runs the node's Raft group: the thin FSM over the shard
// state (fsm.go), the applier that turns the journal of changed keys into
// log entries and tells the server when they are committed (applier.go),
// and the Node that wires them to hashicorp/raft (node.go). DESIGN.md
// beside this file explains how state travels through the log and what
// each consistency mode promises.
//
// Today a node is a one-voter group: durable on its own disk. The log,
// the stable store and the snapshots live in one Pebble database
// (packages raftlog and snapshot), keyed by group, so that more groups
// and more voters are an addition, not a change of format.
package cluster
