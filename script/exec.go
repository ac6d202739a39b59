package script

import (
	"bytes"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/values"
)

// Exec is one run of a script as its Runner sees it: the keys and
// arguments, and Call, the bridge to the keyspace that redis.call and
// redis.pcall use. It is valid only during Runner.Run, on the run's
// goroutine.
type Exec struct {
	// SHA is the lower-case hex sha1 of the script body.
	SHA string
	// Keys and Args are KEYS and ARGV. They belong to the caller of Eval:
	// a Runner must not keep them after Run returns.
	Keys, Args [][]byte
	// RESP is the protocol of the connection that asked: 2 or 3.
	RESP int

	caller   Caller
	cc       CommandCaller // caller, when it is one (and the next two alike): asked once a run
	arena    ReplyArena
	clock    Clock
	readOnly bool
	resp     int // the script client's protocol: 2 until redis.setresp(3)
	run      *run
	rec      run      // what run points to during Engine.Run
	argv     [][]byte // Argv's buffer
	scratch  []byte   // Scratch's buffer
	script   *Script  // the compiled body: Interpret runs it
	declined bool     // a native handler handed the run to Interpret
	native   bool     // Request.NativeOnly: Interpret declines the run
	onLong   func()   // Request.OnLong
}

// Interpret runs the script's body in the interpreter for this run and
// returns its reply: a native handler calls it, before it has changed
// anything, for the inputs it does not take on itself (arguments that are
// not plain numbers, a value of another type, a command's error), so that
// the script's own path answers them, errors and all. Stats counts the run
// as interpreted.
//
// For a Request.NativeOnly run it runs nothing and returns Declined,
// which the handler returns.
func (x *Exec) Interpret() values.Reply {
	x.declined = true
	if x.native {
		return Declined
	}
	x.script.e.interpreted.Add(1)
	x.run.start = x.script.e.cfg.Now()
	return x.script.Run(x)
}

// BoolReply is the reply of a script that returns the Lua boolean b: 1 or
// a null in a RESP2 script, a boolean in a RESP3 one (redis.setresp(3)),
// shaped for the connection's protocol.
func (x *Exec) BoolReply(b bool) values.Reply {
	n := int64(0)
	if b {
		n = 1
	}
	switch {
	case x.resp == 2 && b:
		return values.Reply{Kind: values.Int, Int: 1}
	case x.resp == 2:
		return values.Reply{Kind: values.Nil}
	case x.RESP == 3:
		return values.Reply{Kind: KindBool, Int: n}
	}
	return values.Reply{Kind: values.Int, Int: n}
}

// Clock is a Caller that knows the run's time without a TIME call: the
// seconds and microseconds TIME would answer. Exec.Time uses it when the
// Caller has it.
type Clock interface {
	Time() (sec, usec int64)
}

// Time returns what redis.call('TIME') would answer the run, as numbers:
// from the Caller's Clock if it has one, else by calling TIME. ok is false
// when TIME failed or answered something else than two integers.
func (x *Exec) Time() (sec, usec int64, ok bool) {
	if c := x.clock; c != nil {
		sec, usec = c.Time()
		return sec, usec, true
	}
	r := x.Call(x.Argv(cmdTime))
	if r.Kind != values.Array || len(r.Elems) != 2 {
		return 0, 0, false
	}
	var n [2]int64
	for i, el := range r.Elems {
		switch el.Kind {
		case values.Int:
			n[i] = el.Int
		case values.Bulk:
			v, err := strconv.ParseInt(string(el.Str), 10, 64)
			if err != nil {
				return 0, 0, false
			}
			n[i] = v
		default:
			return 0, 0, false
		}
	}
	return n[0], n[1], true
}

var cmdTime = []byte("TIME")

// Argv returns parts as a command's arguments in a buffer of x's, reused
// by the next Argv: a Runner builds its calls without allocating.
func (x *Exec) Argv(parts ...[]byte) [][]byte {
	x.argv = append(x.argv[:0], parts...)
	return x.argv
}

