package server

import "sort"

// command is one entry of the command table: what COMMAND reports about it
// and the handler that runs it.
type command struct {
	name       string // lower case
	arity      int    // Redis convention: n exact, -n at least n
	flags      []string
	firstKey   int
	lastKey    int
	keyStep    int
	group      string
	summary    string
	complexity string
	args       []argDoc
	noAuth     bool // may run before AUTH
	handler    func(s *Server, c *conn, args [][]byte, now int64)
	idx        int // position in the sorted table, for per-command counters
}

// argDoc describes one argument for COMMAND DOCS.
type argDoc struct {
	name     string
	typ      string // key, string, integer, pure-token, block, oneof
	token    string
	optional bool
	multiple bool
	sub      []argDoc
}

// commandTable returns the commands by lower-case name and sorted by name.
func commandTable() (map[string]*command, []*command) {
	list := append(limiterCommands(), connectionCommands()...)
	list = append(list, adminCommands()...)
	list = append(list, ruleCommands()...)
	sort.Slice(list, func(i, j int) bool { return list[i].name < list[j].name })
	m := make(map[string]*command, len(list))
	for i, c := range list {
		c.idx = i
		m[c.name] = c
	}
	return m, list
}

// lookup finds the command named b, case-insensitively, without allocating.
func (s *Server) lookup(b []byte) *command {
	var buf [32]byte
	if len(b) > len(buf) {
		return nil
	}
	for i, ch := range b {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		buf[i] = ch
	}
	return s.cmds[string(buf[:len(b)])]
}

// dispatch runs one command. now is the batch's clock reading.
func (s *Server) dispatch(c *conn, args [][]byte, now int64) {
	c.commands.Add(1)
	cmd := s.lookup(args[0])
	if cmd == nil {
		c.writeError(unknownCommand(args))
		return
	}
	c.lastCmd.Store(cmd)
	if !c.authed && !cmd.noAuth {
		c.writeError("NOAUTH Authentication required.")
		return
	}
	if (cmd.arity > 0 && len(args) != cmd.arity) || (cmd.arity < 0 && len(args) < -cmd.arity) {
		c.writeError("ERR wrong number of arguments for '" + cmd.name + "' command")
		return
	}
	s.metrics.call(c, cmd)
	cmd.handler(s, c, args, now)
}

// unknownCommand builds Redis's reply for an unknown command, quoting the
// first arguments up to 128 bytes.
func unknownCommand(args [][]byte) string {
	name := args[0]
	if len(name) > 128 {
		name = name[:128]
	}
	msg := "ERR unknown command '" + string(name) + "', with args beginning with: "
	used := 0
	for _, a := range args[1:] {
		if used >= 128 {
			break
		}
		if len(a) > 128-used {
			a = a[:128-used]
		}
		used += len(a)
		msg += "'" + string(a) + "' "
	}
	return msg
}
