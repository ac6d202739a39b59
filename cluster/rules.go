package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/rlserver/rlserver/cluster/transport"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/shards"
	"github.com/rlserver/rlserver/slots"
)

// The rules live in the meta group: a change made on any node is applied
// by the meta group's leader and reaches every node; reads are local.

// ruleTimeout bounds a rule change.
const ruleTimeout = 5 * time.Second

// SetRule stores r, replacing any rule with its id, through the meta
// group, and reports whether the id was new.
func (c *Cluster) SetRule(r rules.Rule) (bool, error) {
	if _, err := rules.Compile(r, 0); err != nil {
		return false, err
	}
	return c.ruleCmd(metaCmd{Op: "rule.set", Rule: &r})
}

// CreateRule is SetRule that fails with rules.ErrExists if the id is taken.
func (c *Cluster) CreateRule(r rules.Rule) error {
	if _, err := rules.Compile(r, 0); err != nil {
		return err
	}
	_, err := c.ruleCmd(metaCmd{Op: "rule.create", Rule: &r})
	return err
}

// DeleteRule removes the rule with the given id and reports whether it
// existed.
func (c *Cluster) DeleteRule(id string) (bool, error) {
	return c.ruleCmd(metaCmd{Op: "rule.del", ID: id})
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
	res, err := c.metaCmd(metaCmd{Op: "rules.change", Change: &ch})
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

// maxMetaEntry bounds a meta command's size: it travels in one internal
// call to the meta group's leader.
const maxMetaEntry = transport.DefaultMaxFrame - 64<<10

func (c *Cluster) ruleCmd(cmd metaCmd) (bool, error) {
	res, err := c.metaCmd(cmd)
	if err != nil {
		return false, err
	}
	if res.Err != "" {
		if res.Exists {
			return false, fmt.Errorf("%w: %q", rules.ErrExists, cmd.Rule.ID)
		}
		return false, errors.New(res.Err)
	}
	return res.Added, nil
}

// metaCmd applies cmd through the meta group, as a request of its own
// (metaCmd.Req), within ruleTimeout. An attempt whose outcome is unknown
// — the leader did not answer, or lost its lead, after the entry may have
// been committed — is made again with the same request, which the meta
// group answers as it answered the first if that one committed: a change
// that committed is answered as its success, never as an error. If no
// attempt is answered in time, the error says the outcome is unknown.
func (c *Cluster) metaCmd(cmd metaCmd) (metaResult, error) {
	if err := c.cfg.Storage.Space.Err(); err != nil {
		return metaResult{}, err // this node's disk is nearly full
	}
	cmd.Req, cmd.At = c.nextReq(), c.clock()
	b, err := json.Marshal(cmd)
	if err != nil {
		return metaResult{}, err
	}
	if len(b) > maxMetaEntry {
		return metaResult{}, fmt.Errorf("ERR the change is %d bytes, more than a cluster carries in one change (%d)", len(b), maxMetaEntry)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ruleTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		res, err := c.metaApply(ctx, b)
		if err == nil {
			if attempt > 1 {
				c.log.Info("a rule or block change was confirmed after a retry", "op", cmd.Op, "attempts", attempt)
			}
			return res, nil
		}
		select {
		case <-ctx.Done():
			return metaResult{}, fmt.Errorf("TRYAGAIN the rule store did not confirm the change within %s, so it may or may not have been made (last: %v); read it back before making it again", ruleTimeout, err)
		case <-time.After(metaRetryPause):
		}
	}
}

// metaRetryPause is the pause between two attempts of a meta command.
const metaRetryPause = 50 * time.Millisecond

// nextReq returns a request name no other request of any node has had:
// this node's id, a random number drawn when it started, and a count.
func (c *Cluster) nextReq() string {
	return fmt.Sprintf("%s:%s:%d", c.cfg.NodeID, c.reqPrefix, c.reqSeq.Add(1))
}

// Rule returns the rule with the given id.
func (c *Cluster) Rule(id string) (rules.Rule, bool) {
	r, ok := c.meta.current().Rules[id]
	return r, ok
}

// Rules returns every rule in id order.
func (c *Cluster) Rules() []rules.Rule { return sortedRules(c.meta.current()) }

// RuleCount returns the number of rules.
func (c *Cluster) RuleCount() int { return len(c.meta.current().Rules) }

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
	if err := shards.CheckRulesWith(c.meta.ruleSet(), c.meta.blockTable(), q, now, c.CheckAll); err != nil {
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

// countDenial counts one denial of e's identifier by e's rule, and on
// the rule's block.after-th within block.within proposes the block.
func (c *Cluster) countDenial(q *rules.Query, e *rules.Eval, now int64) {
	after, within, dur, _ := e.Rule.BlockAfter()
	ops := []shards.Op{{Key: q.DenialKey(e), Algo: engine.Log, Params: engine.Params{Limit: after, Window: within}, Replace: true}}
	allowed, err := c.CheckAll(ops, 1, now)
	if err != nil || !allowed || ops[0].Result.Remaining != 0 {
		return
	}
	b := shards.DenialBlock(e, now, dur)
	select {
	case c.blockProposals <- struct{}{}:
	default:
		c.blocksShed.Add(1) // as many blocks on their way as the meta group takes: not this one
		return
	}
	go func() {
		defer func() { <-c.blockProposals }()
		if err := c.SetBlock(b, now); err != nil {
			c.log.Warn("a rule's block could not be made", "identifier", b.Identifier, "rule", b.Rule, "err", err)
		}
	}()
}

// maxBlockProposals bounds the blocks rule checks propose at once: under
// an attack from many identifiers, blocks beyond what the meta group
// commits are not proposed (BlockStats.Dropped counts them) rather than
// queued in goroutines without bound.
const maxBlockProposals = 64

// SetBlock blocks b.Identifier until b.Until through the meta group, so
// that every node denies it.
func (c *Cluster) SetBlock(b rules.Block, now int64) error {
	_, err := c.ruleCmd(metaCmd{Op: "block.set", Block: &b, Max: c.cfg.MaxBlocks})
	return err
}

// Unblock lifts the block of identifier through the meta group and
// reports whether one was live.
func (c *Cluster) Unblock(identifier string, now int64) (bool, error) {
	return c.ruleCmd(metaCmd{Op: "block.del", ID: identifier})
}

// ActiveBlocks returns the blocks live at now, sorted by identifier, each
// with its TTL.
func (c *Cluster) ActiveBlocks(now int64) []rules.Block {
	return c.meta.blockTable().Active(now)
}

// BlockStats returns the counts of blocks: those applied on this node by
// source, the rules checks this node denied by a block, and those live
// at now.
func (c *Cluster) BlockStats(now int64) shards.BlockStats {
	t := c.meta.blockTable()
	return shards.BlockStats{Made: c.meta.blocksMadeCopy(), Denied: c.blockDenied.Load(), Active: t.Live(now),
		Dropped: c.meta.blocksDropped.Load() + c.blocksShed.Load(), Bytes: t.Bytes()}
}

// NewestBlocks returns up to n of the blocks live at now, those made last
// first, with their TTLs, and how many blocks are live.
func (c *Cluster) NewestBlocks(n int, now int64) ([]rules.Block, int) {
	t := c.meta.blockTable()
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

// part is the counters of one group.
type part struct {
	req chargeReq
	ops []int // index in the caller's ops of each of req's
	// narrowest is the smallest limit of req's ops that can deny (not in
	// shadow mode), the largest int64 if none can: the order of charging.
	narrowest int64
}

// partition splits ops by group, the group of the narrowest op (the
// smallest limit of one that is not in shadow mode) first, then in group
// order.
func (c *Cluster) partition(ops []shards.Op, cost int64) []part {
	byGroup := map[int]*part{}
	for i := range ops {
		op := &ops[i]
		g := c.groupOf(slots.Of(op.Key))
		p := byGroup[g]
		if p == nil {
			p = &part{req: chargeReq{Group: g, Cost: cost}, narrowest: math.MaxInt64}
			byGroup[g] = p
		}
		co := chargeOp{Key: append([]byte(nil), op.Key...), Algo: int(op.Algo),
			Limit: op.Params.Limit, Window: op.Params.Window, Burst: op.Params.Burst,
			Shadow: op.Shadow, Replace: op.Replace}
		if op.OwnCost {
			co.Cost = &op.Cost
		}
		p.req.Ops = append(p.req.Ops, co)
		p.ops = append(p.ops, i)
		if !op.Shadow {
			p.narrowest = min(p.narrowest, op.Params.Limit)
		}
	}
	out := make([]part, 0, len(byGroup))
	for _, p := range byGroup {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool {
		if a, b := out[i].narrowest, out[j].narrowest; a != b {
			return a < b
		}
		return out[i].req.Group < out[j].req.Group
	})
	return out
}

// chargeDone is a group's charge that may have to be given back.
type chargeDone struct {
	req     chargeReq
	results []engine.Result
	at      int64
}

// charge charges one group's counters, here or on the group's leader.
func (c *Cluster) charge(req chargeReq) (chargeReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		req.Now = c.clock()
		rep, err := c.chargeLocal(ctx, req)
		if !errors.Is(err, errNotServedHere) {
			return rep, err
		}
		addr := c.leaderRaftAddr(req.Group)
		if addr == "" {
			return rep, c.routeErr(c.firstSlot(req.Group), req.Group)
		}
		rep, err = c.rpc.charge(ctx, addr, req)
		var bad *badReply
		if err == nil || errors.As(err, &bad) {
			return rep, err
		}
		if attempt > 0 || ctx.Err() != nil {
			return rep, remoteErr(err)
		}
	}
}

// giveBack refunds every charge in done, where it was made.
func (c *Cluster) giveBack(done []chargeDone) {
	for _, d := range done {
		req := d.req
		req.Now = d.at
		for i := range req.Ops {
			req.Ops[i].Charged = d.results[i].Allowed
		}
		if err := c.refundLocal(req); errors.Is(err, errNotServedHere) {
			if addr := c.leaderRaftAddr(req.Group); addr != "" {
				ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
				err = c.rpc.refund(ctx, addr, req)
				cancel()
			}
			if err != nil {
				c.log.Warn("a rule check's charge could not be given back", "group", req.Group, "err", err)
			}
		}
	}
}

// errNotServedHere: this node does not lead the group (the caller asks
// the leader).
var errNotServedHere = errors.New("cluster: the group is not served here")

// chargeLocal charges req's counters on this node's store of the group, if
// it serves it, at this node's clock (the group leader's, not the
// coordinator's: see keyReq.Now); in strong mode it answers only once the
// charge is committed.
func (c *Cluster) chargeLocal(ctx context.Context, req chargeReq) (chargeReply, error) {
	g := c.hosted(req.Group)
	if g == nil {
		return chargeReply{}, errNotServedHere
	}
	g.serving.RLock()
	if !g.ready.Load() {
		g.serving.RUnlock()
		return chargeReply{}, errNotServedHere
	}
	ops := req.toOps()
	now := c.clock()
	allowed, err := g.store.CheckAll(ops, req.Cost, now)
	g.serving.RUnlock()
	if err != nil {
		return chargeReply{}, err
	}
	rep := chargeReply{Allowed: allowed, At: now, Results: make([]engine.Result, len(ops))}
	for i := range ops {
		rep.Results[i] = ops[i].Result
	}
	if allowed && c.Strong() {
		if err := c.Sync(ctx); err != nil {
			return chargeReply{}, err
		}
	}
	return rep, nil
}

// refundLocal gives back req's charged counters on this node's store of
// the group, if it serves it.
func (c *Cluster) refundLocal(req chargeReq) error {
	g := c.hosted(req.Group)
	if g == nil {
		return errNotServedHere
	}
	g.serving.RLock()
	defer g.serving.RUnlock()
	if !g.ready.Load() {
		return errNotServedHere
	}
	return g.store.RefundAll(req.toOps(), req.Cost, req.Now, max(req.Now, c.clock()))
}

// hosted returns this node's replica of group id, or nil.
func (c *Cluster) hosted(id int) *group { return c.replica(id) }

// leaderRaftAddr returns the Raft address of group g's leader, or "".
func (c *Cluster) leaderRaftAddr(g int) string {
	if grp := c.hosted(g); grp != nil {
		addr, _ := grp.raft.LeaderWithID()
		return string(addr)
	}
	if id := c.remoteLeader(g); id != "" {
		return c.raftAddrOf(id)
	}
	return ""
}

// firstSlot returns the first slot of group g.
func (c *Cluster) firstSlot(g int) int {
	s, _ := c.slotRange(g)
	return s
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
