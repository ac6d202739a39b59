package cluster

// The exported methods of *Cluster, every one, gathered here by concern:
// what a caller (the server, the HTTP API, rlserver's wiring) can ask of a
// cluster node. OpenCluster and ClusterConfig, which make one, are in
// cluster.go; the types the methods return (View, Report, Forwarder, ...)
// beside the code of their concern. Each heading names the files that
// hold the unexported code behind its methods.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/rlserver/rlserver/cluster/meta"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/shards"
	"github.com/rlserver/rlserver/slots"
	"github.com/rlserver/rlserver/values"
)

// ---- The node: its stores, its listener, stopping (cluster.go: assembly, start and stop).

// Stores returns the store of every data group this node hosts.
func (c *Cluster) Stores() []*shards.Store {
	var out []*shards.Store
	for _, g := range c.hostedGroups() {
		if g != nil {
			out = append(out, g.store)
		}
	}
	return out
}

// RaftAddr returns the address the node's Raft listener listens on.
func (c *Cluster) RaftAddr() net.Addr { return c.mux.Addr() }

// Close stops the node gracefully: the changes made so far are committed,
// the lead of every group it leads is handed to another voter, and raft
// stops. Its caller has stopped sending commands. It does not close the
// storage.
func (c *Cluster) Close(ctx context.Context) error {
	var err error
	c.closeOnce.Do(func() {
		c.stopping.Store(true)
		if serr := c.Sync(ctx); serr != nil {
			err = fmt.Errorf("commit the last changes: %w", serr)
		}
		c.handOver(ctx)
		close(c.app.stop)
		select {
		case <-c.app.done:
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
		}
		close(c.shutdownCh)
		c.wg.Wait()
		c.life.stop(rpcTimeout)
		c.stopRafts()
		c.pulse.Stop()
		c.mux.Close()
	})
	return err
}

// StepDown makes the node serve no slot, before a graceful stop: it takes
// no lead from now on (its status says it is stopping, so no other node
// hands it one, and a lead it wins is handed on), and it hands the lead
// of every group it serves to another voter, each once the new leader
// serves the group. Meanwhile the commands of those slots are held, then
// answered MOVED to the new leader: clients see no error. The node keeps
// answering (MOVED) until it is closed, so that clients learn where their
// slots went. It returns when every lead is handed over or ctx ends.
func (c *Cluster) StepDown(ctx context.Context) {
	c.stopping.Store(true)
	c.handOver(ctx)
}

// Listening tells the cluster that clients can reach this node now (its
// RESP listener is open): from then on other nodes may hand it leads.
func (c *Cluster) Listening() { c.accepting.Store(true) }

// ---- Keys: the server's Limiter on the groups this node serves (limiter.go, router.go; proxy.go forwards).

// Check is shards.Store.Check on the store of key's group, if this node
// serves its slot; else, with Proxy, the check forwarded to the node that
// does, or the routing error (MOVED, TRYAGAIN, CLUSTERDOWN).
func (c *Cluster) Check(key []byte, a engine.Algo, p engine.Params, cost, now int64) (engine.Result, error) {
	if c.cfg.Proxy {
		return c.Forwarder().Check(key, a, p, cost, now)
	}
	return c.check(key, a, p, cost, now)
}

// Throttle is shards.Store.Throttle on the store of key's group (as Check).
func (c *Cluster) Throttle(key []byte, maxBurst, count, period, quantity, now int64) (engine.CellResult, error) {
	if c.cfg.Proxy {
		return c.Forwarder().Throttle(key, maxBurst, count, period, quantity, now)
	}
	return c.throttle(key, maxBurst, count, period, quantity, now)
}

// Reset is shards.Store.Reset on the store of key's group (as Check).
func (c *Cluster) Reset(key []byte, now int64) (bool, error) {
	if c.cfg.Proxy {
		return c.Forwarder().Reset(key, now)
	}
	return c.reset(key, now)
}

