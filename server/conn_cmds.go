package server

import (
	"crypto/subtle"
	"strconv"
	"strings"
	"time"
)

func connectionCommands() []*command {
	fast := []string{"fast", "stale", "loading"}
	return []*command{
		{name: "ping", arity: -1, flags: fast, group: "connection", summary: "Return PONG or the message",
			args: []argDoc{{name: "message", typ: "string", optional: true}}, handler: cmdPing},
		{name: "echo", arity: 2, flags: fast, group: "connection", summary: "Return the message",
			args: []argDoc{{name: "message", typ: "string"}}, handler: cmdEcho},
		{name: "hello", arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, noAuth: true,
			group: "connection", summary: "Handshake: choose RESP2 or RESP3, authenticate, name the connection",
			args: []argDoc{{name: "arguments", typ: "block", optional: true, sub: []argDoc{
				{name: "protover", typ: "integer"},
				{name: "auth", typ: "block", token: "AUTH", optional: true, sub: []argDoc{
					{name: "username", typ: "string"}, {name: "password", typ: "string"}}},
				{name: "clientname", typ: "string", token: "SETNAME", optional: true}}}},
			handler: cmdHello},
		{name: "auth", arity: -2, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, noAuth: true,
			group: "connection", summary: "Authenticate the connection",
			args:    []argDoc{{name: "username", typ: "string", optional: true}, {name: "password", typ: "string"}},
			handler: cmdAuth},
		{name: "client", arity: -2, flags: []string{"noscript", "loading", "stale"}, group: "connection",
			summary: "CLIENT SETNAME|GETNAME|ID|SETINFO|LIST|INFO",
			args:    []argDoc{{name: "subcommand", typ: "string"}}, handler: cmdClient,
			subs: []string{"setname", "getname", "id", "setinfo", "list", "info", "no-evict", "no-touch"}},
		{name: "select", arity: 2, flags: fast, group: "connection", summary: "Select database 0, the only one",
			args: []argDoc{{name: "index", typ: "integer"}}, handler: cmdSelect},
		{name: "quit", arity: -1, flags: []string{"fast", "no_auth", "allow_busy"}, noAuth: true,
			group: "connection", summary: "Close the connection", handler: cmdQuit},
		{name: "reset", arity: 1, flags: []string{"fast", "no_auth", "allow_busy"}, noAuth: true,
			group: "connection", summary: "Reset the connection: RESP2, no name, not authenticated", handler: cmdResetConn},
		{name: "time", arity: 1, flags: fast, group: "server", summary: "Return the server time", handler: cmdTime},
	}
}

// PING [message]
func cmdPing(s *Server, c *conn, args [][]byte, now int64) {
	switch len(args) {
	case 1:
		c.writeStatus("PONG")
	case 2:
		c.writeBulk(args[1])
	default:
		c.writeError("ERR wrong number of arguments for 'ping' command")
	}
}

// ECHO message
func cmdEcho(s *Server, c *conn, args [][]byte, now int64) { c.writeBulk(args[1]) }

// HELLO [protover [AUTH username password] [SETNAME clientname]]
func cmdHello(s *Server, c *conn, args [][]byte, now int64) {
	proto := c.proto
	if len(args) > 1 {
		v, ok := parseInt(args[1])
		if !ok {
			c.writeError("ERR Protocol version is not an integer or out of range")
			return
		}
		if v != 2 && v != 3 {
			c.writeError("NOPROTO unsupported protocol version")
			return
		}
		proto = int(v)
	}
	var user, pass, name []byte
	authGiven, nameGiven := false, false
	for i := 2; i < len(args); i++ {
		switch {
		case equalFold(args[i], "AUTH") && i+2 < len(args):
			user, pass, authGiven = args[i+1], args[i+2], true
			i += 2
		case equalFold(args[i], "SETNAME") && i+1 < len(args):
			name, nameGiven = args[i+1], true
			i++
		default:
			c.writeError("ERR Syntax error in HELLO option " + quote(args[i]))
			return
		}
	}
	if authGiven {
		if msg := s.authenticate(c, user, pass); msg != "" {
			c.writeError(msg)
			return
		}
	}
	if !c.authed {
		c.writeError("NOAUTH HELLO must be called with the client already authenticated, otherwise the " +
			"HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select " +
			"the RESP protocol version at the same time")
		return
	}
	if nameGiven {
		if msg := c.setName(name); msg != "" {
			c.writeError(msg)
			return
		}
	}
	c.proto = proto
	c.publish()
	mode := "standalone"
	if s.cluster() != nil {
		mode = "cluster"
	}
	c.writeValue(kv{
		"server", "redis", "version", redisVersion, "proto", proto, "id", c.id,
		"mode", mode, "role", "master", "modules", []any{},
	})
}

// redisVersion is the Redis version rlserver reports to clients that gate
// features on it (RESP3, CLIENT SETINFO, COMMAND DOCS).
const redisVersion = "7.2.0"

