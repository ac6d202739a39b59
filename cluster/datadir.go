package cluster

import "github.com/rlserver/rlserver/cluster/datadir"

// The node's data directory is package cluster/datadir. The names below
// keep it usable as cluster.X, so that cmd/rlserver and the benchmarks
// need not import it; OpenStorage also gives it the replication core's
// replay, with which AcceptDataLoss bridges a hole in a log.

// Storage is a node's data directory (datadir.Storage).
type Storage = datadir.Storage

// StorageOptions configures OpenStorage (datadir.StorageOptions).
type StorageOptions = datadir.StorageOptions

// Layout is what a cluster node's data directory records of the cluster
// it belongs to (datadir.Layout).
type Layout = datadir.Layout

// Peer is a member named in --peers (datadir.Peer).
type Peer = datadir.Peer

// LogStats are the counters of a log store that a Node reports
// (datadir.LogStats).
type LogStats = datadir.LogStats

// Defaults of StorageOptions (datadir's).
const (
	// DefaultMinFreeDisk is datadir.DefaultMinFreeDisk.
	DefaultMinFreeDisk = datadir.DefaultMinFreeDisk
	// DefaultDiskBallast is datadir.DefaultDiskBallast.
	DefaultDiskBallast = datadir.DefaultDiskBallast
	// DefaultMarkInterval is datadir.DefaultMarkInterval.
	DefaultMarkInterval = datadir.DefaultMarkInterval
)

// Errors of OpenStorage (datadir's), for errors.Is.
var (
	// ErrNodeID is datadir.ErrNodeID.
	ErrNodeID = datadir.ErrNodeID
	// ErrLostStorage is datadir.ErrLostStorage.
	ErrLostStorage = datadir.ErrLostStorage
	// ErrMode is datadir.ErrMode.
	ErrMode = datadir.ErrMode
	// ErrDamaged is datadir.ErrDamaged.
	ErrDamaged = datadir.ErrDamaged
	// ErrUnrepairable is datadir.ErrUnrepairable.
	ErrUnrepairable = datadir.ErrUnrepairable
)

// groupID is the one group of a standalone node: the group whose stores
// the data directory opens with it.
const groupID = datadir.NodeGroup

// OpenStorage opens the data directory dir as datadir.OpenStorage does,
// with o.Replay, unless set, the replication core's (an fsm over a new
// store): AcceptDataLoss then bridges a hole in a group's log by replaying
// the entries around it.
func OpenStorage(dir string, o StorageOptions) (*Storage, error) {
	if o.Replay == nil {
		o.Replay = newReplayer
	}
	return datadir.OpenStorage(dir, o)
}
