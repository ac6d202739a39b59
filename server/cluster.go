package server

import (
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rlserver/rlserver/slots"
)

// Cluster is implemented by a Limiter that is one node of a cluster. When
// the Limiter implements it, the server answers CLUSTER subcommands,
// reports cluster_enabled:1 in INFO, checks that the keys of a MULTI
// transaction share one slot, and refuses keys this node does not serve.
type Cluster interface {
	// ClusterView returns the topology as this node knows it now. Safe for
	// concurrent use; not on the hot path.
	ClusterView() ClusterView
	// KeysInSlot returns the number of keys this node holds in slot
	// (0 for a slot whose group it does not lead).
	KeysInSlot(slot int) int
	// Route returns nil if this node serves slot now, else the error to
	// answer: MOVED, TRYAGAIN or CLUSTERDOWN, in Redis's words. An error
	// with a method Transient() bool that reports true says that the slot
	// is between two leaders (a planned move, an election): the command
	// is held instead (see Await).
	Route(slot int) error
	// Await waits until the cluster's picture changes or a short while
	// passes, and reports whether deadline is still ahead. The server
	// calls it, on a connection's own goroutine, while it holds a command
	// whose slot is moving, then routes the command again.
	Await(deadline time.Time) bool
}

// defaultMaxHold bounds how long a command is held while its slot moves
// (Config.MaxHold), below the read timeout of common cluster clients
// (go-redis ClusterClient's is 5 s); after it, the command gets the
// transient error itself (TRYAGAIN), which those clients retry.
const defaultMaxHold = 3 * time.Second

// transient is implemented by a Cluster's errors (from Route, or from a
// Limiter call on a cluster node) that say the key's slot is between two
// leaders: the command changed nothing and may run again shortly.
type transient interface{ Transient() bool }

func isTransient(err error) bool {
	var t transient
	return errors.As(err, &t) && t.Transient()
}

// errHeld is what route returns for a command it holds: the caller
// answers nothing; the batch runs the command again (dispatchTop).
var errHeld = errors.New("held while the slot moves")

// Nudger is implemented by a Cluster whose node takes over the slots of
// nodes it lost (a crash, a partition). Clients that knew the lost node
// still send those slots to it and fail until they reload the slot map,
// which a cluster client does on a MOVED (go-redis's ClusterClient would
// otherwise wait up to a minute). So, for a while after a takeover, the
// first keyed command of each connection that this node serves is
// answered MOVED to this node itself: the client follows it here at once,
// and reloads its map in the background.
type Nudger interface {
	// Takeover returns the number of the node's last takeover of a group
	// from a lost leader, and whether it is recent enough to tell clients.
	Takeover() (epoch uint64, recent bool)
	// RESPAddr returns the address clients reach this node at.
	RESPAddr() string
}

// ClusterView is a node's picture of the cluster.
type ClusterView struct {
	MyID   string        // this node's cluster id: 40 hex characters
	OK     bool          // every slot has a leader (cluster_state:ok)
	Epoch  uint64        // configuration epoch (cluster_current_epoch, config-epoch)
	Nodes  []ClusterNode // every member, this node included, in a stable order
	Ranges []SlotRange   // ascending by Start, covering 0..16383
}

// ClusterNode is one member of the cluster.
type ClusterNode struct {
	ID        string // 40 hex characters
	Name      string // the operator's --node-id
	Host      string // IP clients connect to
	Port      int    // RESP port
	BusPort   int    // the port printed after '@' (the node's Raft port)
	Connected bool   // this node can reach it
	Myself    bool
}

// SlotRange is a run of slots owned by one Raft group.
type SlotRange struct {
	Start, End int      // inclusive
	Group      int      // the owning Raft group
	Master     string   // node ID of the group's leader; "" while it has none
	Replicas   []string // node IDs of the group's other voters
}

// Redis's texts for the cluster's errors.
const (
	errClusterDisabled = "ERR This instance has cluster support disabled"
	errCrossSlot       = "CROSSSLOT Keys in request don't hash to the same slot"
)