// Flush forgets every key of the groups this node leads, as FLUSHALL on a
// Redis Cluster master forgets its own slots' keys.
func (c *Cluster) Flush() error {
	for _, g := range c.led() {
		err := g.store.Flush()
		g.phase.leave()
		if err != nil {
			return err
		}
	}
	return nil
}

// Len returns the number of keys in the groups this node leads (DBSIZE, as
// a Redis Cluster master counts its own slots).
func (c *Cluster) Len() int {
	n := 0
	for _, g := range c.led() {
		n += g.store.Len()
		g.phase.leave()
	}
	return n
}

// MemoryBytes returns the memory the keys of every hosted group take,
// led or followed, and the blocks the meta group holds.
func (c *Cluster) MemoryBytes() int64 {
	n := c.meta.Blocks().Bytes()
	for _, g := range c.hostedGroups() {
		if g != nil {
			n += g.store.MemoryBytes()
		}
	}
	return n
}

// Prefetch loads the state of keys this node serves into the CPU caches
// (shards.Store.Prefetch), group by group; keys of other groups are
// skipped.
func (c *Cluster) Prefetch(keys [][]byte) uint64 {
	var sum uint64
	for len(keys) > 0 {
		gi := c.groupOf(slots.Of(keys[0]))
		n := 1
		for n < len(keys) && c.groupOf(slots.Of(keys[n])) == gi {
			n++
		}
		if g := c.replica(gi); g != nil && g.phase.serving() {
			sum += g.store.Prefetch(keys[:n])
		}
		keys = keys[n:]
	}
	return sum
}

// Transact runs a MULTI/EXEC transaction on the store of its keys' group
// (the server has checked that they share one slot, which this node
// serves). A transaction without keys, or whose group this node stopped
// serving meanwhile, runs its commands one by one outside a transaction
// (run gets a nil Tx): each is then routed, and answered MOVED if its slot
// moved.
func (c *Cluster) Transact(plan shards.TxPlan, run func(tx *shards.Tx)) error {
	if len(plan.Keys) > 0 {
		if g, err := c.serving(plan.Keys[0]); err == nil {
			defer g.phase.leave()
			return g.store.Transact(plan, run)
		}
	}
	run(nil)
	return nil
}

// Digest returns the digest of the state of every group this node leads,
// at now.
func (c *Cluster) Digest(now int64) uint64 {
	var sum uint64
	for _, g := range c.led() {
		sum += g.store.Digest(now)
		g.phase.leave()
	}
	return sum
}

// TransactAll locks every shard of every group this node serves, in the
// order hostedGroups lists them (the same for every caller, so two calls
// cannot deadlock), and calls run with a transaction on each: the
// commands that see every key (KEYS, SCAN, DBSIZE), as a Redis Cluster
// master sees its own slots' keys.
func (c *Cluster) TransactAll(run func(txs []*shards.Tx)) {
	gs := c.led()
	defer func() {
		for _, g := range gs {
			g.phase.leave()
		}
	}()
	txs := make([]*shards.Tx, 0, len(gs))
	var nest func(i int)
	nest = func(i int) {
		if i == len(gs) {
			run(txs)
			return
		}
		err := gs[i].store.Transact(shards.TxPlan{All: true}, func(tx *shards.Tx) {
			txs = append(txs, tx)
			nest(i + 1)
		})
		if err != nil {
			nest(i + 1) // a busy script's group is left out
		}
	}
	nest(0)
}

// Proxying reports whether the node forwards the commands of slots it does
// not serve (--proxy).
func (c *Cluster) Proxying() bool { return c.cfg.Proxy }

// ForwardExec runs args — a command of package values or a script whose
// keys lie in key's slot — on the node that serves that slot (see
// Forwarder.Exec).
func (c *Cluster) ForwardExec(key []byte, args [][]byte, proto int, now int64) (values.Reply, error) {
	return c.Forwarder().Exec(slots.Of(key), key, args, proto, now)
}

