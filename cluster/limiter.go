package cluster

import (
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/shards"
	"github.com/rlserver/rlserver/slots"
	"github.com/rlserver/rlserver/values"
)

// Check is shards.Store.Check on the store of key's group, if this node
// serves its slot; else, with Proxy, the check forwarded to the node that
// does, or the routing error (MOVED, TRYAGAIN, CLUSTERDOWN).
func (c *Cluster) Check(key []byte, a engine.Algo, p engine.Params, cost, now int64) (engine.Result, error) {
	if c.cfg.Proxy {
		return c.Forwarder().Check(key, a, p, cost, now)
	}
	return c.check(key, a, p, cost, now)
}

func (c *Cluster) check(key []byte, a engine.Algo, p engine.Params, cost, now int64) (engine.Result, error) {
	g, err := c.serving(key)
	if err != nil {
		return engine.Result{}, err
	}
	defer g.serving.RUnlock()
	return g.store.Check(key, a, p, cost, now)
}

// Throttle is shards.Store.Throttle on the store of key's group (as Check).
func (c *Cluster) Throttle(key []byte, maxBurst, count, period, quantity, now int64) (engine.CellResult, error) {
	if c.cfg.Proxy {
		return c.Forwarder().Throttle(key, maxBurst, count, period, quantity, now)
	}
	return c.throttle(key, maxBurst, count, period, quantity, now)
}

func (c *Cluster) throttle(key []byte, maxBurst, count, period, quantity, now int64) (engine.CellResult, error) {
	g, err := c.serving(key)
	if err != nil {
		return engine.CellResult{}, err
	}
	defer g.serving.RUnlock()
	return g.store.Throttle(key, maxBurst, count, period, quantity, now)
}

// Reset is shards.Store.Reset on the store of key's group (as Check).
func (c *Cluster) Reset(key []byte, now int64) (bool, error) {
	if c.cfg.Proxy {
		return c.Forwarder().Reset(key, now)
	}
	return c.reset(key, now)
}

func (c *Cluster) reset(key []byte, now int64) (bool, error) {
	g, err := c.serving(key)
	if err != nil {
		return false, err
	}
	defer g.serving.RUnlock()
	return g.store.Reset(key, now)
}

// Flush forgets every key of the groups this node leads, as FLUSHALL on a
// Redis Cluster master forgets its own slots' keys.
func (c *Cluster) Flush() error {
	for _, g := range c.led() {
		err := g.store.Flush()
		g.serving.RUnlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// led returns the groups this node serves, each read-locked (the caller
// unlocks them).
func (c *Cluster) led() []*group {
	var out []*group
	for _, g := range c.hostedGroups() {
		if g == nil {
			continue
		}
		g.serving.RLock()
		if g.ready.Load() {
			out = append(out, g)
		} else {
			g.serving.RUnlock()
		}
	}
	return out
}

// Len returns the number of keys in the groups this node leads (DBSIZE, as
// a Redis Cluster master counts its own slots).
func (c *Cluster) Len() int {
	n := 0
	for _, g := range c.led() {
		n += g.store.Len()
		g.serving.RUnlock()
	}
	return n
}

// MemoryBytes returns the memory the keys of every hosted group take,
// led or followed, and the blocks the meta group holds.
func (c *Cluster) MemoryBytes() int64 {
	n := c.meta.blockTable().Bytes()
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
		if g := c.replica(gi); g != nil && g.ready.Load() {
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
			defer g.serving.RUnlock()
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
		g.serving.RUnlock()
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
			g.serving.RUnlock()
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
		g.serving.RUnlock()
	}
	return n
}
