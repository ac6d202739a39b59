package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/slots"
	"github.com/rlserver/rlserver/values"
)

// Forwarding: a node answers a keyed command for a slot it does not serve
// by asking the node that does (the internal call callKey), for clients
// that do not follow MOVED — with --proxy, every RESP client; always, the
// HTTP API (Forwarder). The serving node runs the command as its own
// client's, and in strong mode answers once the change is committed, so a
// forwarded reply promises what a direct one does. A pipelined batch runs
// its commands one after another, so their replies keep request order.

// keyReq is a keyed command forwarded to the node that serves its slot.
type keyReq struct {
	Op   string `json:"op"` // check, throttle, reset
	Key  []byte `json:"key"`
	Algo int    `json:"algo,omitempty"`
	// check: Limit, Window, Burst, Cost; throttle: MaxBurst, Count,
	// Period, Quantity.
	Limit    int64 `json:"limit,omitempty"`
	Window   int64 `json:"window,omitempty"`
	Burst    int64 `json:"burst,omitempty"`
	Cost     int64 `json:"cost,omitempty"`
	MaxBurst int64 `json:"max_burst,omitempty"`
	Count    int64 `json:"count,omitempty"`
	Period   int64 `json:"period,omitempty"`
	Quantity int64 `json:"quantity,omitempty"`
	// Now is the sender's clock. The leader decides at its own (runKey):
	// a sender whose clock is ahead would otherwise move the shards of
	// the leader's group ahead of the leader's clock and freeze their
	// keys for the difference.
	Now int64 `json:"now"`
	// exec: a command of package values or a script, whole, and the
	// protocol of the client's connection (2 or 3).
	Args  [][]byte `json:"args,omitempty"`
	Proto int      `json:"proto,omitempty"`
}

// keyReply is the answer to a keyReq.
type keyReply struct {
	Result  engine.Result     `json:"result"`
	Cell    engine.CellResult `json:"cell"`
	Existed bool              `json:"existed"`
	Reply   *values.Reply     `json:"reply,omitempty"`
}

// forwardTimeout bounds a forwarded command, retries included.
const forwardTimeout = 3 * time.Second