// Persistent returns the keys without an expiry in the groups this node
// leads (INFO keyspace).
func (c *Cluster) Persistent() int {
	n := 0
	for _, g := range c.led() {
		n += g.store.Persistent()
		g.phase.leave()
	}
	return n
}

// ---- Routing: slots to groups to nodes (router.go).

// Route returns nil if this node serves slot now, else the error that
// says where to go (MOVED), to retry (TRYAGAIN) or that the slot cannot
// be served (CLUSTERDOWN).
func (c *Cluster) Route(slot int) error {
	if c.cfg.Proxy {
		return nil // every key is served, by forwarding if need be
	}
	gi := c.groupOf(slot)
	if g := c.replica(gi); g != nil && g.phase.serving() {
		return nil
	}
	return c.routeErr(slot, gi)
}

// View returns the cluster as this node sees it now.
func (c *Cluster) View() View {
	m := c.meta.Current()
	v := View{MyID: c.id, Epoch: c.meta.Applied(), OK: true}
	names := map[string]bool{}
	for id := range c.peerAddrs() {
		names[id] = true
	}
	for id := range m.Nodes {
		names[id] = true
	}
	sorted := make([]string, 0, len(names))
	for id := range names {
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)
	for _, name := range sorted {
		n := m.Nodes[name]
		me := name == c.cfg.NodeID
		v.Nodes = append(v.Nodes, ViewNode{ID: clusterID(name), Name: name, RESP: n.RESP, HTTP: n.HTTP, Raft: n.Raft,
			Connected: me || c.peer(name).connected(), Myself: me})
	}
	place := c.placement()
	for g := 1; g <= c.numGroups(); g++ {
		start, end := c.slotRange(g)
		vg := ViewGroup{ID: g, Start: start, End: end}
		if l := c.leaderOf(g); l != "" && m.Nodes[l].RESP != "" {
			vg.Leader = clusterID(l)
		} else {
			v.OK = false
		}
		for _, id := range place[g] {
			vg.Voters = append(vg.Voters, clusterID(id))
		}
		v.Groups = append(v.Groups, vg)
	}
	return v
}

// KeysInSlot returns the number of keys this node holds in slot, if it
// serves the slot, else 0 (as a Redis master counts only its own slots).
func (c *Cluster) KeysInSlot(slot int) int {
	g := c.replica(c.groupOf(slot))
	if g == nil || !g.phase.serving() {
		return 0
	}
	return g.store.CountKeys(c.clock(), func(key []byte) bool { return slots.Of(key) == slot })
}

// RESPAddr returns the address clients reach this node at.
func (c *Cluster) RESPAddr() string { return c.cfg.RESPAddr }

// Groups returns the number of data groups.
func (c *Cluster) Groups() int { return c.numGroups() }

// ---- Forwarding keyed commands to the node that serves them (proxy.go).

// Forwarder returns the node's Forwarder.
func (c *Cluster) Forwarder() Forwarder { return Forwarder{c} }

// SetExecutor sets what runs forwarded commands of package values and
// scripts; call it before the node serves. Without one they are answered
// with an error.
func (c *Cluster) SetExecutor(e Executor) { c.exec.Store(&e) }

// ---- Holding commands while a slot moves (hold.go).

// Await waits until the cluster's picture changes (a group starts or
// stops being served here, a leader changes, a hand-over ends), or a
// short while passes, and reports whether deadline is still ahead: the
// caller of a command that got a Transient error routes it again then.
// It returns false at once once the node is closing.
func (c *Cluster) Await(deadline time.Time) bool {
	d := time.Until(deadline)
	if d <= 0 {
		return false
	}
	ch := *c.topo.Load()
	t := time.NewTimer(min(d, awaitPoll))
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-c.shutdownCh:
		return false
	}
	return time.Now().Before(deadline)
}