// ReplyArena is a Caller that lends a run the memory of its reply, so that
// a native handler's reply allocates nothing: the memory must stay valid
// until the server has written the reply, and be the run's alone. Exec's
// Elems and Bytes use it when the Caller has it.
type ReplyArena interface {
	// ReplyElems returns n zeroed elements for the reply's arrays.
	ReplyElems(n int) []values.Reply
	// ReplyBytes returns an empty buffer with room for n bytes, for the
	// reply's strings; what is appended to it must stay within n.
	ReplyBytes(n int) []byte
}

// Elems returns n zeroed reply elements for the run's reply: lent by the
// Caller when it is a ReplyArena, else allocated.
func (x *Exec) Elems(n int) []values.Reply {
	if a := x.arena; a != nil {
		return a.ReplyElems(n)
	}
	return make([]values.Reply, n)
}

// Bytes returns an empty buffer with room for n bytes for the strings of
// the run's reply: lent by the Caller when it is a ReplyArena, else
// allocated.
func (x *Exec) Bytes(n int) []byte {
	if a := x.arena; a != nil {
		return a.ReplyBytes(n)
	}
	return make([]byte, 0, n)
}

// Scratch returns a buffer of x's, emptied, to build a run's command
// arguments in (numbers formatted with AppendArg): it is reused by the next
// run, so nothing built in it may be part of the run's reply. A handler
// that needs more room appends to it and may hand the grown buffer back
// with KeepScratch.
func (x *Exec) Scratch() []byte { return x.scratch[:0] }

// KeepScratch keeps b, grown from Scratch, as x's buffer for later runs.
func (x *Exec) KeepScratch(b []byte) {
	if cap(b) > cap(x.scratch) && cap(b) <= 1<<16 {
		x.scratch = b[:0]
	}
}

// Run states: a run is clean until it writes or is killed, whichever comes
// first; a dirty run cannot be killed and a killed run cannot write.
const (
	runClean int32 = iota
	runDirty
	runKilled
)

// run is the engine's record of one Eval in progress, shared between the
// run's goroutine and Kill.
type run struct {
	tag   any
	sha   string
	start time.Duration // Config.Now when the run began
	state atomic.Int32  // runClean, runDirty or runKilled
	busy  bool          // in Engine.busy; guarded by Engine.mu
}

// Errors a script sees from the bridge, worded as Redis 7.0 words them.
var (
	errNoArgs      = []byte("ERR Please specify at least one argument for this redis lib call")
	errUnknownCmd  = []byte("ERR Unknown Redis command called from script")
	errArity       = []byte("ERR Wrong number of args calling Redis command from script")
	errNoScript    = []byte("ERR This Redis command is not allowed from script")
	errWriteInRO   = []byte("ERR Write commands are not allowed from read-only scripts.")
	errKilledCall  = []byte("ERR Script killed by user with SCRIPT KILL...")
	errBadArgTypes = []byte("ERR Lua redis lib command arguments must be strings or integers")
)

// Call runs a command for the script, as redis.pcall does: it refuses an
// unknown command, a wrong number of arguments, a command not allowed from
// scripts and, in a read-only run, a write command, with the errors Redis
// gives; otherwise it runs the command through the Caller. Errors come back
// as values.Error replies whose text is what the script would see ("ERR
// Unknown Redis command called from script", "WRONGTYPE Operation against a
// key holding the wrong kind of value"). args[0] is the command name; Call
// does not keep args. The reply is valid until the next Call.
func (x *Exec) Call(args [][]byte) values.Reply {
	if len(args) == 0 {
		return errorReply(errNoArgs)
	}
	if x.run != nil && x.run.state.Load() == runKilled {
		return errorReply(errKilledCall)
	}
	cmd, ok := x.caller.Command(args[0])
	if !ok {
		return errorReply(errUnknownCmd)
	}
	if msg := x.refuse(cmd.Arity, cmd.Flags, len(args)); msg != nil {
		return errorReply(msg)
	}
	return scriptError(x.caller.Call(args, x.resp))
}