// forward runs req on the node that serves its key's slot. It retries
// while the slot's group moves (MOVED, TRYAGAIN) until forwardTimeout.
func (c *Cluster) forward(req keyReq) (keyReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
	defer cancel()
	slot := slots.Of(req.Key)
	var last error
	for {
		gi := c.groupOf(slot)
		if g := c.replica(gi); g != nil && g.phase.serving() {
			return c.runKey(ctx, req) // it moved here meanwhile
		}
		addr := c.leaderRaftAddr(gi)
		if addr == "" {
			last = c.routeErr(slot, gi)
		} else {
			rep, err := c.rpc.key(ctx, addr, req)
			var bad *badReply
			if err == nil || errors.As(err, &bad) {
				return rep, err
			}
			last = remoteErr(err)
			if !retriable(last) {
				return keyReply{}, last
			}
		}
		select {
		case <-ctx.Done():
			return keyReply{}, last
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// retriable reports whether a forwarded command that failed with err may
// be sent again: the slot moved or its group is electing. An unreachable
// node is retried too: the command may have run there, but only if that
// node then crashed before committing it (strong mode), or its reply is
// lost with it. ErrLostLead is not: the change ran and may yet be
// committed, so running it again could charge twice; its outcome is
// unknown, and the client is told so.
func retriable(err error) bool {
	var moved *MovedError
	if errors.As(err, &moved) {
		return true
	}
	if errors.Is(err, ErrLostLead) {
		return false
	}
	switch redisWord(err) {
	case "MOVED", "TRYAGAIN", "CLUSTERDOWN":
		return true
	}
	return false
}

// redisWord returns the first word of err's text.
func redisWord(err error) string {
	s := err.Error()
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			return s[:i]
		}
	}
	return s
}

// runKey runs a forwarded command on this node, which serves its slot, at
// this node's clock (the group's leader's); in strong mode it returns once
// the change is committed.
func (c *Cluster) runKey(ctx context.Context, req keyReq) (keyReply, error) {
	g, err := c.serving(req.Key)
	if err != nil {
		return keyReply{}, err
	}
	var rep keyReply
	if req.Op == "exec" {
		g.phase.leave() // the command routes itself again
		return c.runExec(ctx, req)
	}
	now := c.clock()
	switch req.Op {
	case "check":
		rep.Result, err = g.store.Check(req.Key, engine.Algo(req.Algo),
			engine.Params{Limit: req.Limit, Window: req.Window, Burst: req.Burst}, req.Cost, now)
	case "throttle":
		rep.Cell, err = g.store.Throttle(req.Key, req.MaxBurst, req.Count, req.Period, req.Quantity, now)
	case "reset":
		rep.Existed, err = g.store.Reset(req.Key, now)
	default:
		err = errors.New("ERR unknown forwarded command " + req.Op)
	}
	g.phase.leave()
	if err == nil && c.Strong() {
		err = c.Sync(ctx)
	}
	return rep, err
}

// Forwarder is a view of a cluster node that serves every key: the keys
// of slots this node does not serve are forwarded to the nodes that do.
// The HTTP API checks through it (HTTP clients do not follow MOVED), and
// with --proxy so does the RESP server.
type Forwarder struct{ c *Cluster }

// Check is Cluster.Check, forwarded if the slot is served elsewhere.
func (f Forwarder) Check(key []byte, a engine.Algo, p engine.Params, cost, now int64) (engine.Result, error) {
	r, err := f.c.check(key, a, p, cost, now)
	if err != nil && isRouting(err) {
		var rep keyReply
		rep, err = f.c.forward(keyReq{Op: "check", Key: key, Algo: int(a), Limit: p.Limit, Window: p.Window,
			Burst: p.Burst, Cost: cost, Now: now})
		r = rep.Result
	}
	return r, err
}

// Throttle is Cluster.Throttle, forwarded if the slot is served elsewhere.
func (f Forwarder) Throttle(key []byte, maxBurst, count, period, quantity, now int64) (engine.CellResult, error) {
	r, err := f.c.throttle(key, maxBurst, count, period, quantity, now)
	if err != nil && isRouting(err) {
		var rep keyReply
		rep, err = f.c.forward(keyReq{Op: "throttle", Key: key, MaxBurst: maxBurst, Count: count, Period: period,
			Quantity: quantity, Now: now})
		r = rep.Cell
	}
	return r, err
}

// Reset is Cluster.Reset, forwarded if the slot is served elsewhere.
func (f Forwarder) Reset(key []byte, now int64) (bool, error) {
	ok, err := f.c.reset(key, now)
	if err != nil && isRouting(err) {
		var rep keyReply
		rep, err = f.c.forward(keyReq{Op: "reset", Key: key, Now: now})
		ok = rep.Existed
	}
	return ok, err
}

// isRouting reports whether err says that another node serves the key, or
// none does right now.
func isRouting(err error) bool {
	var moved *MovedError
	return errors.As(err, &moved) || Transient(err) || errors.Is(err, ErrClusterDown)
}

// Executor runs, on this node, a command of package values or a script
// that another node forwarded (the server implements it): args is the
// whole command, proto the protocol its reply is built for. A reply that
// is a routing error (MOVED, TRYAGAIN, CLUSTERDOWN) says that this node
// stopped serving the keys meanwhile.
type Executor interface {
	ExecLocal(args [][]byte, proto int, now int64) values.Reply
}

// runExec runs a forwarded "exec" on this node.
func (c *Cluster) runExec(ctx context.Context, req keyReq) (keyReply, error) {
	e := c.exec.Load()
	if e == nil {
		return keyReply{}, errors.New("ERR this node runs no forwarded commands")
	}
	r := (*e).ExecLocal(req.Args, req.Proto, c.clock()) // the leader's clock, as runKey
	if r.Kind == values.Error {
		if w := redisWord(errors.New(string(r.Str))); w == "MOVED" || w == "TRYAGAIN" || w == "CLUSTERDOWN" {
			return keyReply{}, errors.New(string(r.Str))
		}
	}
	if c.Strong() {
		if err := c.Sync(ctx); err != nil {
			return keyReply{}, err
		}
	}
	return keyReply{Reply: &r}, nil
}

// Exec runs args — a command of package values or a script whose keys
// lie in slot — on the node that serves slot, and returns its reply; the
// error is a routing error when no node serves it in time.
func (f Forwarder) Exec(slot int, key []byte, args [][]byte, proto int, now int64) (values.Reply, error) {
	rep, err := f.c.forward(keyReq{Op: "exec", Key: key, Args: args, Proto: proto, Now: now})
	if err != nil {
		return values.Reply{}, err
	}
	if rep.Reply == nil {
		return values.Reply{}, errors.New("ERR the forwarded command got no reply")
	}
	return *rep.Reply, nil
}
