package main

import (
	"context"
	"net"
	"strconv"

	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/server"
)

// clusterNode is a cluster node as the server sees it: the Limiter,
// RuleStore, Committer and Transactor of *cluster.Cluster, and the
// server's Cluster interface, whose view it translates.
type clusterNode struct{ *cluster.Cluster }

// ClusterView returns the cluster's View in the server's terms: nodes
// with their client host and port and their Raft port as bus port, and a
// slot range per group with its leader and its other voters.
//
// A group whose leader is not known yet (the cluster is forming, or the
// group is electing one) is shown with its preferred leader as master if
// that node's address is known, else with this node: every slot always
// has a node to send it to, which holds the command until the slot has a
// leader and then serves it or answers MOVED. Clients that insist that
// every slot be covered (redis-py's RedisCluster at start) work at once.
func (n clusterNode) ClusterView() server.ClusterView {
	v := n.View()
	out := server.ClusterView{MyID: v.MyID, OK: v.OK, Epoch: v.Epoch}
	reachable := map[string]bool{}
	for _, node := range v.Nodes {
		if node.RESP == "" {
			continue // not registered yet: clients could not reach it
		}
		reachable[node.ID] = true
		host, port := splitAddr(node.RESP)
		_, bus := splitAddr(node.Raft)
		out.Nodes = append(out.Nodes, server.ClusterNode{ID: node.ID, Name: node.Name, Host: host, Port: port,
			BusPort: bus, Connected: node.Connected, Myself: node.Myself})
	}
	if !reachable[v.MyID] { // not registered yet: this node's own address
		host, port := splitAddr(n.RESPAddr())
		out.Nodes = append(out.Nodes, server.ClusterNode{ID: v.MyID, Host: host, Port: port, Connected: true, Myself: true})
		reachable[v.MyID] = true
	}
	for _, g := range v.Groups {
		r := server.SlotRange{Start: g.Start, End: g.End, Group: g.ID, Master: g.Leader}
		if !reachable[r.Master] {
			r.Master = v.MyID
			if len(g.Voters) > 0 && reachable[g.Voters[0]] {
				r.Master = g.Voters[0]
			}
		}
		for _, id := range g.Voters {
			if id != r.Master {
				r.Replicas = append(r.Replicas, id)
			}
		}
		out.Ranges = append(out.Ranges, r)
	}
	return out
}

// splitAddr splits host:port, with 0 for a missing or bad port.
func splitAddr(addr string) (string, int) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	port, _ := strconv.Atoi(p)
	return host, port
}

// ClusterReport is GET /cluster's answer (httpapi.Cluster).
func (n clusterNode) ClusterReport(ctx context.Context, digestAt int64) any {
	return n.Report(ctx, digestAt)
}

// JoinNode adds a node to the cluster (server.Membership).
func (n clusterNode) JoinNode(ctx context.Context, id, raft, resp, http string) (int, error) {
	return n.Join(ctx, cluster.NodeInfo{ID: id, Raft: raft, RESP: resp, HTTP: http})
}

// LeaveNode makes a node leave the cluster (server.Membership).
func (n clusterNode) LeaveNode(ctx context.Context, id string) error { return n.Leave(ctx, id) }

// httpChecker is what the HTTP API checks against on a cluster node: keyed
// checks forwarded to the node that serves their slot, rule checks
// coordinated by this node.
type httpChecker struct {
	cluster.Forwarder
	*cluster.Cluster
}

// Check is the Forwarder's (the embedded Cluster's Check would answer
// MOVED).
func (h httpChecker) Check(key []byte, a engine.Algo, p engine.Params, cost, now int64) (engine.Result, error) {
	return h.Forwarder.Check(key, a, p, cost, now)
}