func clusterCommands() []*command {
	flags := []string{"loading", "stale", "fast"}
	return []*command{
		{name: "cluster", arity: -2, flags: []string{"loading", "stale"}, group: "cluster",
			complexity: "Depends on subcommand.",
			summary: "CLUSTER SLOTS | SHARDS | NODES | INFO | MYID | KEYSLOT key | COUNTKEYSINSLOT slot | HELP: " +
				"the slots, their Raft groups and the leaders that serve them",
			args:    []argDoc{{name: "subcommand", typ: "string"}, {name: "arg", typ: "string", optional: true}},
			handler: cmdCluster, subs: []string{"countkeysinslot", "help", "info", "keyslot", "myid", "nodes", "shards", "slots"}},
		{name: "readonly", arity: 1, flags: flags, group: "cluster", complexity: "O(1)",
			summary: "Accepted for cluster clients: OK (every key is served by its group's leader)", handler: cmdReadMode},
		{name: "readwrite", arity: 1, flags: flags, group: "cluster", complexity: "O(1)",
			summary: "Accepted for cluster clients: OK", handler: cmdReadMode},
	}
}

// cluster returns the Limiter as a Cluster, or nil when it is not one.
func (s *Server) cluster() Cluster { return s.cl }

// misrouted answers, and reports true, when args name a key whose slot this
// node does not serve now: Route's MOVED, TRYAGAIN or CLUSTERDOWN, or
// nothing when the command is held (see route). It is on the hot path:
// without a Cluster it costs a nil check.
func (s *Server) misrouted(c *conn, cmd *command, args [][]byte) bool {
	if err := s.route(c, cmd, args); err != nil {
		if err != errHeld {
			c.writeErr(err)
		}
		return true
	}
	return false
}

// route returns Route's error for a command whose key's slot this node
// does not serve now, or nil (also for a keyless command and without a
// Cluster). A transient error (the slot is moving) of a command that may
// be held sets c.held and returns errHeld.
func (s *Server) route(c *conn, cmd *command, args [][]byte) error {
	if cmd.firstKey <= 0 && cmd.numKeysAt == 0 || len(args) <= cmd.firstKey || s.cl == nil {
		return nil
	}
	slot, ok := cmd.slotOf(args)
	if !ok {
		return errors.New(errCrossSlot)
	}
	if slot < 0 {
		return nil // EVAL with no keys
	}
	err := s.cl.Route(slot)
	if err != nil && c.hold(err) {
		return errHeld
	}
	if err == nil && s.nudger != nil && c.mayHold && c.multi == nil {
		if epoch, recent := s.nudger.Takeover(); recent && epoch != c.nudged && s.nudges.admit(c.host()) {
			c.nudged = epoch
			return errors.New("MOVED " + strconv.Itoa(slot) + " " + s.nudger.RESPAddr())
		}
	}
	return err
}

// nudgeGap is the least time between two nudges (see Nudger) of
// connections from one host: a client follows a MOVED at once, on
// whichever of its connections it takes next, and that retry must be
// served, not nudged again.
const nudgeGap = 100 * time.Millisecond

// nudges remembers when each client host was last nudged.
type nudges struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// admit reports whether a connection from host may be nudged now, and
// if so records it.
func (n *nudges) admit(host string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	if now.Sub(n.last[host]) < nudgeGap {
		return false
	}
	if n.last == nil || len(n.last) > 4096 {
		n.last = map[string]time.Time{}
	}
	n.last[host] = now
	return true
}

// host returns the client's host (its address without the port).
func (c *conn) host() string {
	if h, _, err := net.SplitHostPort(c.addr); err == nil {
		return h
	}
	return c.addr
}

// hold reports whether err makes the command being run wait instead of
// being answered: it is transient and the command may be held (it was
// read as a request of the batch, not run by EXEC). It sets c.held.
func (c *conn) hold(err error) bool {
	if !c.mayHold || !isTransient(err) {
		return false
	}
	c.held = true
	return true
}