// ---- Rules and blocks, through the meta group; RL.CHECKRULES across groups (rules.go, meta.go).

// SetRule stores r, replacing any rule with its id, through the meta
// group, and reports whether the id was new.
func (c *Cluster) SetRule(r rules.Rule) (bool, error) {
	if _, err := rules.Compile(r, 0); err != nil {
		return false, err
	}
	return c.ruleCmd(meta.Cmd{Op: "rule.set", Rule: &r})
}

// CreateRule is SetRule that fails with rules.ErrExists if the id is taken.
func (c *Cluster) CreateRule(r rules.Rule) error {
	if _, err := rules.Compile(r, 0); err != nil {
		return err
	}
	_, err := c.ruleCmd(meta.Cmd{Op: "rule.create", Rule: &r})
	return err
}

// DeleteRule removes the rule with the given id and reports whether it
// existed.
func (c *Cluster) DeleteRule(id string) (bool, error) {
	return c.ruleCmd(meta.Cmd{Op: "rule.del", ID: id})
}

// ChangeRules makes ch (rules.Change: a --rules file's load) as one entry
// of the meta group's log, so that every node applies all of it at once or
// none of it. A change whose entry is larger than the nodes' internal
// calls carry (transport.DefaultMaxFrame, less room for the envelope) is
// refused.
func (c *Cluster) ChangeRules(ch rules.Change) (rules.ChangeResult, error) {
	if _, err := ch.Compile(); err != nil {
		return rules.ChangeResult{}, err
	}
	res, err := c.metaCmd(meta.Cmd{Op: "rules.change", Change: &ch})
	if err != nil {
		return rules.ChangeResult{}, err
	}
	if res.Err != "" {
		return rules.ChangeResult{}, errors.New(res.Err)
	}
	if res.Change == nil {
		return rules.ChangeResult{}, errors.New("ERR the meta group does not know rule changes made as one: upgrade every node")
	}
	return *res.Change, nil
}

// CommitsRuleChanges reports that the rule and block changes of a cluster
// are committed (in the meta group's log) by the time the calls that make
// them return: the server's replies to them need not wait for the data
// groups' commits, which know nothing of them.
func (c *Cluster) CommitsRuleChanges() bool { return true }

// Settle is commits.Settle for the HTTP API, whose only changes in a
// cluster are rule and block changes: those are committed when their
// calls return (see CommitsRuleChanges), so an answer after a change
// waits for nothing more; an answer after a check waits as commits.Settle
// says.
func (c *Cluster) Settle(ctx context.Context, change bool) error {
	if change {
		return nil
	}
	return c.commits.Settle(ctx, false)
}

// Rule returns the rule with the given id.
func (c *Cluster) Rule(id string) (rules.Rule, bool) {
	r, ok := c.meta.Current().Rules[id]
	return r, ok
}

// Rules returns every rule in id order.
func (c *Cluster) Rules() []rules.Rule { return meta.SortedRules(c.meta.Current()) }

// RuleCount returns the number of rules.
func (c *Cluster) RuleCount() int { return len(c.meta.Current().Rules) }

// CheckRules evaluates q against the rules: the counters of the matching
// rules ("id:value") live in the groups of their slots, on this node or
// others, and are charged with CheckAll, so the request is charged to
// every rule or to none, and no rule ever admits more than its limit.
//
// If one of q's identifiers is blocked, q is denied by the block and
// nothing is charged. A denial by a rule with a block is counted in the
// counter "!id:value" (in its slot's group, like the rule's counters), and
// on the rule's block.after-th the block is proposed to the meta group in
// the background, from where it reaches every node.
func (c *Cluster) CheckRules(q *rules.Query, now int64) error {
	if err := shards.CheckRulesWith(c.meta.Rules(), c.meta.Blocks(), q, now, c.CheckAll); err != nil {
		return err
	}
	if q.Blocked {
		c.blockDenied.Add(1)
		return nil
	}
	if !q.Allowed {
		shards.DenialsToCount(q, func(e *rules.Eval) { c.countDenial(q, e, now) })
	}
	return nil
}

