package server

import (
	"errors"
	"strconv"

	"github.com/rlserver/rlserver/shards"
	"github.com/rlserver/rlserver/slots"
	"github.com/rlserver/rlserver/values"
)

// errNoValues is answered when the Limiter cannot hold Redis values (it
// implements no Transactor), or a cluster node's transaction found no
// store that serves the keys.
var errNoValues = errors.New("this node holds no Redis values for these keys now; try again")

// The commands of package values (GET, SET, INCRBY, LPUSH, HSET, ZADD,
// EXPIRE, ...) on the Redis values that Lua limiters and their libraries
// keep. Each runs values.Exec inside the Limiter's Transact with its keys'
// shards locked (Transactor), or inside EXEC's transaction; the commands
// that see every key (KEYS, SCAN, DBSIZE) lock every shard, and on a
// cluster node every group it leads (Spanner).

// Spanner is implemented by a Limiter whose keys live in several stores
// (a cluster node: one per Raft group it leads): the commands that see
// every key run across all of them.
type Spanner interface {
	// TransactAll locks every shard of every store the node serves, in a
	// fixed order, calls run with a transaction on each, and unlocks.
	TransactAll(run func(txs []*shards.Tx))
}

// valueCommands returns a table entry for each command of package values
// that the server has no command of its own for (have).
func valueCommands(have []*command) []*command {
	taken := make(map[string]bool, len(have))
	for _, c := range have {
		taken[c.name] = true
	}
	var list []*command
	for _, vc := range values.Commands() {
		if taken[vc.Name] {
			continue
		}
		vc := vc
		list = append(list, &command{name: vc.Name, arity: vc.Arity, flags: flagNames(vc.Flags),
			firstKey: vc.FirstKey, lastKey: vc.LastKey, keyStep: vc.KeyStep,
			group: vc.Group, summary: vc.Summary, value: vc,
			handler: func(s *Server, c *conn, args [][]byte, now int64) { s.runValue(c, vc, args, now) }})
	}
	return list
}

// flagNames returns Redis's names of f, as COMMAND reports them.
func flagNames(f values.Flags) []string {
	var out []string
	for _, n := range []struct {
		f    values.Flags
		name string
	}{{values.Write, "write"}, {values.ReadOnly, "readonly"}, {values.DenyOOM, "denyoom"},
		{values.Fast, "fast"}, {values.NoScript, "noscript"}} {
		if f&n.f != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// runValue runs vc, a command of package values, and writes its reply.
func (s *Server) runValue(c *conn, vc *values.Command, args [][]byte, now int64) {
	var buf [4][]byte
	keys := s.lookup(args[0]).keysOf(args, buf[:0])
	for _, k := range keys {
		if msg := s.checkKey(k); msg != "" {
			c.writeError(msg)
			return
		}
	}
	r, err := s.execValue(c, vc, keys, args, now)
	if err != nil {
		c.writeErr(err)
		return
	}
	c.writeReply(r)
}

// execValue runs vc on the keyspace: EXEC's transaction, or one of its
// own. The error is the routing error of a cluster node that stopped
// serving the keys meanwhile.
func (s *Server) execValue(c *conn, vc *values.Command, keys, args [][]byte, now int64) (values.Reply, error) {
	run := func(ks values.Keyspace, now int64) values.Reply {
		return values.Exec(ks, now, c.proto, args)
	}
	if c.tx != nil {
		k := c.tx.Keys(now)
		return run(k, k.Now()), nil
	}
	all := vc.Flags&values.AllKeys != 0
	if sp, ok := s.cfg.Limiter.(Spanner); ok && all {
		var r values.Reply
		sp.TransactAll(func(txs []*shards.Tx) {
			ks := spanKeys(txs, now)
			r = run(ks, ks.now)
		})
		return r, nil
	}
	t, ok := s.cfg.Limiter.(Transactor)
	if !ok {
		return values.Reply{}, errNoValues
	}
	var r values.Reply
	ran := false
	t.Transact(shards.TxPlan{Keys: keys, All: all}, func(tx *shards.Tx) {
		if tx == nil {
			return
		}
		k := tx.Keys(now)
		r, ran = run(k, k.Now()), true
		for _, key := range keys {
			k.Hot(key)
		}
	})
	if !ran {
		return values.Reply{}, s.routeAgain(c, keys)
	}
	return r, nil
}

// routeAgain returns the routing error of keys whose group this cluster
// node stopped serving between the command's routing and its run.
func (s *Server) routeAgain(c *conn, keys [][]byte) error {
	if s.cl != nil && len(keys) > 0 {
		if err := s.cl.Route(slots.Of(keys[0])); err != nil {
			return err
		}
	}
	return errNoValues
}

// writeReply writes r, built for c's protocol by package values.
func (c *conn) writeReply(r values.Reply) {
	switch r.Kind {
	case values.Nil:
		c.writeNull()
	case values.Status:
		c.writeStatus(string(r.Str))
	case values.Error:
		c.writeError(string(r.Str))
	case values.Int:
		c.writeInt(r.Int)
	case values.Bulk:
		c.writeBulk(r.Str)
	case values.NilArray:
		if c.proto == 3 {
			c.out = append(c.out, "_\r\n"...)
		} else {
			c.out = append(c.out, "*-1\r\n"...)
		}
	case values.Double:
		c.writeDouble(r)
	case values.Map:
		c.writeMap(len(r.Elems) / 2)
		for _, e := range r.Elems {
			c.writeReply(e)
		}
	default: // Array
		c.writeArray(len(r.Elems))
		for _, e := range r.Elems {
			c.writeReply(e)
		}
	}
}

// writeDouble writes a RESP3 double: r.Str if package values formatted
// it, else the shortest form that reads back as r.Float.
func (c *conn) writeDouble(r values.Reply) {
	c.out = append(c.out, ',')
	if len(r.Str) > 0 {
		c.out = append(c.out, r.Str...)
	} else {
		c.out = strconv.AppendFloat(c.out, r.Float, 'g', -1, 64)
	}
	c.out = append(c.out, '\r', '\n')
}