// dispatchTop runs one request of a batch. On a cluster node, a keyed
// command whose slot is moving is held rather than refused: on a
// connection's own goroutine it waits (Await) and runs again until the
// slot settles or Config.MaxHold passes; on an event loop, which must never
// wait, it runs nothing and reports true: runBatch then hands the
// connection to a goroutine of its own, which runs it again. So it does,
// on any node, for a script on an event loop that would wait for a shard
// another script holds (conn.wouldWait).
func (s *Server) dispatchTop(c *conn, args [][]byte, now int64) (handOver bool) {
	if s.cl == nil {
		if c.lp == nil {
			s.dispatch(c, args, now)
			return false
		}
		nreplies, commands := c.nreplies, c.commands.Load()
		s.dispatch(c, args, now)
		if !c.wouldWait {
			return false
		}
		// A script that would wait for a shard another script holds
		// (cmdEval) answered nothing and counts for nothing: it runs again
		// off the loop.
		c.wouldWait, c.nreplies = false, nreplies
		c.commands.Store(commands)
		return true
	}
	var deadline time.Time
	c.mayHold = true
	defer func() { c.mayHold = false }()
	for {
		out, nreplies, commands := len(c.out), c.nreplies, c.commands.Load()
		s.dispatch(c, args, now)
		if !c.held {
			return false
		}
		// The held try answered nothing and counts for nothing.
		c.held = false
		c.out, c.nreplies = c.out[:out], nreplies
		c.commands.Store(commands)
		if c.lp != nil {
			return true
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(s.cfg.MaxHold)
		}
		if !s.cl.Await(deadline) {
			c.mayHold = false // the last try answers what it gets
		}
		now = s.cfg.Clock()
	}
}

// execRoute returns the error that EXEC answers instead of running queue,
// as Redis Cluster does: CROSSSLOT when the queued commands' keys lie in
// more than one slot, Route's error when this node no longer serves their
// slot (errHeld when EXEC is held while the slot moves), nil otherwise
// (also without a Cluster). Keyless commands do not count.
func (s *Server) execRoute(c *conn, queue [][][]byte) error {
	if s.cl == nil {
		return nil
	}
	slot := -1
	for _, args := range queue {
		sl, ok := s.lookup(args[0]).slotOf(args)
		switch {
		case !ok:
			return errors.New(errCrossSlot)
		case sl < 0:
		case slot < 0:
			slot = sl
		case sl != slot:
			return errors.New(errCrossSlot)
		}
	}
	if slot < 0 {
		return nil
	}
	err := s.cl.Route(slot)
	if err != nil && c.hold(err) {
		return errHeld
	}
	return err
}

// READONLY
// READWRITE
//
// Cluster clients send READONLY to read from replicas (go-redis with
// ReadOnly or RouteByLatency). rlserver serves every key from its group's
// leader only, whose CLUSTER SLOTS entry comes first, so both are accepted
// and change nothing. Without a Cluster they fail as in Redis.
func cmdReadMode(s *Server, c *conn, args [][]byte, now int64) {
	if s.cluster() == nil {
		c.writeError(errClusterDisabled)
		return
	}
	c.writeOK()
}

// clusterSub is one CLUSTER subcommand.
type clusterSub struct {
	name  string // upper case
	arity int    // Redis's convention, CLUSTER and the subcommand included
	// run answers it; nil for the subcommands Redis has that change a
	// Redis cluster's layout, which rlserver's Raft groups manage.
	run func(s *Server, c *conn, cl Cluster, args [][]byte)
}

