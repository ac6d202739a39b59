package script

import (
	"bytes"
	"strings"

	"github.com/rlserver/rlserver/values"
)

// ScriptFlags are the flags a script declares on its shebang line,
// "#!lua flags=no-writes,allow-oom".
type ScriptFlags uint8

// The flags of Redis 7.0.
const (
	// FlagShebang marks a script with a shebang line: its flags replace
	// EVAL's compatibility mode.
	FlagShebang ScriptFlags = 1 << iota
	FlagNoWrites
	FlagAllowOOM
	FlagAllowStale
	FlagNoCluster
	FlagAllowCrossSlot
)

var flagNames = map[string]ScriptFlags{
	"no-writes": FlagNoWrites, "allow-oom": FlagAllowOOM, "allow-stale": FlagAllowStale,
	"no-cluster": FlagNoCluster, "allow-cross-slot-keys": FlagAllowCrossSlot,
}

// Errors of Eval, as Redis 7.0 words them.
var (
	replyNoScript = []byte("NOSCRIPT No matching script. Please use EVAL.")
	replyROWrite  = []byte("ERR Can not execute a script with write flag using *_ro command.")
	compilePrefix = "ERR Error compiling script (new function): "
)

// Script resolves req to its compiled script: the body of an EVAL
// (compiled and cached on first sight), or the cached script of an
// EVALSHA. It returns the error reply Redis gives otherwise: NOSCRIPT, a
// compile error, a bad shebang. The server may call it before taking the
// locks of the run, so that compiling holds none.
func (e *Engine) Script(req *Request) (*Script, *values.Reply) {
	if req.Body != nil {
		return e.cache.load(req.Body)
	}
	s, ok := e.cache.get(req.SHA)
	if !ok {
		r := errorReply(replyNoScript)
		return nil, &r
	}
	return s, nil
}

// Eval runs req (EVAL, EVALSHA and their _RO forms) with c as the bridge
// to the keyspace, and returns the script's reply or the error Redis would
// give. It runs on the calling goroutine; the caller holds what makes the
// run atomic.
func (e *Engine) Eval(req Request, c Caller) values.Reply {
	s, errReply := e.Script(&req)
	if errReply != nil {
		return *errReply
	}
	return e.Run(s, req, c)
}

// Run runs script s for req, through the native handler registered for its
// sha if there is one, else the interpreter.
func (e *Engine) Run(s *Script, req Request, c Caller) values.Reply {
	if req.ReadOnly && s.flags&FlagShebang != 0 && s.flags&FlagNoWrites == 0 {
		return errorReply(replyROWrite)
	}
	resp := req.RESP
	if resp != 3 {
		resp = 2
	}
	x, _ := e.execs.Get().(*Exec)
	if x == nil {
		x = new(Exec)
	}
	x.SHA, x.Keys, x.Args, x.RESP, x.caller, x.resp = s.sha, req.Keys, req.Args, resp, c, 2
	x.cc, _ = c.(CommandCaller)
	x.arena, _ = c.(ReplyArena)
	x.clock, _ = c.(Clock)
	x.readOnly = req.ReadOnly || s.flags&FlagNoWrites != 0
	x.rec.tag, x.rec.sha, x.rec.busy = req.Tag, s.sha, false
	x.rec.state.Store(runClean)
	x.run, x.script, x.declined, x.native, x.onLong = &x.rec, s, false, req.NativeOnly, req.OnLong
	var reply values.Reply
	if n := s.native(); n != nil {
		reply = n.r.Run(x)
		if !x.declined {
			n.runs.Add(1)
		}
	} else if req.NativeOnly {
		reply = Declined
	} else {
		e.interpreted.Add(1)
		x.rec.start = e.cfg.Now() // the time limit's start: a native run, which has none, does not read the clock
		reply = s.Run(x)
	}
	x.Keys, x.Args, x.caller, x.run, x.rec.tag, x.script = nil, nil, nil, nil, nil, nil
	x.cc, x.arena, x.clock, x.onLong = nil, nil, nil, nil
	e.execs.Put(x)
	return reply
}

// compile compiles a body (after its shebang line, whose newline it keeps
// so that line numbers stay).
func (e *Engine) compile(sha string, body []byte) (*Script, *values.Reply) {
	flags, n, msg := shebang(body)
	if msg != "" {
		r := errorReply([]byte("ERR " + msg))
		return nil, &r
	}
	proto, msg := compileChunk(body[n:], "@"+userScript, e.maxTokens())
	if proto == nil {
		r := errorReply(oneLine([]byte(compilePrefix + msg)))
		return nil, &r
	}
	return &Script{sha: sha, proto: proto, flags: flags, every: everyKey.Match(body), e: e}, nil
}

// shebang parses a "#!lua flags=..." first line: the flags, the length of
// the line (without its newline), or Redis's error message.
func shebang(body []byte) (ScriptFlags, int, string) {
	if !bytes.HasPrefix(body, []byte("#!")) {
		return 0, 0, ""
	}
	end := bytes.IndexByte(body, '\n')
	if end < 0 {
		return 0, 0, "Invalid script shebang"
	}
	parts, ok := splitArgs(string(body[:end]))
	if !ok || len(parts) == 0 {
		return 0, 0, "Invalid engine in script shebang"
	}
	if parts[0] != "#!lua" {
		return 0, 0, "Unexpected engine in script shebang: " + parts[0]
	}
	flags := FlagShebang
	for _, p := range parts[1:] {
		list, ok := strings.CutPrefix(p, "flags=")
		if !ok {
			return 0, 0, "Unknown lua shebang option: " + p
		}
		if list == "" {
			continue
		}
		for _, name := range strings.Split(list, ",") {
			f, ok := flagNames[name]
			if !ok {
				return 0, 0, "Unexpected flag in script shebang: " + name
			}
			flags |= f
		}
	}
	return flags, end, ""
}

// maxTokens is how many tokens a chunk may have: compiling it must fit in
// the memory limit.
func (e *Engine) maxTokens() int { return int(e.cfg.MemoryLimit / bytesPerToken) }
