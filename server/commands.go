package server

import (
	"log/slog"

	"github.com/rlserver/rlserver/values"
	"sort"
	"strings"
)

// command is one entry of the command table: what COMMAND reports about it
// and the handler that runs it.
type command struct {
	name       string // lower case
	arity      int    // Redis convention: n exact, -n at least n
	flags      []string
	firstKey   int
	lastKey    int // -1: the last argument
	keyStep    int
	numKeysAt  int             // EVAL's numkeys: the position of the key count, keys after it; 0 for none
	value      *values.Command // a command of package values (see values_cmds.go)
	group      string
	summary    string
	complexity string
	args       []argDoc
	noAuth     bool // may run before AUTH
	handler    func(s *Server, c *conn, args [][]byte, now int64)
	idx        int       // position in the sorted table, for per-command counters
	wait       waitClass // what its reply waits for (see durable.go)
	// subs are the subcommands of a container command (CLIENT, CONFIG...),
	// lower case in the table, upper case once commandTable made it; fullNames their "name|sub" forms, which CLIENT LIST shows
	// as Redis 7.2 does (cmd=client|info), made once.
	subs      []string
	fullNames []string
	// usage is an RL.* command's syntax ("RL.RESET key"), which its
	// wrong-arity error and RL.HELP show; made once by commandTable.
	usage string
}

// shownName returns the name CLIENT LIST shows for a call of cmd with
// args: "client|info" for a known subcommand of a container command, else
// its name. It does not allocate.
func (cmd *command) shownName(args [][]byte) *string {
	if len(cmd.subs) > 0 && len(args) > 1 {
		for i, sub := range cmd.subs {
			if equalFold(args[1], sub) {
				return &cmd.fullNames[i]
			}
		}
	}
	return &cmd.name
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
	list = append(list, blockCommands()...)
	list = append(list, persistenceCommands()...)
	list = append(list, multiCommands()...)
	list = append(list, membershipCommands()...)
	list = append(list, clusterCommands()...)
	list = append(list, hotKeyCommands()...)
	list = append(list, scriptCommands()...)
	list = append(list, helpCommands()...)
	list = append(list, valueCommands(list)...)
	sort.Slice(list, func(i, j int) bool { return list[i].name < list[j].name })
	m := make(map[string]*command, len(list))
	for i, c := range list {
		c.idx = i
		c.wait = commandWaits[c.name]
		if c.value != nil {
			c.wait = waitStrong // reads and changes the keyspace
		}
		if ownCommand(c) {
			c.usage = syntaxOf(c)
		}
		c.fullNames = make([]string, len(c.subs))
		for j, sub := range c.subs {
			c.fullNames[j] = c.name + "|" + sub
			c.subs[j] = strings.ToUpper(sub) // as equalFold compares
		}
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
	c.nreplies++
	cmd := c.command(args[0])
	if c.multi != nil && s.queue(c, cmd, args) {
		return
	}
	c.commands.Add(1)
	if cmd == nil {
		if equalFold(args[0], "POST") || equalFold(args[0], "HOST:") {
			s.crossProtocol(c)
			return
		}
		c.writeError(unknownCommand(args))
		return
	}
	c.lastCmd.Store(cmd.shownName(args))
	if !c.authed && !cmd.noAuth {
		c.writeError("NOAUTH Authentication required.")
		return
	}
	if !cmd.arityOK(len(args)) {
		c.writeError(arityError(cmd))
		return
	}
	if s.misrouted(c, cmd, args) { // a key of a slot this node does not serve
		return
	}
	s.metrics.call(c, cmd)
	cmd.handler(s, c, args, now)
	c.wait = max(c.wait, cmd.wait)
}

// crossProtocol ends a connection that sends an HTTP request line (POST)
// or header (Host:), as Redis does: a web page can make a browser send
// HTTP to the RESP port, and each line of it, the body's included, would
// otherwise run as a command. Nothing more is answered or run.
func (s *Server) crossProtocol(c *conn) {
	s.logThrottled(&s.throttle.security, slog.LevelWarn, "possible security attack: a client sent an HTTP "+
		"request (POST or Host:) to the RESP port, as cross-protocol scripting from a web page does; "+
		"connection closed", "client", c.addr)
	s.metrics.errorCount("crossprotocol")
	c.out = c.out[:0]
	c.closing = true
}

// unknownCommand builds Redis's reply for an unknown command: the name cut
// to 128 bytes, then the first arguments, each quoted and followed by a
// space, until the quoted list reaches 128 bytes (an argument is cut to the
// room left). Its cost is bounded whatever the number of arguments.
func unknownCommand(args [][]byte) string {
	name := args[0]
	if len(name) > 128 {
		name = name[:128]
	}
	const head = "ERR unknown command '"
	const mid = "', with args beginning with: "
	msg := make([]byte, 0, len(head)+len(name)+len(mid)+128+3)
	msg = append(msg, head...)
	msg = append(msg, name...)
	msg = append(msg, mid...)
	start := len(msg)
	for _, a := range args[1:] {
		used := len(msg) - start
		if used >= 128 {
			break
		}
		if len(a) > 128-used {
			a = a[:128-used]
		}
		msg = append(msg, '\'')
		msg = append(msg, a...)
		msg = append(msg, '\'', ' ')
	}
	return string(msg)
}