// clusterSubs lists the subcommands Redis 7 knows, with its arities.
var clusterSubs = []clusterSub{
	{"ADDSLOTS", -3, nil}, {"ADDSLOTSRANGE", -4, nil}, {"BUMPEPOCH", 2, nil},
	{"COUNT-FAILURE-REPORTS", 3, nil}, {"COUNTKEYSINSLOT", 3, clusterCountKeys},
	{"DELSLOTS", -3, nil}, {"DELSLOTSRANGE", -4, nil}, {"FAILOVER", -2, nil},
	{"FLUSHSLOTS", 2, nil}, {"FORGET", 3, nil}, {"GETKEYSINSLOT", 4, nil},
	{"HELP", 2, clusterHelp}, {"INFO", 2, clusterInfo}, {"KEYSLOT", 3, clusterKeySlot},
	{"LINKS", 2, nil}, {"MEET", -4, nil}, {"MYID", 2, clusterMyID}, {"MYSHARDID", 2, nil},
	{"NODES", 2, clusterNodes}, {"REPLICAS", 3, nil}, {"REPLICATE", 3, nil},
	{"RESET", -2, nil}, {"SAVECONFIG", 2, nil}, {"SET-CONFIG-EPOCH", 3, nil},
	{"SETSLOT", -4, nil}, {"SHARDS", 2, clusterShards}, {"SLAVES", 3, nil},
	{"SLOTS", 2, clusterSlots},
}

// CLUSTER subcommand [arg ...]
//
// As in Redis, an unknown subcommand and a wrong number of arguments are
// reported first; then, without a Cluster, every subcommand (KEYSLOT and
// HELP too, as Redis 7 answers them) fails with "This instance has cluster
// support disabled".
func cmdCluster(s *Server, c *conn, args [][]byte, now int64) {
	var sub *clusterSub
	for i := range clusterSubs {
		if equalFold(args[1], clusterSubs[i].name) {
			sub = &clusterSubs[i]
			break
		}
	}
	if sub == nil {
		name := args[1]
		if len(name) > 128 {
			name = name[:128]
		}
		c.writeError("ERR unknown subcommand '" + string(name) + "'. Try CLUSTER HELP.")
		return
	}
	if n := len(args); (sub.arity > 0 && n != sub.arity) || (sub.arity < 0 && n < -sub.arity) {
		c.writeError("ERR wrong number of arguments for 'cluster|" + strings.ToLower(sub.name) + "' command")
		return
	}
	cl := s.cluster()
	switch {
	case cl == nil:
		c.writeError(errClusterDisabled)
	case sub.run == nil:
		c.writeError("ERR CLUSTER " + sub.name + " is not supported: rlserver's Raft groups own the slots " +
			"and elect their leaders themselves; add a node with --join")
	default:
		sub.run(s, c, cl, args)
	}
}

// CLUSTER HELP
func clusterHelp(s *Server, c *conn, cl Cluster, args [][]byte) {
	lines := []string{
		"CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"COUNTKEYSINSLOT <slot>",
		"    Return the number of keys in <slot>.",
		"INFO",
		"    Return information about the cluster.",
		"KEYSLOT <key>",
		"    Return the hash slot for <key>.",
		"MYID",
		"    Return the node id.",
		"NODES",
		"    Return cluster configuration seen by node. Output format:",
		"    <id> <ip:port@bus-port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
		"SHARDS",
		"    Return information about slot range mappings and the nodes associated with them.",
		"SLOTS",
		"    Return information about slots range mappings. Each range is made of:",
		"    start, end, master and replicas IP addresses, ports and ids",
		"HELP",
		"    Prints this help.",
	}
	c.writeArray(len(lines))
	for _, l := range lines {
		c.writeStatus(l)
	}
}

// CLUSTER KEYSLOT key
func clusterKeySlot(s *Server, c *conn, cl Cluster, args [][]byte) {
	c.writeInt(int64(slots.Of(args[2])))
}

// CLUSTER COUNTKEYSINSLOT slot
func clusterCountKeys(s *Server, c *conn, cl Cluster, args [][]byte) {
	slot, ok := parseInt(args[2])
	switch {
	case !ok:
		c.writeError("ERR value is not an integer or out of range")
	case slot < 0 || slot >= slots.Count:
		c.writeError("ERR Invalid slot")
	default:
		c.writeInt(int64(cl.KeysInSlot(int(slot))))
	}
}

