package server

import (
	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/shards"
	"github.com/rlserver/rlserver/values"
)

// Transactor is implemented by a Limiter that can run a group of commands
// with no other client's command on their keys in between (shards.Store
// does): EXEC uses it. With a Limiter that lacks it, EXEC runs its
// commands one after another, as a pipeline.
type Transactor interface {
	// Transact locks what plan names, calls run with a view of the state
	// on which the commands run, and unlocks (see shards.Store.Transact).
	// It may call run with a nil Tx (a cluster node that no longer serves
	// the keys): the commands then run one by one as outside MULTI.
	// It returns shards.ErrBusy, without calling run, if a shard plan
	// names is held by a script past its time limit.
	Transact(plan shards.TxPlan, run func(tx *shards.Tx)) error
}

// multiState is a connection's transaction, from MULTI to EXEC or DISCARD.
type multiState struct {
	queue   [][][]byte     // the queued requests, copied
	queries []*rules.Query // the queued RL.CHECKRULES, parsed, to plan the locks
	dirty   bool           // a queued command did not parse: EXEC aborts
}

func multiCommands() []*command {
	flags := []string{"noscript", "loading", "stale", "fast", "allow_busy"}
	return []*command{
		{name: "multi", arity: 1, flags: flags, group: "transactions", complexity: "O(1)",
			summary: "Start a transaction: queue the commands that follow until EXEC", handler: cmdMulti},
		{name: "exec", arity: 1, flags: []string{"noscript", "loading", "stale", "skip_slowlog"}, group: "transactions",
			complexity: "the sum of the queued commands'",
			summary:    "Run the queued commands with their keys locked, no other client's command in between", handler: cmdExec},
		{name: "discard", arity: 1, flags: flags, group: "transactions", complexity: "O(queued commands)",
			summary: "Drop the queued commands", handler: cmdDiscard},
		{name: "watch", arity: -2, flags: flags, group: "transactions", complexity: "O(1)",
			summary: "Not supported: EXEC locks its keys, so there is nothing to watch",
			args:    []argDoc{{name: "key", typ: "key", multiple: true}}, handler: cmdWatch},
		{name: "unwatch", arity: 1, flags: flags, group: "transactions", complexity: "O(1)",
			summary: "Forget watched keys (there are none): OK", handler: cmdUnwatch},
	}
}

// runsInMulti reports whether cmd runs at once between MULTI and EXEC
// instead of being queued, as in Redis.
func runsInMulti(cmd *command) bool {
	switch cmd.name {
	case "multi", "exec", "discard", "watch", "quit", "reset":
		return true
	}
	return false
}

// arityOK reports whether n arguments (the name included) suit cmd.
func (cmd *command) arityOK(n int) bool {
	return (cmd.arity <= 0 || n == cmd.arity) && (cmd.arity >= 0 || n >= -cmd.arity)
}

// MULTI
func cmdMulti(s *Server, c *conn, args [][]byte, now int64) {
	if c.multi != nil {
		c.writeError("ERR MULTI calls can not be nested")
		return
	}
	c.multi = &multiState{}
	c.queued.Store(1)
	c.writeOK()
}

// DISCARD
func cmdDiscard(s *Server, c *conn, args [][]byte, now int64) {
	if c.multi == nil {
		c.writeError("ERR DISCARD without MULTI")
		return
	}
	c.endMulti()
	c.writeOK()
}

// WATCH key [key ...]
func cmdWatch(s *Server, c *conn, args [][]byte, now int64) {
	if c.multi != nil {
		c.writeError("ERR WATCH inside MULTI is not allowed")
		return
	}
	c.writeError("ERR WATCH is not supported: rlserver runs EXEC's commands with their keys locked, " +
		"so there is nothing to watch; send MULTI ... EXEC without WATCH")
}

// UNWATCH
func cmdUnwatch(s *Server, c *conn, args [][]byte, now int64) { c.writeOK() }

// queue queues a command sent between MULTI and EXEC and answers QUEUED,
// or answers why it does not parse and marks the transaction to abort. It
// returns false for the commands that run at once (runsInMulti).
func (s *Server) queue(c *conn, cmd *command, args [][]byte) bool {
	if cmd != nil && runsInMulti(cmd) {
		return false
	}
	if cmd != nil && c.authed && cmd.arityOK(len(args)) && s.route(c, cmd, args) == errHeld {
		return true // held while its slot moves: queued once it settles
	}
	args = copyArgs(args) // the reader's buffer is reused by the next batch
	var q *rules.Query
	msg := s.queueError(c, cmd, args, &q)
	if msg != "" {
		c.multi.dirty = true
		c.writeError(msg)
		return true
	}
	m := c.multi
	m.queue = append(m.queue, args)
	if q != nil {
		m.queries = append(m.queries, q)
	}
	c.queued.Store(int32(len(m.queue)) + 1)
	c.writeStatus("QUEUED")
	return true
}

