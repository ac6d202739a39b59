package cluster

import (
	"time"

	"github.com/hashicorp/raft"
)

// Planned moves are invisible to clients: while a slot's group changes
// leaders on purpose — this node hands its lead over (balancing, a
// SIGTERM, a leave), or took a lead and applies the log before it serves —
// Route and every keyed call answer ErrMoving, a transient error, instead
// of a refusal. The server does not pass it on: it holds the command
// (Await) until the slot settles and then runs it again, so the client
// sees a reply, or a MOVED to the node that now serves the slot, and never
// an error. The node that hands a lead over answers ErrMoving until the
// new leader says it serves the group (handOff, callReady), so a client it
// redirects is served at once. An election (a node lost) is held the same
// way while it lasts, up to DownAfter, after which the slot is
// CLUSTERDOWN.

// MaxHold bounds how long a command is held while its slot moves: under
// the 5 s read timeout of go-redis's ClusterClient, and longer than a
// planned move takes (a commit, a leadership transfer and a barrier: tens
// of milliseconds) or an election (about a second with the defaults).
const MaxHold = 3 * time.Second

// awaitPoll bounds one wait of Await: changes that no notification covers
// (another node's leader learned from its status, an address registered)
// are seen within it.
const awaitPoll = 10 * time.Millisecond

// topoChanged wakes every Await.
func (c *Cluster) topoChanged() {
	ch := make(chan struct{})
	close(*c.topo.Swap(&ch))
}

// observe has raft tell the node when group r's leader changes, so that
// held commands are routed again at once.
func (c *Cluster) observe(r *raft.Raft) {
	r.RegisterObserver(raft.NewObserver(c.observations, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	}))
}

// watchLeaders turns raft's leader observations into topoChanged, until
// the node shuts down.
func (c *Cluster) watchLeaders() {
	for {
		select {
		case <-c.shutdownCh:
			return
		case <-c.observations:
			c.topoChanged()
		}
	}
}
