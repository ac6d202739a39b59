package values

import "math"

// handler runs one command, its arity checked.
type handler func(c call) Reply

// call is one command being run: its arguments and what it runs against.
type call struct {
	ks   Keyspace
	now  int64 // ns since the epoch
	ms   int64 // now in ms, the clock of Redis's TTL arithmetic
	resp int
	args [][]byte
	cmd  *Command
}

// Exec runs one command against ks at now (ns since the epoch) and returns
// its reply, shaped for RESP version resp (2 or 3). args holds the name
// and the arguments; Exec does not keep them, nor anything in them.
//
// It answers an unknown command and a wrong number of arguments as Redis
// does, asks ks.Writable before a write command (with grow set for one
// flagged DenyOOM) and answers its error instead of running the command.
// The caller makes the command atomic (it holds the keys' locks) and
// passes the now its Keyspace binds. Exec is deterministic: the same
// keys, now and args give the same reply and the same changes; Redis's
// millisecond clock is now truncated to the millisecond.
//
// The reply may share memory with the values in ks (the bytes of a
// string, of list elements, of members): values never write into bytes
// they have stored, so the reply stays valid after the keys change.
func Exec(ks Keyspace, now int64, resp int, args [][]byte) Reply {
	if len(args) == 0 {
		return ErrorReply("ERR empty command")
	}
	cmd := Lookup(args[0])
	if cmd == nil {
		return unknownCommand(args)
	}
	return ExecCommand(ks, cmd, now, resp, args)
}

// ExecCommand is Exec for a command the caller has looked up already
// (Lookup(args[0]) returned cmd): the same checks, reply and changes,
// without finding the command by its name again. It is for callers that
// resolve their commands once, such as the native script handlers.
func ExecCommand(ks Keyspace, cmd *Command, now int64, resp int, args [][]byte) Reply {
	if (cmd.Arity > 0 && len(args) != cmd.Arity) || len(args) < -cmd.Arity {
		return arityError(cmd.Name)
	}
	if cmd.Flags&Write != 0 {
		if err := ks.Writable(cmd.Flags&DenyOOM != 0); err != nil {
			return ErrReply(err)
		}
	}
	return cmd.run(call{ks: ks, now: now, ms: floorDiv(now, 1e6), resp: resp, args: args, cmd: cmd})
}

// Lookup returns the command named name (any case), nil if the package
// has none by that name. It does not allocate.
func Lookup(name []byte) *Command {
	if len(name) == 0 || len(name) > maxNameLen {
		return nil
	}
	var buf [maxNameLen]byte
	for i, c := range name {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	if buf[0] < 'a' || buf[0] > 'z' {
		return nil
	}
	for _, c := range byName[len(name)][buf[0]-'a'] {
		if c.Name == string(buf[:len(name)]) {
			return c
		}
	}
	return nil
}

// Commands returns every command of the package, sorted by name, for
// COMMAND and COMMAND DOCS. The caller must not change them.
func Commands() []*Command { return commandTable }

// maxNameLen is the longest command name.
const maxNameLen = 16

// byName indexes commandTable by name's length and first letter, a few
// commands in each slot (faster than a map of strings); it is built once
// and only read.
var byName = indexCommands(commandTable)

func indexCommands(cmds []*Command) *[maxNameLen + 1][26][]*Command {
	var idx [maxNameLen + 1][26][]*Command
	for _, c := range cmds {
		if len(c.Name) > maxNameLen {
			panic("values: command name longer than maxNameLen: " + c.Name)
		}
		slot := &idx[len(c.Name)][c.Name[0]-'a']
		*slot = append(*slot, c)
	}
	return &idx
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// lookup returns what key holds and, if it is something else than a value
// of kind k, the WRONGTYPE reply to answer (ok false). An absent key is
// ok with a nil Value.
func (c call) lookup(key []byte, k Kind) (Entry, bool) {
	e := c.ks.Lookup(key)
	if e.Other != "" || (e.Value != nil && e.Value.kind != k) {
		return e, false
	}
	return e, true
}

// put stores v (changed) under key with the expiry it had.
func (c call) put(key []byte, e Entry, v *Value) { c.ks.Put(key, v, e.Expires) }

// Expiry times. Redis keeps a key's expiry as a time in ms after which the
// key is gone (a key expiring at ms W is still there during W); an
// Entry's Expires is the first ns at which it is gone, (W+1) ms. A W too
// far to fit in ns (past the year 2262) is kept in the Value, with
// Expires at the largest time.

// farExpiry is the Expires of a key whose expiry is kept in its Value.
const farExpiry = math.MaxInt64

// whenMs returns Redis's expiry time (ms) of what e holds, -1 for none.
func whenMs(e Entry) int64 {
	switch {
	case e.Expires == 0:
		return -1
	case e.Expires == farExpiry && e.Value != nil && e.Value.far != 0:
		return e.Value.far
	}
	return floorDiv(e.Expires-1, 1e6)
}

// expiresAt returns the Expires of a key that Redis would make expire
// after ms when, recording a far one in v.
func expiresAt(v *Value, when int64) int64 {
	v.far = 0
	if when >= math.MaxInt64/1_000_000-1 {
		v.far = when
		return farExpiry
	}
	return (when + 1) * 1e6
}

// keepExpiry returns the Expires of a new value v taking over old's
// expiry (KEEPTTL), carrying a far one.
func keepExpiry(old Entry, v *Value) int64 {
	if when := whenMs(old); when >= 0 {
		return expiresAt(v, when)
	}
	return 0
}

// setExpiry stores e's value under key to expire after when (ms), or
// deletes the key if that is not after now, as Redis does.
func (c call) setExpiry(key []byte, v *Value, when int64) {
	if when <= c.ms {
		c.ks.Delete(key)
		return
	}
	c.ks.Put(key, v, expiresAt(v, when))
}
