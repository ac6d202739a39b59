package server

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/rlserver/rlserver/script"
	"github.com/rlserver/rlserver/shards"
	"github.com/rlserver/rlserver/slots"
	"github.com/rlserver/rlserver/values"
)

// Scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT, handed over to
// package script. A run is atomic as a transaction is: its KEYS' shards
// are locked for the whole run (every shard, for a script with no keys on
// a single node, or one that names KEYS, SCAN or DBSIZE), and the
// commands it calls run on that keyspace (scriptCaller), at one time, the
// run's. What it writes goes through the store's journal like any
// change, so it is durable and replicated as limiter state is.

func scriptCommands() []*command {
	evalArgs := []argDoc{{name: "script", typ: "string"}, {name: "numkeys", typ: "integer"},
		{name: "key", typ: "key", optional: true, multiple: true}, {name: "arg", typ: "string", optional: true, multiple: true}}
	shaArgs := append([]argDoc{{name: "sha1", typ: "string"}}, evalArgs[1:]...)
	flags := []string{"noscript", "stale", "skip_monitor", "may_replicate", "no_mandatory_keys", "movablekeys"}
	roFlags := []string{"noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys", "readonly"}
	eval := func(name string, fl []string, args []argDoc, summary string) *command {
		return &command{name: name, arity: -3, flags: fl, numKeysAt: 2, group: "scripting",
			complexity: "Depends on the script that is executed.", summary: summary, args: args, handler: cmdEval}
	}
	return []*command{
		eval("eval", flags, evalArgs, "Execute a Lua script server side"),
		eval("evalsha", flags, shaArgs, "Execute a Lua script server side"),
		eval("eval_ro", roFlags, evalArgs, "Execute a read-only Lua script server side"),
		eval("evalsha_ro", roFlags, shaArgs, "Execute a read-only Lua script server side"),
		{name: "script", arity: -2, flags: []string{"noscript"}, group: "scripting",
			complexity: "Depends on subcommand.", summary: "SCRIPT LOAD | EXISTS | FLUSH | KILL | HELP",
			args: []argDoc{{name: "subcommand", typ: "string"}}, handler: cmdScript,
			subs: []string{"exists", "flush", "help", "kill", "load"}},
	}
}

// EVAL script numkeys [key ...] [arg ...]
// EVALSHA sha1 numkeys [key ...] [arg ...]
// EVAL_RO script numkeys [key ...] [arg ...]
// EVALSHA_RO sha1 numkeys [key ...] [arg ...]
func cmdEval(s *Server, c *conn, args [][]byte, now int64) {
	er := s.getEvalRun(true)
	defer s.putEvalRun(er) // after the reply, which may be in er's arena, is written
	if c.lp != nil && c.tx == nil {
		// On an event loop (scriptOnLoop): a native handler runs as a
		// command does; an interpreted run hands the loop over should it go
		// on for long (loop.takeOver).
		if c.onLong == nil {
			c.onLong = c.takeOver
		}
		er.onLoop, er.onLong = true, c.onLong
	}
	r, err := s.evalInto(er, c.tx, c.proto, args, now)
	if er.nativeOnly && err == nil && script.IsDeclined(r) {
		// Its handler hands this run to the interpreter, before it changed
		// anything: it runs again, interpreted.
		er.declined = true
		r, err = s.evalInto(er, c.tx, c.proto, args, now)
	}
	if errors.Is(err, shards.ErrWouldWait) {
		// A script holds a shard of its keys, maybe for long: it runs
		// again off the loop (dispatchTop), where it may wait.
		c.wouldWait = true
		return
	}
	if err != nil && c.tx == nil && s.proxying() && !errors.Is(err, shards.ErrBusy) {
		if keys := s.lookup(args[0]).keysOf(args, nil); len(keys) > 0 {
			r, err = s.forwardExec(keys[0], args, c.proto, now)
		}
	}
	if err != nil {
		c.writeErr(err)
		return
	}
	c.writeReply(r)
}

// SCRIPT LOAD script | EXISTS sha1 [sha1 ...] | FLUSH [ASYNC|SYNC] | KILL | HELP
func cmdScript(s *Server, c *conn, args [][]byte, now int64) {
	c.writeReply(s.scripts.ScriptCommand(args))
}

