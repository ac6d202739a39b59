package server

import (
	"strconv"
	"time"

	"github.com/rlserver/rlserver/engine"
)

var keySpec = []string{"write", "fast"}

func limiterCommands() []*command {
	checkArgs := []argDoc{
		{name: "key", typ: "key"}, {name: "algo", typ: "string"},
		{name: "limit", typ: "integer"}, {name: "window", typ: "string"},
		{name: "cost", typ: "integer", token: "COST", optional: true},
		{name: "burst", typ: "integer", token: "BURST", optional: true},
	}
	return []*command{
		{name: "rl.check", arity: -5, flags: keySpec, firstKey: 1, lastKey: 1, keyStep: 1,
			group: "rlserver", complexity: "O(1); O(log entries) for log",
			summary: "Charge COST against the key's limit and say whether the request may pass",
			args:    checkArgs, handler: cmdCheck},
		{name: "rl.peek", arity: -5, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, keyStep: 1,
			group: "rlserver", complexity: "O(1)",
			summary: "Report the key's limit state without charging anything (RL.CHECK with COST 0)",
			args:    append(checkArgs[:4:4], checkArgs[5]), handler: cmdPeek},
		{name: "rl.reset", arity: 2, flags: keySpec, firstKey: 1, lastKey: 1, keyStep: 1,
			group: "rlserver", complexity: "O(1)", summary: "Forget the key's limiter state",
			args: []argDoc{{name: "key", typ: "key"}}, handler: cmdReset},
		{name: "cl.throttle", arity: -1, flags: keySpec, firstKey: 1, lastKey: 1, keyStep: 1,
			group: "rlserver", complexity: "O(1)",
			summary: "redis-cell compatible GCRA throttle",
			args: []argDoc{{name: "key", typ: "key"}, {name: "max_burst", typ: "integer"},
				{name: "count_per_period", typ: "integer"}, {name: "period", typ: "integer"},
				{name: "quantity", typ: "integer", optional: true}},
			handler: cmdThrottle},
	}
}

// checkReq is a parsed RL.CHECK or RL.PEEK.
type checkReq struct {
	key  []byte
	algo engine.Algo
	p    engine.Params
	cost int64
}

// parseCheck parses key algo limit window [COST n] [BURST n]. With
// allowCost false (RL.PEEK) COST is a syntax error. It returns an error
// reply naming the bad argument, or "".
func (s *Server) parseCheck(args [][]byte, allowCost bool) (checkReq, string) {
	req := checkReq{key: args[1], cost: 1}
	if msg := s.checkKey(req.key); msg != "" {
		return req, msg
	}
	var ok bool
	if req.algo, ok = engine.ParseAlgo(args[2]); !ok {
		return req, "ERR unknown algorithm " + quote(args[2]) + ": want fixed, sliding, log, token, leaky or gcra"
	}
	if req.p.Limit, ok = parseInt(args[3]); !ok || req.p.Limit <= 0 || req.p.Limit > engine.MaxLimit {
		return req, "ERR invalid limit " + quote(args[3]) + ": want a positive integer no larger than 2^48"
	}
	if req.p.Window, ok = engine.ParseWindow(args[4]); !ok {
		return req, "ERR invalid window " + quote(args[4]) +
			": want a duration such as 500ms, 60 (seconds), 1m, 24h or 1d, from 1ms to 366d"
	}
	for i := 5; i < len(args); i += 2 {
		opt := args[i]
		isCost, isBurst := allowCost && equalFold(opt, "COST"), equalFold(opt, "BURST")
		if !isCost && !isBurst {
			want := "COST n or BURST n"
			if !allowCost {
				want = "BURST n"
			}
			return req, "ERR syntax error: unexpected " + quote(opt) + " (options are " + want + ")"
		}
		if i+1 == len(args) {
			return req, "ERR syntax error: " + quote(opt) + " needs a value"
		}
		n, ok := parseInt(args[i+1])
		if !ok || n < 0 || n > engine.MaxLimit {
			return req, "ERR invalid " + quote(opt) + " " + quote(args[i+1]) + ": want a non-negative integer no larger than 2^48"
		}
		if isCost {
			req.cost = n
		} else {
			req.p.Burst = n
		}
	}
	if !allowCost {
		req.cost = 0
	}
	return req, s.checkParams(req)
}

func (s *Server) checkKey(key []byte) string {
	if len(key) > s.cfg.MaxKeyBytes {
		return "ERR key is " + strconv.Itoa(len(key)) + " bytes, longer than the limit of " +
			strconv.Itoa(s.cfg.MaxKeyBytes) + " (--max-key-bytes)"
	}
	return ""
}

