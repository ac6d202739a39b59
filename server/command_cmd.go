package server

import (
	"os"
	"strings"
)

func processID() int { return os.Getpid() }

// COMMAND [COUNT | LIST | INFO [name ...] | DOCS [name ...] | GETKEYS cmd args...]
func cmdCommand(s *Server, c *conn, args [][]byte, now int64) {
	if len(args) == 1 {
		c.writeArray(len(s.list))
		for _, cmd := range s.list {
			c.writeCommandInfo(cmd)
		}
		return
	}
	sub := args[1]
	switch {
	case equalFold(sub, "COUNT") && len(args) == 2:
		c.writeInt(int64(len(s.list)))
	case equalFold(sub, "LIST"):
		names := make([]string, len(s.list))
		for i, cmd := range s.list {
			names[i] = cmd.name
		}
		c.writeValue(names)
	case equalFold(sub, "INFO"):
		s.commandInfo(c, args[2:])
	case equalFold(sub, "DOCS"):
		s.commandDocs(c, args[2:])
	case equalFold(sub, "GETKEYS") && len(args) > 2:
		s.commandGetKeys(c, args[2:])
	default:
		c.writeError("ERR unknown subcommand " + quote(sub) + ". Try COMMAND COUNT, LIST, INFO, DOCS or GETKEYS.")
	}
}

func (s *Server) commandInfo(c *conn, names [][]byte) {
	if len(names) == 0 {
		c.writeArray(len(s.list))
		for _, cmd := range s.list {
			c.writeCommandInfo(cmd)
		}
		return
	}
	c.writeArray(len(names))
	for _, n := range names {
		if cmd := s.lookup(n); cmd != nil {
			c.writeCommandInfo(cmd)
		} else {
			c.writeNull()
		}
	}
}

// writeCommandInfo writes one command in COMMAND's Redis 7 format: name,
// arity, flags, first key, last key, key step, ACL categories, tips, key
// specifications and subcommands.
func (c *conn) writeCommandInfo(cmd *command) {
	flags := make(set, len(cmd.flags))
	for i, f := range cmd.flags {
		flags[i] = status(f)
	}
	acl := set{status("@" + cmd.group)}
	var specs []any
	if cmd.firstKey > 0 {
		access := "RW"
		if cmd.hasFlag("readonly") {
			access = "RO"
		}
		specs = []any{kv{
			"flags", set{status(access), status("UPDATE")},
			"begin_search", kv{"type", "index", "spec", kv{"index", cmd.firstKey}},
			"find_keys", kv{"type", "range", "spec", kv{"lastkey", 0, "keystep", 1, "limit", 0}},
		}}
	}
	c.writeValue([]any{cmd.name, cmd.arity, flags, cmd.firstKey, cmd.lastKey, cmd.keyStep,
		acl, set{}, append([]any{}, specs...), []any{}})
}

func (cmd *command) hasFlag(f string) bool {
	for _, x := range cmd.flags {
		if x == f {
			return true
		}
	}
	return false
}

// commandDocs answers COMMAND DOCS: a map from command name to its summary,
// group and arguments, which redis-cli uses for its hints.
func (s *Server) commandDocs(c *conn, names [][]byte) {
	var out kv
	for _, cmd := range s.list {
		if len(names) > 0 && !nameIn(cmd.name, names) {
			continue
		}
		doc := kv{"summary", cmd.summary, "since", "1.0.0", "group", groupName(cmd.group)}
		if cmd.complexity != "" {
			doc = append(doc, "complexity", cmd.complexity)
		}
		if len(cmd.args) > 0 {
			doc = append(doc, "arguments", argDocs(cmd.args))
		}
		out = append(out, cmd.name, doc)
	}
	c.writeValue(out)
}

// groupName maps our own group to one redis-cli knows; it prints groups it
// does not know as "module".
func groupName(g string) string {
	if g == "rlserver" {
		return "module"
	}
	return g
}

func nameIn(name string, names [][]byte) bool {
	for _, n := range names {
		if strings.EqualFold(name, string(n)) {
			return true
		}
	}
	return false
}

func argDocs(args []argDoc) []any {
	out := make([]any, len(args))
	for i, a := range args {
		d := kv{"name", a.name, "type", a.typ}
		if a.token != "" {
			d = append(d, "token", a.token)
		}
		var flags set
		if a.optional {
			flags = append(flags, status("optional"))
		}
		if a.multiple {
			flags = append(flags, status("multiple"))
		}
		if len(flags) > 0 {
			d = append(d, "flags", flags)
		}
		if len(a.sub) > 0 {
			d = append(d, "arguments", argDocs(a.sub))
		}
		out[i] = d
	}
	return out
}

// commandGetKeys answers COMMAND GETKEYS cmd args...: the key positions.
func (s *Server) commandGetKeys(c *conn, args [][]byte) {
	cmd := s.lookup(args[0])
	switch {
	case cmd == nil:
		c.writeError("ERR Invalid command specified")
	case cmd.firstKey == 0 && cmd.numKeysAt == 0:
		c.writeError("ERR The command has no key arguments")
	case !cmd.arityOK(len(args)) || len(args) <= cmd.firstKey:
		c.writeError("ERR Invalid number of arguments specified for command")
	default:
		keys := cmd.keysOf(args, nil)
		if len(keys) == 0 {
			c.writeError("ERR Invalid arguments specified for command")
			return
		}
		c.writeArray(len(keys))
		for _, k := range keys {
			c.writeBulk(k)
		}
	}
}