// queueError returns the error reply of a command that cannot be queued:
// unknown, not allowed before AUTH, of the wrong arity, whose key this
// cluster node does not serve, or whose arguments do not parse. A valid
// RL.CHECKRULES is parsed into *q.
func (s *Server) queueError(c *conn, cmd *command, args [][]byte, q **rules.Query) string {
	switch {
	case cmd == nil:
		return unknownCommand(args)
	case !c.authed && !cmd.noAuth:
		return "NOAUTH Authentication required."
	case !cmd.arityOK(len(args)):
		return arityError(cmd)
	}
	// In a cluster, a key of a slot this node does not serve is refused
	// now, as Redis Cluster does; that its keys share one slot with the
	// other queued commands' is checked by EXEC (see execRoute).
	if err := s.route(c, cmd, args); err != nil {
		return replyError(err)
	}
	var msg string
	switch cmd.name {
	case "rl.check", "rl.peek":
		_, msg = s.parseCheck(args, cmd.name == "rl.check")
	case "rl.reset":
		msg = s.checkKey(args[1])
	case "cl.throttle":
		_, msg = s.parseThrottle(args)
	case "rl.checkrules":
		*q = s.query()
		if msg = s.parseCheckRules(args, *q); msg != "" {
			s.releaseQuery(*q)
			*q = nil
		}
	case "rl.rule.set":
		if _, err := s.parseRule(args); err != nil {
			msg = replyError(err)
		}
	}
	return msg
}

// copyArgs returns a copy of args in one new buffer.
func copyArgs(args [][]byte) [][]byte {
	n := 0
	for _, a := range args {
		n += len(a)
	}
	buf := make([]byte, 0, n)
	out := make([][]byte, len(args))
	for i, a := range args {
		buf = append(buf, a...)
		out[i] = buf[len(buf)-len(a) : len(buf) : len(buf)]
	}
	return out
}

// endMulti leaves the transaction, if any, without running it.
func (c *conn) endMulti() {
	if c.multi != nil {
		c.multi.release(c.s)
		c.multi = nil
		c.queued.Store(0)
	}
}

// release returns the queued queries to the pool.
func (m *multiState) release(s *Server) {
	for _, q := range m.queries {
		s.releaseQuery(q)
	}
	m.queries = nil
}

// EXEC
//
// Runs the queued commands and replies with an array of their replies; in
// a cluster, answers CROSSSLOT instead when their keys are in more than one
// slot, as Redis Cluster does (see execRoute). Their keys (and the
// counters of queued RL.CHECKRULES) are locked for the whole run, so no
// other client's command on them comes in between.
func cmdExec(s *Server, c *conn, args [][]byte, now int64) {
	m := c.multi
	if m == nil {
		c.writeError("ERR EXEC without MULTI")
		return
	}
	// As in Redis Cluster, keys in more than one slot, or a slot this
	// node no longer serves, discard the transaction before anything else;
	// while the slot moves, EXEC is held with its queue.
	rerr := s.execRoute(c, m.queue)
	if rerr == errHeld {
		return
	}
	c.multi = nil // the queued commands run as they would outside MULTI
	defer func() {
		c.queued.Store(0)
		m.release(s)
	}()
	if rerr != nil {
		c.writeErr(rerr)
		return
	}
	if m.dirty {
		c.writeError("EXECABORT Transaction discarded because of previous errors.")
		return
	}
	plan, touches := s.plan(m)
	t, ok := s.cfg.Limiter.(Transactor)
	if !ok || !touches {
		c.writeArray(len(m.queue))
		s.runQueue(c, m.queue, now)
		return
	}
	err := t.Transact(plan, func(tx *shards.Tx) {
		c.writeArray(len(m.queue))
		c.tx = tx
		defer func() { c.tx = nil }()
		s.runQueue(c, m.queue, now)
	})
	if err != nil { // BUSY: nothing ran
		c.writeErr(err)
	}
}

// runQueue runs EXEC's queue. The replies go inside EXEC's array, which
// counts as one reply of the batch (see replaceReplies).
//
// A queued command is never held or nudged (see dispatchTop): EXEC has
// taken the queue, so it cannot run again.
func (s *Server) runQueue(c *conn, queue [][][]byte, now int64) {
	n, mayHold := c.nreplies, c.mayHold
	c.mayHold = false
	for _, args := range queue {
		s.dispatch(c, args, now)
	}
	c.nreplies, c.mayHold = n, mayHold
}

// plan returns what the queued commands lock, and false if they touch no
// limiter state.
func (s *Server) plan(m *multiState) (shards.TxPlan, bool) {
	var p shards.TxPlan
	touches, writesRules := false, false
	for _, args := range m.queue {
		switch s.lookup(args[0]).name {
		case "rl.check", "rl.peek", "rl.reset", "cl.throttle":
			p.Keys = append(p.Keys, args[1])
			touches = true
		case "rl.rule.set", "rl.rule.del":
			writesRules, touches = true, true
		case "flushall", "dbsize", "info":
			p.All, touches = true, true
		default:
			if cmd := s.lookup(args[0]); cmd.value != nil {
				p.Keys, touches = cmd.keysOf(args, p.Keys), true
				p.All = p.All || cmd.value.Flags&values.AllKeys != 0
			} else if cmd.numKeysAt > 0 { // EVAL: its keys, or every key
				keys := cmd.keysOf(args, nil)
				p.Keys, touches = append(p.Keys, keys...), true
				p.All = p.All || len(keys) == 0 || s.seesEveryKey(args)
			}
		}
	}
	if s.txRules && len(m.queries) > 0 {
		p.Queries, touches = m.queries, true
		// A rule changed in the transaction may give a later check
		// counters that cannot be known before it runs.
		p.All = p.All || writesRules
	}
	return p, touches
}

// limiter returns the Limiter c's commands run against: the server's, or
// while EXEC runs, its transaction.
func (c *conn) limiter() Limiter {
	if c.tx != nil {
		return c.tx
	}
	return c.s.cfg.Limiter
}

// ruleStore returns the RuleStore c's commands use: the server's, or while
// EXEC runs, its transaction when the rules live in the Limiter.
func (c *conn) ruleStore() RuleStore {
	if c.tx != nil && c.s.txRules {
		return c.tx
	}
	return c.s.cfg.Rules
}