// evalRun is the state of one EVAL-family command, pooled so that a run
// allocates nothing of its own: the request, the keyspace and the
// caller the script sees, the function Transact calls (bound once), and,
// for cmdEval, an arena for the reply of a native handler (script.ReplyArena),
// which is valid until the run goes back to the pool.
type evalRun struct {
	s      *Server
	req    script.Request
	sc     *script.Script
	every  bool
	now    int64
	reply  values.Reply
	ran    bool
	keys   shards.Keys
	caller scriptCaller
	onTx   func(t *shards.Tx) // er.inTx
	arena  replyArena
	// cmdEval on an event loop (onLoop): a script a native handler runs is
	// run NativeOnly, unless it declined once and runs again; an
	// interpreted one with onLong (script.Request.OnLong).
	onLoop, declined, nativeOnly bool
	onLong                       func()
}

// replyArena is the memory a run lends its reply (script.ReplyArena).
type replyArena struct {
	on     bool // lend it: the reply is written before the run is reused
	elems  [8]values.Reply
	nelems int
	bytes  [128]byte
	nbytes int
}

func (s *Server) getEvalRun(arena bool) *evalRun {
	er, _ := s.evalRuns.Get().(*evalRun)
	if er == nil {
		er = &evalRun{s: s}
		er.onTx = er.inTx
	}
	er.arena.on, er.arena.nelems, er.arena.nbytes = arena, 0, 0
	return er
}

func (s *Server) putEvalRun(er *evalRun) {
	er.req, er.sc, er.reply, er.caller = script.Request{}, nil, values.Reply{}, scriptCaller{}
	er.onLoop, er.declined, er.nativeOnly, er.onLong = false, false, false, nil
	clear(er.arena.elems[:er.arena.nelems])
	s.evalRuns.Put(er)
}

// evalLocal runs an EVAL-family command on this node: in tx (EXEC's
// transaction) if it is set, else in a transaction of its own. The error is
// a routing error of a cluster node that does not serve the keys, or
// shards.ErrBusy.
func (s *Server) evalLocal(tx *shards.Tx, proto int, args [][]byte, now int64) (values.Reply, error) {
	er := s.getEvalRun(false) // the reply outlives the run: no arena
	defer s.putEvalRun(er)
	return s.evalInto(er, tx, proto, args, now)
}

// evalInto is evalLocal with er's state.
func (s *Server) evalInto(er *evalRun, tx *shards.Tx, proto int, args [][]byte, now int64) (values.Reply, error) {
	req, bad := script.ParseEval(args)
	if bad != nil {
		return *bad, nil
	}
	for _, k := range req.Keys {
		if msg := s.checkKey(k); msg != "" {
			return values.ErrorReply(msg), nil
		}
	}
	req.RESP = proto
	sc, bad := s.scripts.Script(&req) // compiled before any lock is taken
	if bad != nil {
		return *bad, nil
	}
	if er.onLoop {
		er.nativeOnly = !er.declined && sc.HasNative()
		if req.NativeOnly = er.nativeOnly; !er.nativeOnly {
			req.OnLong = er.onLong
		}
	}
	er.req, er.sc, er.now, er.ran = req, sc, now, false
	er.every = sc.SeesEveryKey() || len(req.Keys) == 0
	switch t, ok := s.cfg.Limiter.(Transactor); {
	case tx != nil:
		er.run(tx)
	case !ok:
	case s.cl != nil && len(req.Keys) == 0:
		er.run(nil) // a cluster node's keys live in many stores: none for a keyless run
	default:
		// A native-only run is bounded, as a command is: it does not mark
		// its shards as held by a script (see shards.TxPlan).
		plan := shards.TxPlan{Keys: req.Keys, All: er.every, Script: !er.nativeOnly, NoWait: er.onLoop}
		if err := t.Transact(plan, er.onTx); err != nil {
			return values.Reply{}, err
		}
	}
	if !er.ran {
		return values.Reply{}, s.routeAgain(req.Keys)
	}
	return er.reply, nil
}

// inTx is the function Transact calls: it runs the script in t, and not at
// all for a nil t (a cluster node that no longer serves the keys), so that
// the run is routed again (or forwarded) instead of run without its keys.
func (er *evalRun) inTx(t *shards.Tx) {
	if t != nil {
		er.run(t)
	}
}