// CLUSTER MYID
func clusterMyID(s *Server, c *conn, cl Cluster, args [][]byte) {
	c.writeBulkString(cl.ClusterView().MyID)
}

// CLUSTER SLOTS
//
// Redis 7's format: for each range, its start and end slots, then its
// group's leader and the replicas this node can reach, each as
// [ip, port, id, metadata] with empty metadata (no hostnames). A range
// whose group has no leader is left out, as Redis leaves out unassigned
// slots. Ranges are those of the groups, not merged.
func clusterSlots(s *Server, c *conn, cl Cluster, args [][]byte) {
	v := cl.ClusterView()
	nodes := v.byID()
	var out []any
	for _, r := range v.Ranges {
		m, ok := nodes[r.Master]
		if !ok {
			continue
		}
		e := []any{r.Start, r.End, slotsNode(m)}
		for _, id := range r.Replicas {
			if n, ok := nodes[id]; ok && n.reachable() {
				e = append(e, slotsNode(n))
			}
		}
		out = append(out, e)
	}
	c.writeValue(out)
}

func slotsNode(n *ClusterNode) []any { return []any{n.Host, n.Port, n.ID, kv{}} }

// CLUSTER SHARDS
//
// Redis 7's format, one shard per Raft group, in the order of the groups:
// "slots" (start and end of each of the group's ranges) and "nodes", the
// leader as master and the other voters as replicas, each a map of id,
// port, ip, endpoint, role, replication-offset (always 0: Raft indexes are
// not replication offsets) and health ("fail" for a node this node cannot
// reach).
func clusterShards(s *Server, c *conn, cl Cluster, args [][]byte) {
	v := cl.ClusterView()
	nodes := v.byID()
	var groups []int
	byGroup := map[int][]SlotRange{}
	for _, r := range v.Ranges {
		if _, ok := byGroup[r.Group]; !ok {
			groups = append(groups, r.Group)
		}
		byGroup[r.Group] = append(byGroup[r.Group], r)
	}
	slices.Sort(groups)
	out := make([]any, 0, len(groups))
	for _, g := range groups {
		rs := byGroup[g]
		var slotList, members []any
		for _, r := range rs {
			slotList = append(slotList, r.Start, r.End)
		}
		if n, ok := nodes[rs[0].Master]; ok {
			members = append(members, shardNode(n, "master"))
		}
		for _, id := range rs[0].Replicas {
			if n, ok := nodes[id]; ok {
				members = append(members, shardNode(n, "replica"))
			}
		}
		out = append(out, kv{"slots", slotList, "nodes", members})
	}
	c.writeValue(out)
}

func shardNode(n *ClusterNode, role string) kv {
	health := "online"
	if !n.reachable() {
		health = "fail"
	}
	return kv{"id", n.ID, "port", n.Port, "ip", n.Host, "endpoint", n.Host,
		"role", role, "replication-offset", 0, "health", health}
}

// CLUSTER NODES
//
// Redis's text, one line per node: id, ip:port@busport, flags, master,
// ping-sent, pong-received, config-epoch, link-state, slot ranges. A node
// leads some groups and follows others, so there are no replicas in
// Redis's sense: every node is printed as a master ("myself,master" or
// "master", with ",fail" when this node cannot reach it, and master "-")
// with the slot ranges of the groups it leads (adjacent ones merged).
// Ping and pong times are 0; config-epoch is the view's epoch for all.
func clusterNodes(s *Server, c *conn, cl Cluster, args [][]byte) {
	v := cl.ClusterView()
	var b strings.Builder
	for i := range v.Nodes {
		n := &v.Nodes[i]
		flags, link := "master", "connected"
		if n.Myself {
			flags = "myself,master"
		} else if !n.Connected {
			flags, link = "master,fail", "disconnected"
		}
		b.WriteString(n.ID + " " + n.Host + ":" + strconv.Itoa(n.Port) + "@" + strconv.Itoa(n.BusPort) +
			" " + flags + " - 0 0 " + strconv.FormatUint(v.Epoch, 10) + " " + link)
		for _, r := range v.ledBy(n.ID) {
			b.WriteString(" " + strconv.Itoa(r.Start))
			if r.End != r.Start {
				b.WriteString("-" + strconv.Itoa(r.End))
			}
		}
		b.WriteString("\n")
	}
	c.writeVerbatim(b.String())
}

