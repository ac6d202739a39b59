// Package cluster runs the node's Raft groups: a standalone Node of one
// group, or a Cluster node that is a voter of the meta group and of the
// data groups that own the slot ranges. DESIGN.md beside this file
// explains how state travels through the log and between nodes, what each
// consistency mode promises, and (section "Layout") the packages and
// files below with their sizes and imports.
//
// Where each concern lives:
//
//   - Replication core, for every group: the thin FSM over the shard state
//     (fsm.go), the entry's header and checksum (entry.go), one replica of a
//     group (group.go) and its phase — serving, abandoned, handing over,
//     deferring, with the named transitions between them (phase.go), the
//     applier that turns the journals of changed keys
//     into log entries and tells the server when they are committed
//     (applier.go, commits.go).
//   - The standalone node: Node, Open, Config, Durability (node.go).
//   - The data directory: package cluster/datadir (Storage and
//     OpenStorage, the layout, the node id, damage found at start and its
//     repair, the mark file). The log, stable store and snapshots of every
//     group live in one Pebble database (packages raftlog and snapshot),
//     keyed by group. datadir.go keeps its names usable as cluster.X
//     (aliases), and OpenStorage gives it the replication core's replay
//     (fsm.go's replayer), with which AcceptDataLoss bridges a hole in a
//     log.
//   - Heartbeats: package cluster/pulse coalesces the raft heartbeats per
//     peer node and answers idle appends (QuietTransport); hclog.go
//     throttles raft's logs about an unreachable peer.
//   - The meta group: its FSM — members, placement, rules and blocks — is
//     package cluster/meta (meta.go here keeps its id and NodeInfo);
//     joining, leaving and handing a lead over (membership.go).
//   - Routing and serving keys: slots to groups to nodes (router.go), the
//     key operations on the serving group (limiter.go), forwarding to the
//     node that serves a key (proxy.go), holding commands while a slot
//     moves (hold.go), RL.CHECKRULES across groups and the rule commands
//     (rules.go), hot keys across nodes (hotkeys.go).
//   - Control loops: the watchers of leadership, registration, polling,
//     balancing and snapshots (watch.go); admitting internal calls only
//     while every group is open (lifecycle.go).
//   - Internal calls between nodes: the table of call names, the handler,
//     status polling and Report (rpc.go), one client method per call
//     (rpc_client.go), over package cluster/transport's one listener.
//   - Assembly: OpenCluster, ClusterConfig, starting the groups, Close
//     (cluster.go); every exported method of *Cluster, by concern
//     (api.go); Prometheus series and INFO persistence (metrics.go).
//
// Imports go one way: cluster imports cluster/datadir, cluster/meta,
// cluster/pulse and cluster/transport; pulse imports transport; none of
// them imports cluster.
package cluster