// SetBlock blocks b.Identifier until b.Until through the meta group, so
// that every node denies it.
func (c *Cluster) SetBlock(b rules.Block, now int64) error {
	_, err := c.ruleCmd(meta.Cmd{Op: "block.set", Block: &b, Max: c.cfg.MaxBlocks})
	return err
}

// Unblock lifts the block of identifier through the meta group and
// reports whether one was live.
func (c *Cluster) Unblock(identifier string, now int64) (bool, error) {
	return c.ruleCmd(meta.Cmd{Op: "block.del", ID: identifier})
}

// ActiveBlocks returns the blocks live at now, sorted by identifier, each
// with its TTL.
func (c *Cluster) ActiveBlocks(now int64) []rules.Block {
	return c.meta.Blocks().Active(now)
}

// BlockStats returns the counts of blocks: those applied on this node by
// source, the rules checks this node denied by a block, and those live
// at now.
func (c *Cluster) BlockStats(now int64) shards.BlockStats {
	t := c.meta.Blocks()
	return shards.BlockStats{Made: c.meta.BlocksMade(), Denied: c.blockDenied.Load(), Active: t.Live(now),
		Dropped: c.meta.BlocksDropped() + c.blocksShed.Load(), Bytes: t.Bytes()}
}

// NewestBlocks returns up to n of the blocks live at now, those made last
// first, with their TTLs, and how many blocks are live.
func (c *Cluster) NewestBlocks(n int, now int64) ([]rules.Block, int) {
	t := c.meta.Blocks()
	return t.Newest(n, now), t.Live(now)
}

// CheckAll is shards.Store.CheckAll across the cluster: the ops' counters
// live in the groups of their slots, on this node or others. The groups
// are charged one after the other, each all or nothing, the group of the
// narrowest op (the smallest limit) first; if one denies, the charges
// already made are given back (engine.Refund) and the request is denied.
// So the request is charged to every op or to none, and no counter ever
// admits more than its limit. The price: while a charge waits to be given
// back, a concurrent request may be denied for it (under-admission, never
// over-admission). Charging the narrowest first makes that rare: the wider
// counters then see only the requests the narrowest admitted, and deny
// (and so give back) only when they are spent themselves. With C requests
// naming the same counters in flight at once, the charges that will be
// given back are at most C-1, so a counter admits at least its limit less
// (C-1) times the cost. A refund made after the charge's window has passed
// gives nothing back (it no longer counts).
//
// It fills each op's Result for the groups it reached (a later group's
// ops keep a zero Result when an earlier one denied); now is ignored in
// favour of this node's clock, as for every charge. The ops' keys are
// copied; ops must not share a key.
func (c *Cluster) CheckAll(ops []shards.Op, cost, now int64) (bool, error) {
	var done []chargeDone
	for _, p := range c.partition(ops, cost) {
		rep, err := c.charge(p.req)
		if err != nil {
			c.giveBack(done)
			return false, err
		}
		for i, r := range rep.Results {
			ops[p.ops[i]].Result = r
		}
		if !rep.Allowed {
			c.giveBack(done)
			return false, nil
		}
		done = append(done, chargeDone{req: p.req, results: rep.Results, at: rep.At})
	}
	return true, nil
}

// Blocks reports whether the command named name may wait on other nodes:
// a rule check (whose counters other nodes may hold), a rule or membership
// change (which the meta group's leader applies), RL.HOTKEYS (which asks
// every node), and with Proxy every
// keyed command. The server runs connections
// that send them on goroutines of their own.
func (c *Cluster) Blocks(name string) bool {
	switch name {
	case "rl.checkrules", "rl.rule.set", "rl.rule.del", "rl.block", "rl.unblock", "rl.cluster.join", "rl.cluster.leave", "rl.hotkeys":
		return true
	case "rl.check", "rl.peek", "rl.reset", "cl.throttle", "exec":
		return c.cfg.Proxy // forwarded to another node
	}
	return false
}

