package cluster

import (
	"github.com/rlserver/rlserver/engine"
)

// check, throttle and reset run one key's operation on the store of its
// group, if this node serves it (Check, Throttle and Reset in api.go).
func (c *Cluster) check(key []byte, a engine.Algo, p engine.Params, cost, now int64) (engine.Result, error) {
	g, err := c.serving(key)
	if err != nil {
		return engine.Result{}, err
	}
	defer g.phase.leave()
	return g.store.Check(key, a, p, cost, now)
}

func (c *Cluster) throttle(key []byte, maxBurst, count, period, quantity, now int64) (engine.CellResult, error) {
	g, err := c.serving(key)
	if err != nil {
		return engine.CellResult{}, err
	}
	defer g.phase.leave()
	return g.store.Throttle(key, maxBurst, count, period, quantity, now)
}

func (c *Cluster) reset(key []byte, now int64) (bool, error) {
	g, err := c.serving(key)
	if err != nil {
		return false, err
	}
	defer g.phase.leave()
	return g.store.Reset(key, now)
}

// led returns the groups this node serves, each read-locked (the caller
// unlocks them).
func (c *Cluster) led() []*group {
	var out []*group
	for _, g := range c.hostedGroups() {
		if g == nil {
			continue
		}
		if g.phase.enter() {
			out = append(out, g)
		}
	}
	return out
}
