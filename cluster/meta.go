package cluster

import (
	"github.com/rlserver/rlserver/cluster/datadir"
	"github.com/rlserver/rlserver/cluster/meta"
)

// The meta group is the cluster's own Raft group (id metaGroup): every
// node is a member, and its FSM (package cluster/meta) holds what every
// node must agree on and read locally — the number of data groups, each
// group's voters, each node's addresses, the rules and the blocks. This
// package runs it: its raft instance (cluster.go), proposing to it
// (metaApply), joining and leaving (membership.go).

// metaGroup is the meta group's id; data groups are 1..Groups. It is the
// group whose stores the data directory opens with it (Storage.Logs and
// Storage.Snaps).
const metaGroup = datadir.NodeGroup

// NodeInfo is what the cluster knows of a member (meta.NodeInfo).
type NodeInfo = meta.NodeInfo