// run runs the script on t's keyspace (none for a nil t).
func (er *evalRun) run(t *shards.Tx) {
	s, req := er.s, &er.req
	er.caller = scriptCaller{s: s, declared: req.Keys, now: er.now, slot: -1, arena: &er.arena}
	caller := &er.caller
	if s.cl != nil && len(req.Keys) > 0 {
		caller.slot = slots.Of(req.Keys[0]) // the keys share it (route)
	}
	if t != nil {
		k := t.KeysInto(&er.keys, er.now)
		caller.keys, caller.now, caller.all = k, k.Now(), er.every && k.All()
		for _, key := range req.Keys {
			k.Hot(key)
		}
	}
	req.Tag = t
	er.reply = s.scripts.Run(er.sc, *req, caller)
	er.ran = true
}

// onKeys runs fn on the keyspace of keys (every key with all, on a single
// node) and its transaction: tx if it is set (EXEC), else a transaction
// of the Limiter's own (a script's with script: see shards.TxPlan). fn
// gets nil for both when there is no keyspace to give: a cluster node and
// a command with no keys. It reports false when a cluster node no longer
// serves the keys, and shards.ErrBusy if they are held by a script past
// its time limit.
func (s *Server) onKeys(tx *shards.Tx, keys [][]byte, all, script bool, now int64, fn func(k *shards.Keys, tx *shards.Tx)) (bool, error) {
	if tx != nil {
		fn(tx.Keys(now), tx)
		return true, nil
	}
	t, ok := s.cfg.Limiter.(Transactor)
	if !ok {
		return false, nil
	}
	if s.cl != nil && len(keys) == 0 {
		fn(nil, nil) // a cluster node's keys live in many stores: none for a keyless run
		return true, nil
	}
	ran := false
	err := t.Transact(shards.TxPlan{Keys: keys, All: all, Script: script}, func(tx *shards.Tx) {
		if tx != nil {
			fn(tx.Keys(now), tx)
			ran = true
		}
	})
	return ran, err
}

// onBusy is the engine's Config.OnBusy: a run past the time limit marks
// the shards it holds busy, so that the commands that would wait for them
// are answered BUSY (see shards.ErrBusy).
func onBusy(tag any, busy bool) {
	if tx, ok := tag.(*shards.Tx); ok && tx != nil {
		tx.SetBusy(busy)
	}
}

// scriptCaller is a run's bridge to the keyspace (script.Caller): the
// commands of package values on the run's keys, and TIME, at the run's
// time.
type scriptCaller struct {
	s        *Server
	keys     *shards.Keys // nil: the run holds no keyspace
	declared [][]byte     // the run's KEYS
	all      bool         // any key may be used: the run locks every shard
	slot     int          // a cluster node's: the slot of the run's keys, which every key must be in; -1 on a single node
	now      int64        // the run's time, ns since the epoch
	buf      [4][]byte
	arena    *replyArena // lent to the reply when arena.on
}

// ReplyElems lends n reply elements from the run's arena (script.ReplyArena),
// or allocates them when it is not lent or too small.
func (sc *scriptCaller) ReplyElems(n int) []values.Reply {
	if a := sc.arena; a != nil && a.on && a.nelems+n <= len(a.elems) {
		a.nelems += n
		return a.elems[a.nelems-n : a.nelems : a.nelems]
	}
	return make([]values.Reply, n)
}

// ReplyBytes lends a buffer of n bytes from the run's arena, or allocates
// it.
func (sc *scriptCaller) ReplyBytes(n int) []byte {
	if a := sc.arena; a != nil && a.on && a.nbytes+n <= len(a.bytes) {
		a.nbytes += n
		return a.bytes[a.nbytes-n : a.nbytes-n : a.nbytes]
	}
	return make([]byte, 0, n)
}

// Time is the run's time as TIME answers it (script.Clock): a native
// handler reads it without building the reply.
func (sc *scriptCaller) Time() (sec, usec int64) { return sc.now / 1e9, sc.now % 1e9 / 1e3 }

// serverInScripts are the server's own commands a script may call, as
// Redis describes them.
var serverInScripts = map[string]values.Command{
	"time": {Name: "time", Arity: 1, Flags: values.Fast},
	"ping": {Name: "ping", Arity: -1, Flags: values.Fast},
	"echo": {Name: "echo", Arity: 2, Flags: values.Fast},
}