// AUTH [username] password
func cmdAuth(s *Server, c *conn, args [][]byte, now int64) {
	if len(args) > 3 {
		c.writeError("ERR syntax error")
		return
	}
	var user []byte
	pass := args[len(args)-1]
	if len(args) == 3 {
		user = args[1]
	}
	if len(args) == 2 && s.cfg.RequirePass == "" {
		// As Redis 7: the one-argument form is an error when the default
		// user has no password; AUTH default <anything> succeeds.
		c.writeError("ERR AUTH <password> called without any password configured for the default user. " +
			"Are you sure your configuration is correct?")
		return
	}
	if msg := s.authenticate(c, user, pass); msg != "" {
		c.writeError(msg)
		return
	}
	c.publish()
	c.writeOK()
}

// authenticate checks a username (nil for "default") and password. The
// "default" user's password is RequirePass; the "admin" user's is
// AdminToken and may also FLUSHALL. It returns an error reply or "".
func (s *Server) authenticate(c *conn, user, pass []byte) string {
	switch {
	case user == nil || string(user) == "default":
		if s.cfg.RequirePass != "" && secretEqual(pass, s.cfg.RequirePass) {
			c.authed, c.admin = true, false
			return ""
		}
		if s.cfg.RequirePass == "" && user != nil {
			c.authed, c.admin = true, false
			return ""
		}
	case string(user) == "admin":
		if s.cfg.AdminToken != "" && secretEqual(pass, s.cfg.AdminToken) {
			c.authed, c.admin = true, true
			return ""
		}
	}
	return "WRONGPASS invalid username-password pair or user is disabled."
}

func secretEqual(got []byte, want string) bool {
	return subtle.ConstantTimeCompare(got, []byte(want)) == 1
}

// CLIENT SETNAME name | GETNAME | ID | SETINFO attr value | LIST | INFO
func cmdClient(s *Server, c *conn, args [][]byte, now int64) {
	sub := args[1]
	switch {
	case equalFold(sub, "SETNAME") && len(args) == 3:
		if msg := c.setName(args[2]); msg != "" {
			c.writeError(msg)
			return
		}
		c.writeOK()
	case equalFold(sub, "GETNAME") && len(args) == 2:
		if p := c.name.Load(); p != nil && *p != "" {
			c.writeBulkString(*p)
			return
		}
		c.writeNull()
	case equalFold(sub, "ID") && len(args) == 2:
		c.writeInt(c.id)
	case equalFold(sub, "SETINFO") && len(args) == 4:
		c.setInfo(args[2], args[3])
	case equalFold(sub, "LIST") && len(args) == 2:
		c.writeBulkString(s.clientList())
	case equalFold(sub, "INFO") && len(args) == 2:
		c.writeBulkString(c.describe(time.Now()))
	case equalFold(sub, "NO-EVICT") || equalFold(sub, "NO-TOUCH"):
		c.writeOK()
	default:
		c.writeError("ERR unknown subcommand or wrong number of arguments for " + quote(sub) +
			". Try CLIENT SETNAME, GETNAME, ID, SETINFO, LIST or INFO.")
	}
}

func (c *conn) setName(b []byte) string {
	for _, ch := range b {
		if ch < '!' || ch > '~' {
			return "ERR Client names cannot contain spaces, newlines or special characters."
		}
	}
	name := string(b)
	c.name.Store(&name)
	return ""
}

func (c *conn) setInfo(attr, value []byte) {
	v := string(value)
	for _, ch := range value {
		if ch < '!' || ch > '~' {
			c.writeError("ERR " + string(attr) + " cannot contain spaces, newlines or special characters.")
			return
		}
	}
	switch {
	case equalFold(attr, "LIB-NAME"):
		c.libName.Store(&v)
	case equalFold(attr, "LIB-VER"):
		c.libVer.Store(&v)
	default:
		c.writeError("ERR Unrecognized option " + quote(attr))
		return
	}
	c.writeOK()
}

func (s *Server) clientList() string {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	var b strings.Builder
	t := time.Now()
	for _, c := range conns {
		b.WriteString(c.describe(t))
	}
	return b.String()
}

// SELECT index
func cmdSelect(s *Server, c *conn, args [][]byte, now int64) {
	n, ok := parseInt(args[1])
	switch {
	case !ok:
		c.writeError("ERR value is not an integer or out of range")
	case n != 0:
		c.writeError("ERR DB index is out of range")
	default:
		c.writeOK()
	}
}

// QUIT
func cmdQuit(s *Server, c *conn, args [][]byte, now int64) {
	c.writeOK()
	c.closing = true
}

// RESET
func cmdResetConn(s *Server, c *conn, args [][]byte, now int64) {
	c.endMulti()
	c.proto = 2
	c.authed = s.cfg.RequirePass == ""
	c.admin = false
	empty := ""
	c.name.Store(&empty)
	c.publish()
	c.writeStatus("RESET")
}

// TIME
func cmdTime(s *Server, c *conn, args [][]byte, now int64) {
	t := now / 1e3
	c.writeArray(2)
	c.writeBulkString(strconv.FormatInt(t/1e6, 10))
	c.writeBulkString(strconv.FormatInt(t%1e6, 10))
}
