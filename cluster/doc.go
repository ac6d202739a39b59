// Package cluster runs the node's Raft groups: the thin FSM over the shard
// state (fsm.go), a replica of one group (group.go), the applier that turns
// the journals of changed keys into log entries and tells the server when
// they are committed (applier.go), the standalone Node of one group
// (node.go), and the Cluster node (cluster.go): a voter of the meta group
// (meta.go: members, placement, rules) and of the data groups that own the
// slot ranges, which routes keys (router.go), follows and balances leaders
// (watch.go), coordinates RL.CHECKRULES across groups (rules.go) and talks
// to the other nodes over one listener (rpc.go, package transport).
// DESIGN.md beside this file explains how state travels through the log
// and between nodes, and what each consistency mode promises.
//
// The log, the stable store and the snapshots of every group of a node
// live in one Pebble database (packages raftlog and snapshot), keyed by
// group.
package cluster