// ---- Hot keys across the cluster (hotkeys.go).

// HotKeys returns the count keys checked most across the cluster in the
// window of about a minute that ends at now: every node's sketches (those
// of the checks it ran, in every group it hosts) summed per key. Nodes
// are asked at once; one that does not answer within a second (or before
// ctx ends) is left out, and the answer comes without it. Safe for
// concurrent use.
func (c *Cluster) HotKeys(ctx context.Context, count int, now int64) []shards.HotKey {
	per := max(2*count, 20) // a node's top rows: the key it holds most of comes first
	lists := [][]shards.HotKey{c.localHotKeys(per, now)}
	req := hotKeysReq{Count: per, Now: now}
	var mu sync.Mutex
	c.eachPeer(ctx, c.peerAddrs(), hotKeysTimeout, func(ctx context.Context, id, addr string) {
		rows, err := c.rpc.hotKeys(ctx, addr, req)
		if err != nil {
			c.log.Debug("hot keys: a node did not answer; left out", "node", id, "err", err)
			return
		}
		l := make([]shards.HotKey, len(rows))
		for i, r := range rows {
			l[i] = shards.HotKey{Key: string(r.Key), Checks: r.Checks, Denied: r.Denied}
		}
		mu.Lock()
		lists = append(lists, l)
		mu.Unlock()
	})
	return shards.MergeHotKeys(count, lists...)
}

// ---- Membership: joining and leaving (membership.go).

// Join adds node n to the cluster and returns the number of data groups,
// through the meta group's leader (this node or another). n's Raft
// listener should be up: the meta leader starts replicating to it at once.
func (c *Cluster) Join(ctx context.Context, n NodeInfo) (int, error) {
	if n.ID == "" || n.Raft == "" || n.RESP == "" {
		return 0, errors.New("ERR a joining node needs an id, a Raft address and a RESP address")
	}
	req := joinReq{Node: n}
	err := c.onMetaLeader(ctx,
		func() error { _, err := c.joinMeta(ctx, req); return err },
		func(ctx context.Context, addr string) (metaReply, error) { return c.rpc.metaJoin(ctx, addr, req) })
	if err != nil {
		return 0, err
	}
	return c.meta.Current().Groups, nil
}

// Leave makes node id leave the cluster: no group is placed on it any
// more, its groups move to the other nodes, then it is forgotten (watch
// GET /cluster). It returns once the leave is recorded.
func (c *Cluster) Leave(ctx context.Context, id string) error {
	req := leaveReq{ID: id}
	return c.onMetaLeader(ctx,
		func() error { _, err := c.leaveMeta(ctx, req); return err },
		func(ctx context.Context, addr string) (metaReply, error) { return c.rpc.metaLeave(ctx, addr, req) })
}

// ---- Leadership: takeovers (watch.go).

// Takeover returns the number of groups this node has taken over from
// lost leaders, and whether the last was within takeoverNudge: clients
// may still send those slots to the lost node (see server.Nudger). A node
// that forwards (ClusterConfig.Proxy) never reports one as recent: it
// serves every key wherever a client sends it, and its clients — redis-cli
// without -c, a plain redis-py — take a MOVED for an error.
func (c *Cluster) Takeover() (uint64, bool) {
	at := c.takeoverAt.Load()
	return c.takeovers.Load(), !c.cfg.Proxy && at != 0 && time.Since(time.Unix(0, at)) < takeoverNudge
}

// ---- The cluster's report, from every node's status call (rpc.go).