// refuse returns the error Call answers a command of arity and flags
// called with n arguments (its name included), nil if the run may call it;
// a write marks the run dirty.
func (x *Exec) refuse(arity int, flags values.Flags, n int) []byte {
	if (arity > 0 && arity != n) || n < -arity {
		return errArity
	}
	if flags&values.NoScript != 0 {
		return errNoScript
	}
	if flags&values.Write != 0 {
		if x.readOnly {
			return errWriteInRO
		}
		if x.run != nil && !x.run.state.CompareAndSwap(runClean, runDirty) && x.run.state.Load() == runKilled {
			return errKilledCall
		}
	}
	return nil
}

// CommandCaller is a Caller whose commands are those of package values
// (Command(name) describes *values.Lookup(name)) and that runs one given
// resolved: Exec.CallCommand uses it when the Caller has it.
type CommandCaller interface {
	// CallCommand is Call(args, resp) for cmd, which is
	// values.Lookup(args[0]).
	CallCommand(cmd *values.Command, args [][]byte, resp int) values.Reply
}

// CallCommand is Call for a command of package values that a native
// handler looked up once (cmd is values.Lookup(args[0])): the same checks,
// reply and effects, without finding the command by its name on every
// call when the Caller is a CommandCaller.
func (x *Exec) CallCommand(cmd *values.Command, args [][]byte) values.Reply {
	cc := x.cc
	if cc == nil || len(args) == 0 {
		return x.Call(args)
	}
	if x.run != nil && x.run.state.Load() == runKilled {
		return errorReply(errKilledCall)
	}
	if msg := x.refuse(cmd.Arity, cmd.Flags, len(args)); msg != nil {
		return errorReply(msg)
	}
	return scriptError(cc.CallCommand(cmd, args, x.resp))
}

// SetRESP sets the protocol of the script's client, as redis.setresp does:
// the shapes of the replies Call returns, and of booleans in the script's
// result. It reports false for a version other than 2 or 3.
func (x *Exec) SetRESP(resp int) bool {
	if resp != 2 && resp != 3 {
		return false
	}
	x.resp = resp
	return true
}

// Dirty reports whether the run has called a write command: SCRIPT KILL
// can no longer stop it.
func (x *Exec) Dirty() bool { return x.run != nil && x.run.state.Load() == runDirty }

// Fail returns the reply of a script that stops on error reply err (as
// redis.call raises it) at line of the script body: "<err> script: <sha>,
// on @user_script:<line>.", which is what Redis answers.
func (x *Exec) Fail(err values.Reply, line int) values.Reply {
	msg := err.Str
	if err.Kind != values.Error {
		msg = []byte("ERR unknown error")
	}
	return errorReply(appendWhere(append([]byte(nil), msg...), x.SHA, "@user_script", strconv.Itoa(line)))
}

// appendWhere appends " script: <sha>, on <source>:<line>." to msg.
func appendWhere(msg []byte, sha, source, line string) []byte {
	msg = append(msg, " script: "...)
	msg = append(msg, sha...)
	msg = append(msg, ", on "...)
	msg = append(msg, source...)
	msg = append(msg, ':')
	msg = append(msg, line...)
	return append(msg, '.')
}

// scriptError shapes an error reply of a command as a script sees it:
// Redis puts the reply's "-CODE msg" back together as "CODE msg" (with ERR
// as the code of a message of one word) and trims line breaks at its ends.
func scriptError(r values.Reply) values.Reply {
	if r.Kind != values.Error {
		return r
	}
	return errorReply(errorText(r.Str))
}

// errorText is luaPushErrorBuff's shaping of "-" + s.
func errorText(s []byte) []byte {
	code, msg := []byte("ERR"), s
	if i := bytes.IndexByte(s, ' '); i >= 0 {
		code, msg = s[:i], s[i+1:]
	}
	msg = bytes.Trim(msg, "\r\n")
	out := make([]byte, 0, len(code)+1+len(msg))
	out = append(out, code...)
	out = append(out, ' ')
	return append(out, msg...)
}

func errorReply(msg []byte) values.Reply { return values.Reply{Kind: values.Error, Str: msg} }