// CLUSTER INFO
//
// Every field Redis 7 prints. Slots are assigned when their group has a
// leader; those whose leader this node cannot reach count as
// cluster_slots_pfail (Redis's "possibly failing"), the others as
// cluster_slots_ok; cluster_slots_fail is 0. cluster_size is the number of
// nodes that lead at least one group. Bus message counters are 0: Raft's
// traffic is not Redis's cluster bus.
func clusterInfo(s *Server, c *conn, cl Cluster, args [][]byte) {
	v := cl.ClusterView()
	nodes := v.byID()
	assigned, pfail := 0, 0
	leaders := map[string]bool{}
	for _, r := range v.Ranges {
		m, ok := nodes[r.Master]
		if !ok {
			continue
		}
		assigned += r.End - r.Start + 1
		if !m.reachable() {
			pfail += r.End - r.Start + 1
		}
		leaders[m.ID] = true
	}
	state := "fail"
	if v.OK {
		state = "ok"
	}
	itoa := strconv.Itoa
	epoch := strconv.FormatUint(v.Epoch, 10)
	fields := []string{
		"cluster_state", state,
		"cluster_slots_assigned", itoa(assigned),
		"cluster_slots_ok", itoa(assigned - pfail),
		"cluster_slots_pfail", itoa(pfail),
		"cluster_slots_fail", "0",
		"cluster_known_nodes", itoa(len(v.Nodes)),
		"cluster_size", itoa(len(leaders)),
		"cluster_current_epoch", epoch,
		"cluster_my_epoch", epoch,
		"cluster_stats_messages_sent", "0",
		"cluster_stats_messages_received", "0",
		"total_cluster_links_buffer_limit_exceeded", "0",
	}
	var b strings.Builder
	for i := 0; i < len(fields); i += 2 {
		b.WriteString(fields[i] + ":" + fields[i+1] + "\r\n")
	}
	c.writeVerbatim(b.String())
}

// writeVerbatim writes text as Redis writes CLUSTER INFO and NODES: a
// verbatim string of format "txt" in RESP3, a bulk string in RESP2.
func (c *conn) writeVerbatim(text string) {
	if c.proto != 3 {
		c.writeBulkString(text)
		return
	}
	c.out = append(c.out, '=')
	c.out = strconv.AppendInt(c.out, int64(len(text)+4), 10)
	c.out = append(c.out, "\r\ntxt:"...)
	c.out = append(c.out, text...)
	c.out = append(c.out, '\r', '\n')
}

// byID returns the view's nodes by ID.
func (v *ClusterView) byID() map[string]*ClusterNode {
	m := make(map[string]*ClusterNode, len(v.Nodes))
	for i := range v.Nodes {
		m[v.Nodes[i].ID] = &v.Nodes[i]
	}
	return m
}

// ledBy returns the slot ranges whose group id leads, adjacent ones
// merged.
func (v *ClusterView) ledBy(id string) []SlotRange {
	var out []SlotRange
	for _, r := range v.Ranges {
		if r.Master != id || id == "" {
			continue
		}
		if k := len(out) - 1; k >= 0 && out[k].End+1 == r.Start {
			out[k].End = r.End
			continue
		}
		out = append(out, SlotRange{Start: r.Start, End: r.End})
	}
	return out
}

// reachable reports whether this node can reach n (always so for itself).
func (n *ClusterNode) reachable() bool { return n.Connected || n.Myself }
