package cluster

import (
	"errors"
	"strconv"

	"github.com/rlserver/rlserver/cluster/meta"
	"github.com/rlserver/rlserver/slots"
)

// Errors of a node that does not serve a key's slot, in Redis's words
// (MOVED is built per slot).
var (
	// ErrTryAgain: the slot's group is electing a leader, or its leader
	// has not told the cluster its address yet; retry shortly. It is
	// transient (see Transient).
	ErrTryAgain error = &transientError{"TRYAGAIN the slot's group is electing a leader; retry"}
	// ErrMoving: the slot's group is changing leaders in a planned move
	// (this node hands its lead over, or took it and applies the log
	// before it serves); retry shortly, or wait (Await). Transient.
	ErrMoving error = &transientError{"TRYAGAIN the slot is moving to another node; retry"}
	// ErrClusterDown: the slot's group has had no leader for a while (no
	// quorum of its voters is reachable).
	ErrClusterDown = errors.New("CLUSTERDOWN The cluster is down")
)

// transientError is a routing error that passes by itself within about
// an election's time: the slot's group is choosing or changing its leader.
type transientError struct{ msg string }

func (e *transientError) Error() string { return e.msg }

// Transient reports true: a command that got this error changed nothing
// and may wait (Cluster.Await) and run again.
func (e *transientError) Transient() bool { return true }

// Transient reports whether err says that a key's slot is between two
// leaders (ErrTryAgain, ErrMoving, or such a refusal from another node):
// the command changed nothing and may run again once the slot settles.
func Transient(err error) bool {
	var t *transientError
	return errors.As(err, &t)
}

// serving returns the group that serves key here, read-locked: the caller
// must call g.phase.leave when it has finished with g's store. If this
// node does not serve the key's slot, it returns the error to answer.
func (c *Cluster) serving(key []byte) (*group, error) {
	slot := slots.Of(key)
	gi := c.groupOf(slot)
	if g := c.replica(gi); g != nil && g.phase.enter() {
		return g, nil
	}
	return nil, c.routeErr(slot, gi)
}

// routeErr is Route's error for a slot this node does not serve.
func (c *Cluster) routeErr(slot, gi int) error {
	if g := c.replica(gi); g != nil && g.phase.handingOff() {
		return ErrMoving // handing the lead over: held until the new leader serves
	}
	leader := c.leaderOf(gi)
	if leader == c.cfg.NodeID {
		return ErrMoving // leading, not caught up yet
	}
	if leader != "" {
		if n, ok := c.meta.Current().Nodes[leader]; ok && n.RESP != "" {
			return &MovedError{Slot: slot, Addr: n.RESP}
		}
		return ErrTryAgain
	}
	since := c.leaderless[gi].Load()
	if since != 0 && c.clock()-since > int64(c.cfg.DownAfter) {
		return ErrClusterDown
	}
	return ErrTryAgain
}

// MovedError is the answer for a key whose slot another node serves.
type MovedError struct {
	Slot int
	Addr string // host:port of the node that serves it
}

func (e *MovedError) Error() string { return "MOVED " + strconv.Itoa(e.Slot) + " " + e.Addr }

// leaderOf returns the node id that leads group g as far as this node
// knows, or "": what its replica's raft says, or what the other nodes
// report for a group it does not host — or hosts but has not heard from a
// leader of since it started (unheard): a node that has just restarted may
// not hear from its groups' leaders for a second or more (a leader backs
// off from a peer that was down) while the others report them, and it
// should send its clients there rather than hold them and answer
// CLUSTERDOWN. A replica that heard from a leader before trusts only its
// raft: a peer's report may be of a leader that has just died.
func (c *Cluster) leaderOf(g int) string {
	grp := c.replica(g)
	if grp != nil {
		if _, id := grp.raft.LeaderWithID(); id != "" || !unheard(grp) {
			return string(id)
		}
	}
	return c.remoteLeader(g)
}

// unheard reports whether g's raft has heard from no leader since it
// started (and does not lead).
func unheard(g *group) bool {
	return g.raft.LastContact().IsZero() && !g.leader()
}

// View is a node's picture of the cluster, for CLUSTER SLOTS, SHARDS,
// NODES, INFO and GET /cluster.
type View struct {
	MyID   string      // this node's cluster id (40 hex characters)
	OK     bool        // every slot's group has a leader whose address is known
	Epoch  uint64      // the meta group's applied index
	Nodes  []ViewNode  // every member, in name order
	Groups []ViewGroup // by group id
}

// ViewNode is one member.
type ViewNode struct {
	ID        string // cluster id
	Name      string // --node-id
	RESP      string // client address, "" until the node has registered
	HTTP      string
	Raft      string
	Connected bool // this node, or it answered recently
	Myself    bool
}

// ViewGroup is one data group and its slots.
type ViewGroup struct {
	ID         int
	Start, End int      // its slots, inclusive
	Leader     string   // cluster id of its leader, "" if none known
	Voters     []string // cluster ids of its voters, preferred leader first
}

// placement returns each group's voters: the meta group's record, or what
// the initial peers imply before it has one.
func (c *Cluster) placement() map[int][]string {
	if p := c.meta.Current().Placement; len(p) > 0 {
		return p
	}
	ids := make([]string, 0, len(c.cfg.Peers))
	for id := range c.peerAddrs() {
		ids = append(ids, id)
	}
	return meta.Placement(ids, c.numGroups())
}