// Command describes the command name for the engine: a command of
// package values, TIME, PING or ECHO; any other command of the server is
// not allowed from scripts.
func (sc *scriptCaller) Command(name []byte) (values.Command, bool) {
	if vc := values.Lookup(name); vc != nil {
		return *vc, true
	}
	if cmd := sc.s.lookup(name); cmd != nil {
		if sv, ok := serverInScripts[cmd.name]; ok {
			return sv, true
		}
		return values.Command{Name: cmd.name, Arity: cmd.arity, Flags: values.NoScript}, true
	}
	return values.Command{}, false
}

// Call runs one command of the script.
func (sc *scriptCaller) Call(args [][]byte, resp int) values.Reply {
	vc := values.Lookup(args[0])
	if vc == nil {
		return sc.serverCall(args)
	}
	return sc.CallCommand(vc, args, resp)
}

// CallCommand runs one command of package values for the script, vc being
// values.Lookup(args[0]) (script.CommandCaller): a native handler's
// commands, looked up once, come here directly.
func (sc *scriptCaller) CallCommand(vc *values.Command, args [][]byte, resp int) values.Reply {
	if vc.FirstKey == 1 && vc.LastKey == 1 && len(args) > 1 && vc.Flags&values.AllKeys == 0 &&
		sc.keys != nil && sc.isDeclared(args[1]) {
		// One key, one of KEYS: evalInto checked it, and it is held.
		return sc.keys.ExecCommand(vc, resp, args)
	}
	var keys [][]byte
	if vc.FirstKey == 1 && vc.LastKey == 1 && len(args) > 1 { // one key, the first argument: the server's command says so too
		keys = append(sc.buf[:0], args[1])
	} else {
		keys = sc.s.lookup(args[0]).keysOf(args, sc.buf[:0])
	}
	for _, k := range keys {
		if msg := sc.s.checkKey(k); msg != "" {
			return values.ErrorReply(msg)
		}
		if !sc.may(k) {
			return values.ErrorReply("ERR Script attempted to access key '" + truncate(k, 128) +
				"' that is not in its KEYS: rlserver locks the keys a script declares; pass every key it uses in KEYS")
		}
	}
	if vc.Flags&values.AllKeys != 0 && !sc.all {
		return values.ErrorReply("ERR this script may not read every key: call it with no KEYS, or name the command in a string literal")
	}
	if sc.keys == nil {
		return values.ErrorReply("ERR this script holds no keys: pass the keys it uses in KEYS")
	}
	return sc.keys.ExecCommand(vc, resp, args)
}

// may reports whether the run may use key.
func (sc *scriptCaller) may(key []byte) bool {
	if sc.keys == nil || sc.slot >= 0 && slots.Of(key) != sc.slot {
		return false
	}
	if sc.all {
		return sc.keys.Holds(key)
	}
	return sc.isDeclared(key)
}

// isDeclared reports whether key is one of the run's KEYS, which
// evalInto checked (checkKey), which share the run's slot on a cluster
// node and whose shards the run holds.
func (sc *scriptCaller) isDeclared(key []byte) bool {
	for _, d := range sc.declared {
		if len(d) == len(key) && (len(d) == 0 || &d[0] == &key[0] || bytes.Equal(d, key)) {
			return true
		}
	}
	return false
}

// serverCall runs TIME, PING or ECHO for a script.
func (sc *scriptCaller) serverCall(args [][]byte) values.Reply {
	switch string(bytes.ToLower(args[0])) {
	case "time":
		return values.ArrayReply(
			values.BulkString(strconv.FormatInt(sc.now/1e9, 10)),
			values.BulkString(strconv.FormatInt(sc.now%1e9/1e3, 10)))
	case "echo":
		return values.BulkReply(append([]byte(nil), args[1]...))
	case "ping":
		if len(args) > 1 {
			return values.BulkReply(append([]byte(nil), args[1]...))
		}
		return values.StatusReply("PONG")
	}
	return values.ErrorReply("ERR This Redis command is not allowed from script")
}

// truncate returns b as a string of at most n bytes.
func truncate(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}

// seesEveryKey reports whether an EVAL-family command runs a script that
// reads every key (script.Script.SeesEveryKey): EXEC then locks every
// shard for it.
func (s *Server) seesEveryKey(args [][]byte) bool {
	req, bad := script.ParseEval(args)
	if bad != nil {
		return false
	}
	sc, bad := s.scripts.Script(&req)
	return bad == nil && sc.SeesEveryKey()
}