// Report asks every member for its groups' status (with digests at
// digestAt, if not 0) and puts the answers together.
func (c *Cluster) Report(ctx context.Context, digestAt int64) Report {
	addrs := c.peerAddrs()
	var mu sync.Mutex
	statuses := map[string]nodeStatus{c.cfg.NodeID: c.status(digestAt)}
	errs := map[string]string{}
	c.eachPeer(ctx, addrs, rpcTimeout, func(ctx context.Context, id, addr string) {
		s, err := c.rpc.status(ctx, addr, digestAt)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs[id] = err.Error()
			return
		}
		statuses[id] = s
	})
	v := c.View()
	r := Report{Node: c.cfg.NodeID, OK: v.OK, Rules: c.RuleCount()}
	if len(errs) > 0 {
		r.Errors = errs
	}
	names := map[string]string{} // cluster id → name
	for _, n := range v.Nodes {
		names[n.ID] = n.Name
	}
	leads := map[string]int{}
	for _, g := range v.Groups {
		rg := ReportGroup{ID: g.ID, Slots: [2]int{g.Start, g.End}, Leader: names[g.Leader]}
		for _, id := range g.Voters {
			name := names[id]
			rg.Voters = append(rg.Voters, name)
			for _, gs := range statuses[name].Groups {
				if gs.ID == g.ID {
					rg.Replicas = append(rg.Replicas, ReportReplica{Node: name, State: gs.State, Ready: gs.Ready,
						Term: gs.Term, Applied: gs.Applied, Keys: gs.Keys, Digest: gs.Digest})
					if gs.Ready {
						leads[name]++
					}
				}
			}
		}
		r.Groups = append(r.Groups, rg)
	}
	if _, id := c.metaR.LeaderWithID(); id != "" {
		r.MetaLeader = names[string(id)]
		if r.MetaLeader == "" {
			r.MetaLeader = string(id)
		}
	}
	for _, n := range v.Nodes {
		r.Nodes = append(r.Nodes, ReportNode{Name: n.Name, ID: n.ID, RESP: n.RESP, HTTP: n.HTTP, Raft: n.Raft,
			Connected: n.Connected, Leads: leads[n.Name], DiskLow: statuses[n.Name].DiskLow, Stopping: statuses[n.Name].Stopping})
	}
	r.Serving = r.OK && len(r.Errors) == 0 && r.ServedWithout("")
	r.Balanced = r.IsBalanced()
	return r
}

// ---- Metrics and INFO persistence (metrics.go).

// PersistenceInfo returns the fields of INFO persistence of a cluster
// node, as alternating names and values: the totals of the groups it
// hosts, then one line per group (raft_group_<id>) with its role, term and
// indexes.
func (c *Cluster) PersistenceInfo() []string {
	itoa := func(v int64) string { return strconv.FormatInt(v, 10) }
	out := []string{
		"loading", "0",
		"aof_enabled", "0",
		"rl_durable", "1",
		"rl_cluster", "1",
		"rl_consistency", c.cfg.Consistency.String(),
		"rl_flush_interval_ms", itoa(c.cfg.FlushInterval.Milliseconds()),
		"rl_log_status", logStatus(false, c.cfg.Storage.Space),
	}
	ls := c.cfg.Storage.LogStats()
	out = c.metrics.appendLogInfo(out, &ls)
	out = appendDiskInfo(out, c.cfg.Storage.Space)
	for _, g := range c.hostedGroups() {
		if g == nil {
			continue
		}
		st := g.raft.Stats()
		role := "follower"
		if g.phase.serving() {
			role = "leader"
		}
		out = append(out, "raft_group_"+strconv.Itoa(int(g.id)), "role="+role+",state="+st["state"]+",term="+st["term"]+
			",applied="+strconv.FormatUint(g.fsm.applied.Load(), 10)+",commit="+st["commit_index"]+
			",last_log="+st["last_log_index"]+",snapshot="+st["last_snapshot_index"]+",keys="+strconv.Itoa(g.store.Len()))
	}
	return out
}
