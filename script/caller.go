package script

import (
	"github.com/rlserver/rlserver/values"
)

// Caller is what the engine needs from the server to run the commands a
// script calls (redis.call, redis.pcall, Exec.Call). The server implements
// it over its keyspace for the duration of one run, holding whatever makes
// the run atomic; the engine calls it from the run's goroutine only.
type Caller interface {
	// Command describes the command named name (any case): its arity and
	// flags (values.Write, ReadOnly, DenyOOM, NoScript...). It reports
	// false if there is no such command. The engine checks the arity, the
	// NoScript flag and, in a read-only run, the Write flag before Call.
	Command(name []byte) (values.Command, bool)
	// Call runs a command that Command knows and the engine allowed, for a
	// script client speaking protocol resp (2 until the script calls
	// redis.setresp(3)), and returns its reply, errors as values.Error
	// replies ("WRONGTYPE ...", "ERR ..."). args[0] is the command name;
	// args and the slices in it belong to the engine and may be reused
	// once Call returns: Call copies what it keeps. The returned reply is
	// the engine's until the next Call.
	Call(args [][]byte, resp int) values.Reply
}

// Request is one EVAL, EVALSHA, EVAL_RO or EVALSHA_RO.
type Request struct {
	// Body is the script text (EVAL); nil for EVALSHA.
	Body []byte
	// SHA is the sha1 of the script, in hex of any case (EVALSHA); unused
	// when Body is set.
	SHA []byte
	// Keys and Args are KEYS and ARGV. The engine reads them during Eval
	// and keeps nothing.
	Keys, Args [][]byte
	// ReadOnly marks EVAL_RO and EVALSHA_RO: write commands are refused.
	ReadOnly bool
	// RESP is the protocol of the calling connection: 2 or 3 (0 means 2).
	RESP int
	// Tag is the server's name for this run (for instance the slot or the
	// lock it holds), opaque to the engine: BusyTags and Config.OnBusy
	// give it back while the run is busy.
	Tag any
	// NativeOnly runs the script only if a native handler takes it on
	// itself, which is bounded work: a script without one, or a run its
	// handler would hand to the interpreter (Exec.Interpret, before it has
	// changed anything), is not run, and Run returns Declined. For a
	// caller that must not wait long (a server's event loop), which then
	// runs the request again elsewhere without it.
	NativeOnly bool
	// OnLong, if set, is called once, from the run's goroutine, when an
	// interpreted run has gone on for Config.LongRun: a caller that must not
	// wait long (a server's event loop) hands its other work to another
	// goroutine then, and the run goes on.
	OnLong func()
}

// Declined is what Run returns for a NativeOnly request that it did not
// run. Test it with IsDeclined.
var Declined = values.Reply{Kind: values.Error, Str: []byte("ERR script declined: it needs the interpreter")}

// IsDeclined reports whether r is Declined (the same reply, not an equal
// one).
func IsDeclined(r values.Reply) bool {
	return r.Kind == values.Error && len(r.Str) > 0 && &r.Str[0] == &Declined.Str[0]
}

// Runner runs one script. A compiled Lua body and a native handler
// registered for its sha both implement it, and must be interchangeable:
// for the same keyspace, keys and arguments they return the same reply and
// make the same calls. Run is called from one goroutine per run, and
// concurrently for different runs.
type Runner interface {
	Run(x *Exec) values.Reply
}

// RunnerFunc adapts a function to Runner.
type RunnerFunc func(x *Exec) values.Reply

// Run calls f(x).
func (f RunnerFunc) Run(x *Exec) values.Reply { return f(x) }
