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
	r, err := s.execValue(c.tx, c.proto, vc, keys, args, now)
	if err != nil && c.tx == nil && len(keys) > 0 && s.proxying() && !errors.Is(err, shards.ErrBusy) {
		r, err = s.forwardExec(keys[0], args, c.proto, now)
	}
	if err != nil {
		c.writeErr(err)
		return
	}
	c.writeReply(r)
}

// execValue runs vc on this node: in tx (EXEC's transaction) if it is
// set, else in a transaction of its own, across every store this node
// serves for the commands on every key. The error is the routing error of
// a cluster node that does not serve the keys now.
func (s *Server) execValue(tx *shards.Tx, proto int, vc *values.Command, keys, args [][]byte, now int64) (values.Reply, error) {
	all := vc.Flags&values.AllKeys != 0
	if sp, ok := s.cfg.Limiter.(Spanner); ok && all && tx == nil {
		var r values.Reply
		sp.TransactAll(func(txs []*shards.Tx) {
			ks := spanKeys(txs, now)
			r = values.Exec(ks, ks.now, proto, args)
		})
		return r, nil
	}
	var r values.Reply
	ran, err := s.onKeys(tx, keys, all, false, now, func(k *shards.Keys, _ *shards.Tx) {
		if k == nil {
			r = values.ErrorReply("ERR this command needs a key")
			return
		}
		r = values.Exec(k, k.Now(), proto, args)
		for _, key := range keys {
			k.Hot(key)
		}
	})
	if err != nil {
		return values.Reply{}, err
	}
	if !ran {
		return values.Reply{}, s.routeAgain(keys)
	}
	return r, nil
}

// ExecForwarder is implemented by a cluster node run with --proxy: a
// command of package values or a script whose slot another node serves
// is run there, for clients that do not follow MOVED.
type ExecForwarder interface {
	// Proxying reports whether the node forwards (--proxy).
	Proxying() bool
	// ForwardExec runs args, whose keys lie in key's slot, on the node
	// that serves it, and returns its reply.
	ForwardExec(key []byte, args [][]byte, proto int, now int64) (values.Reply, error)
}

// proxying reports whether the Limiter is a cluster node that forwards
// the commands of slots it does not serve (--proxy).
func (s *Server) proxying() bool {
	f, ok := s.cfg.Limiter.(ExecForwarder)
	return ok && f.Proxying()
}

// forwardExec forwards a command of values or a script that this node
// does not serve to the node that does (see proxying).
func (s *Server) forwardExec(key []byte, args [][]byte, proto int, now int64) (values.Reply, error) {
	return s.cfg.Limiter.(ExecForwarder).ForwardExec(key, args, proto, now)
}

// ExecLocal runs a command of package values or an EVAL-family command
// that another cluster node forwarded, on this node, and returns its reply
// for protocol proto (cluster.Executor). A routing error (this node does
// not serve the keys now) is a reply too: TRYAGAIN, MOVED, CLUSTERDOWN.
func (s *Server) ExecLocal(args [][]byte, proto int, now int64) values.Reply {
	if len(args) == 0 {
		return values.ErrorReply("ERR empty command")
	}
	cmd := s.lookup(args[0])
	switch {
	case cmd == nil:
		return values.ErrorReply(unknownCommand(args))
	case !cmd.arityOK(len(args)):
		return values.ErrorReply("ERR wrong number of arguments for '" + cmd.name + "' command")
	}
	var r values.Reply
	var err error
	switch {
	case cmd.value != nil:
		keys := cmd.keysOf(args, nil)
		r, err = s.execValue(nil, proto, cmd.value, keys, args, now)
	case cmd.numKeysAt > 0:
		r, err = s.evalLocal(nil, proto, args, now)
	default:
		return values.ErrorReply("ERR '" + cmd.name + "' is not forwarded")
	}
	if err != nil {
		return values.ErrorReply(replyError(err))
	}
	return r
}

// routeAgain returns the routing error of keys whose group this cluster
// node stopped serving between the command's routing and its run:
// Route's, or TRYAGAIN (a proxying node, whose Route is always nil).
func (s *Server) routeAgain(keys [][]byte) error {
	if s.cl != nil && len(keys) > 0 {
		if err := s.cl.Route(slots.Of(keys[0])); err != nil {
			return err
		}
		return errMovedMeanwhile
	}
	return errNoValues
}

// errMovedMeanwhile is answered when the keys' group moved between the
// command's routing and its run, on a node that routes every key
// (--proxy): a forwarder retries it.
var errMovedMeanwhile = errors.New("TRYAGAIN the keys' slot moved while the command waited; try again")

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
	case values.Set:
		c.writeSet(len(r.Elems))
		for _, e := range r.Elems {
			c.writeReply(e)
		}
	case values.Bool:
		c.writeBool(r)
	case values.BigNumber:
		c.writeTyped('(', r.Str)
	case values.Verbatim:
		c.writeVerbatimReply(r.Str)
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

// writeBool writes a RESP3 boolean (an integer in RESP2).
func (c *conn) writeBool(r values.Reply) {
	if c.proto != 3 {
		c.writeInt(r.Int)
		return
	}
	if r.Int != 0 {
		c.out = append(c.out, "#t\r\n"...)
	} else {
		c.out = append(c.out, "#f\r\n"...)
	}
}

// writeTyped writes a RESP3 simple type (big number) whose text is b (a
// bulk string in RESP2).
func (c *conn) writeTyped(kind byte, b []byte) {
	if c.proto != 3 {
		c.writeBulk(b)
		return
	}
	c.out = append(c.out, kind)
	c.out = append(c.out, b...)
	c.out = append(c.out, '\r', '\n')
}

// writeVerbatimReply writes a RESP3 verbatim string, b being "fmt:text"
// (the text alone as a bulk string in RESP2).
func (c *conn) writeVerbatimReply(b []byte) {
	if c.proto != 3 {
		if len(b) >= 4 {
			b = b[4:]
		}
		c.writeBulk(b)
		return
	}
	c.out = append(c.out, '=')
	c.out = strconv.AppendInt(c.out, int64(len(b)), 10)
	c.out = append(c.out, '\r', '\n')
	c.out = append(c.out, b...)
	c.out = append(c.out, '\r', '\n')
}
