package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/rlserver/rlserver/cluster/meta"
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

// maxMetaEntry bounds a meta command's size: it travels in one internal
// call to the meta group's leader.
const maxMetaEntry = transport.DefaultMaxFrame - 64<<10

func (c *Cluster) ruleCmd(cmd meta.Cmd) (bool, error) {
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

// meta.Cmd applies cmd through the meta group, as a request of its own
// (meta.Cmd.Req), within ruleTimeout. An attempt whose outcome is unknown
// — the leader did not answer, or lost its lead, after the entry may have
// been committed — is made again with the same request, which the meta
// group answers as it answered the first if that one committed: a change
// that committed is answered as its success, never as an error. If no
// attempt is answered in time, the error says the outcome is unknown.
func (c *Cluster) metaCmd(cmd meta.Cmd) (meta.Result, error) {
	if err := c.cfg.Storage.Space.Err(); err != nil {
		return meta.Result{}, err // this node's disk is nearly full
	}
	cmd.Req, cmd.At = c.nextReq(), c.clock()
	b, err := json.Marshal(cmd)
	if err != nil {
		return meta.Result{}, err
	}
	if len(b) > maxMetaEntry {
		return meta.Result{}, fmt.Errorf("ERR the change is %d bytes, more than a cluster carries in one change (%d)", len(b), maxMetaEntry)
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
			return meta.Result{}, fmt.Errorf("TRYAGAIN the rule store did not confirm the change within %s, so it may or may not have been made (last: %v); read it back before making it again", ruleTimeout, err)
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
	if !g.phase.enter() {
		return chargeReply{}, errNotServedHere
	}
	ops := req.toOps()
	now := c.clock()
	allowed, err := g.store.CheckAll(ops, req.Cost, now)
	g.phase.leave()
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
	if !g.phase.enter() {
		return errNotServedHere
	}
	defer g.phase.leave()
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
