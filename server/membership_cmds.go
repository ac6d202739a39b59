package server

import (
	"context"
	"strconv"
	"time"
)

// Membership is implemented by a cluster node whose members can change
// while it runs: a new node joins through any member, and any member can
// make a node leave. Both may wait on other nodes (see Blocking).
type Membership interface {
	// JoinNode adds the node id, whose Raft listener is at raft and whose
	// clients connect to resp (and http, "" for none), and returns the
	// number of data groups.
	JoinNode(ctx context.Context, id, raft, resp, http string) (groups int, err error)
	// LeaveNode makes node id leave: its groups move to the other nodes,
	// then it is forgotten.
	LeaveNode(ctx context.Context, id string) error
}

// membershipTimeout bounds a join or leave request.
const membershipTimeout = 10 * time.Second

func membershipCommands() []*command {
	return []*command{
		{name: "rl.cluster.join", arity: -5, flags: []string{"admin", "noscript"}, group: "cluster",
			complexity: "O(1)", summary: "Add a node to the cluster (sent by a node started with --join); replies the number of Raft groups",
			args: []argDoc{{name: "node-id", typ: "string"}, {name: "raft-addr", typ: "string"},
				{name: "resp-addr", typ: "string"}, {name: "http-addr", typ: "string", optional: true}},
			handler: cmdClusterJoin},
		{name: "rl.cluster.leave", arity: 2, flags: []string{"admin", "noscript"}, group: "cluster",
			complexity: "O(1)", summary: "Make a node leave the cluster: its groups move to the other nodes, then it is forgotten",
			args: []argDoc{{name: "node-id", typ: "string"}}, handler: cmdClusterLeave},
	}
}

// membership returns the Limiter as a Membership, answering the error for
// c if it is not one or c may not change the members.
func (s *Server) membership(c *conn, name string) Membership {
	m, ok := s.cfg.Limiter.(Membership)
	if !ok {
		c.writeError(errClusterDisabled)
		return nil
	}
	if s.cfg.AdminToken != "" && !c.admin {
		c.writeError("NOPERM this user has no permissions to run the '" + name + "' command (AUTH admin <admin-token> first)")
		return nil
	}
	return m
}

// RL.CLUSTER.JOIN node-id raft-addr resp-addr [http-addr]
func cmdClusterJoin(s *Server, c *conn, args [][]byte, now int64) {
	m := s.membership(c, "rl.cluster.join")
	if m == nil {
		return
	}
	if len(args) > 5 {
		c.writeError("ERR syntax error")
		return
	}
	http := ""
	if len(args) == 5 {
		http = string(args[4])
	}
	ctx, cancel := context.WithTimeout(context.Background(), membershipTimeout)
	defer cancel()
	groups, err := m.JoinNode(ctx, string(args[1]), string(args[2]), string(args[3]), http)
	if err != nil {
		c.writeErr(err)
		return
	}
	s.log.Info("a node joined the cluster", "node", string(args[1]), "raft", string(args[2]), "resp", string(args[3]), "client", c.addr)
	c.writeInt(int64(groups))
}

// RL.CLUSTER.LEAVE node-id
func cmdClusterLeave(s *Server, c *conn, args [][]byte, now int64) {
	m := s.membership(c, "rl.cluster.leave")
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), membershipTimeout)
	defer cancel()
	if err := m.LeaveNode(ctx, string(args[1])); err != nil {
		c.writeErr(err)
		return
	}
	s.log.Info("a node leaves the cluster", "node", strconv.Quote(string(args[1])), "client", c.addr)
	c.writeOK()
}