func (s *Server) checkParams(req checkReq) string {
	if req.p.Burst != 0 && !req.algo.Bucket() {
		return "ERR BURST applies to token, leaky and gcra only, not '" + req.algo.String() + "'"
	}
	if req.algo == engine.Log && req.p.Limit > s.cfg.MaxLogLimit {
		return "ERR limit " + strconv.FormatInt(req.p.Limit, 10) + " is above the maximum for 'log' (" +
			strconv.FormatInt(s.cfg.MaxLogLimit, 10) + ", raise it with --max-log-limit): log keeps one entry per request"
	}
	if err := req.p.Validate(req.algo); err != nil {
		return "ERR invalid parameters: " + err.Error()
	}
	return ""
}

// RL.CHECK key algo limit window [COST n] [BURST n]
func cmdCheck(s *Server, c *conn, args [][]byte, now int64) {
	s.runCheck(c, args, now, true)
}

// RL.PEEK key algo limit window [BURST n]
func cmdPeek(s *Server, c *conn, args [][]byte, now int64) {
	s.runCheck(c, args, now, false)
}

func (s *Server) runCheck(c *conn, args [][]byte, now int64, charge bool) {
	var start time.Time
	if charge {
		start = s.metrics.start(c)
	}
	req, msg := s.parseCheck(args, charge)
	if msg != "" {
		c.writeError(msg)
		return
	}
	r, err := c.limiter().Check(req.key, req.algo, req.p, req.cost, now)
	if err != nil {
		c.writeErr(err)
		return
	}
	c.writeResult(r)
	if charge {
		s.metrics.check(c, req.algo, r.Allowed)
		s.metrics.observe(timedCheck, start)
	}
}

// writeResult writes the 5-integer reply of RL.CHECK, durations rounded up
// to milliseconds so that a client never retries early.
func (c *conn) writeResult(r engine.Result) {
	c.writeArray(5)
	c.writeResultFields(r)
}

// writeResultFields writes the five integers of r without an array header,
// for replies that add elements after them (RL.CHECKRULES).
func (c *conn) writeResultFields(r engine.Result) {
	c.writeInt(b2i(r.Allowed))
	c.writeInt(r.Limit)
	c.writeInt(r.Remaining)
	c.writeInt(ceilMillis(r.RetryAfter))
	c.writeInt(ceilMillis(r.ResetAfter))
}

// ceilMillis rounds ns up to whole milliseconds; -1 (never) stays -1.
func ceilMillis(ns int64) int64 {
	if ns < 0 {
		return -1
	}
	return (ns + 999_999) / 1_000_000
}

// RL.RESET key
func cmdReset(s *Server, c *conn, args [][]byte, now int64) {
	if msg := s.checkKey(args[1]); msg != "" {
		c.writeError(msg)
		return
	}
	existed, err := c.limiter().Reset(args[1], now)
	if err != nil {
		c.writeErr(err)
		return
	}
	c.writeInt(b2i(existed))
}

// parseThrottle parses CL.THROTTLE's arguments into max_burst,
// count_per_period, period and quantity (default 1). It returns an error
// reply, in redis-cell's words where it has some, or "".
func (s *Server) parseThrottle(args [][]byte) ([4]int64, string) {
	n := [4]int64{3: 1}
	if len(args) != 5 && len(args) != 6 {
		return n, "Cell error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]"
	}
	if msg := s.checkKey(args[1]); msg != "" {
		return n, msg
	}
	for i := 2; i < len(args); i++ {
		v, ok := parseCellInt(args[i])
		if !ok {
			return n, "Cell error: Couldn't parse as integer: " + string(args[i])
		}
		n[i-2] = v
	}
	if n[2] > 1<<33 || n[2] < -(1<<33) {
		return n, "ERR invalid period " + quote(args[4]) + ": want at most 2^33 seconds"
	}
	return n, ""
}

// CL.THROTTLE key max_burst count_per_period period [quantity]
//
// Errors use redis-cell's texts, including its "Cell error: " prefix.
func cmdThrottle(s *Server, c *conn, args [][]byte, now int64) {
	start := s.metrics.start(c)
	n, msg := s.parseThrottle(args)
	if msg != "" {
		c.writeError(msg)
		return
	}
	res, err := c.limiter().Throttle(args[1], n[0], n[1], n[2], n[3], now)
	if err != nil {
		if err == engine.ErrZeroRate {
			c.writeError("Cell error: " + err.Error())
			return
		}
		c.writeErr(err)
		return
	}
	s.metrics.check(c, engine.GCRA, !res.Limited)
	c.writeArray(5)
	c.writeInt(b2i(res.Limited))
	c.writeInt(res.Limit)
	c.writeInt(res.Remaining)
	c.writeInt(engine.CellSeconds(res.RetryAfter))
	c.writeInt(engine.CellSeconds(res.ResetAfter))
	s.metrics.observe(timedThrottle, start)
}
