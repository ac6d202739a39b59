package server

import (
	"strconv"

	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/shards"
)

// BlockStore holds the blocked identifiers (docs/rules-and-http.md, "Blocks") that
// RL.BLOCK, RL.UNBLOCK and RL.BLOCKS change and list, and that the rule
// store's CheckRules denies. A shards.Store, a cluster.Node and a
// cluster.Cluster satisfy it; the server finds it on Config.Rules. It is
// safe for concurrent use.
type BlockStore interface {
	// SetBlock blocks b.Identifier until b.Until, replacing its block.
	SetBlock(b rules.Block, now int64) error
	// Unblock lifts identifier's block and reports whether one was live.
	Unblock(identifier string, now int64) (bool, error)
	// ActiveBlocks returns the blocks live at now by identifier, with TTLs.
	ActiveBlocks(now int64) []rules.Block
	// BlockStats returns the counts of blocks, for metrics.
	BlockStats(now int64) shards.BlockStats
}

func blockCommands() []*command {
	ident := argDoc{name: "identifier", typ: "string"}
	return []*command{
		{name: "rl.block", arity: -3, flags: []string{"write"}, group: "rlserver", complexity: "O(blocks)",
			summary: "Block an identifier (type=value) from every rules check for some seconds (admin user only when --admin-token is set)",
			args:    []argDoc{ident, {name: "seconds", typ: "integer"}, {name: "reason", typ: "string", optional: true}},
			handler: cmdBlock},
		{name: "rl.unblock", arity: 2, flags: []string{"write"}, group: "rlserver", complexity: "O(blocks)",
			summary: "Lift an identifier's block (admin user only when --admin-token is set)",
			args:    []argDoc{ident}, handler: cmdUnblock},
		{name: "rl.blocks", arity: 1, flags: []string{"readonly"}, group: "rlserver", complexity: "O(blocks)",
			summary: "List the blocks as [identifier, ttl_ms, reason] rows", handler: cmdBlocks},
	}
}

// blockStore returns the server's BlockStore, or writes an error and
// returns nil.
func (s *Server) blockStore(c *conn) BlockStore {
	bs, _ := s.cfg.Rules.(BlockStore)
	if bs == nil {
		c.writeError("ERR blocks are not available on this server")
	}
	return bs
}

// RL.BLOCK type=value seconds [reason]
//
// Reply: OK. The block replaces any the identifier had.
func cmdBlock(s *Server, c *conn, args [][]byte, now int64) {
	if len(args) > 4 {
		c.writeError(arityError(s.lookup(args[0])))
		return
	}
	if !s.mayWriteRules(c, "rl.block") {
		return
	}
	bs := s.blockStore(c)
	if bs == nil {
		return
	}
	secs, ok := parseInt(args[2])
	if !ok {
		c.writeError("ERR invalid 'seconds' " + quote(args[2]) + ": want a whole number of seconds from 1 to 31622400 (366 days)")
		return
	}
	reason := ""
	if len(args) == 4 {
		reason = string(args[3])
	}
	b, err := rules.NewBlock(string(args[1]), secs, reason, now)
	if err == nil {
		err = bs.SetBlock(b, now)
	}
	if err != nil {
		c.writeErr(err)
		return
	}
	s.log.Info("identifier blocked", "identifier", b.Identifier, "seconds", secs, "reason", reason, "client", c.addr)
	c.writeOK()
}

// RL.UNBLOCK type=value
//
// Reply: 1 if a block was lifted, 0 if the identifier had none.
func cmdUnblock(s *Server, c *conn, args [][]byte, now int64) {
	if !s.mayWriteRules(c, "rl.unblock") {
		return
	}
	bs := s.blockStore(c)
	if bs == nil {
		return
	}
	id := string(args[1])
	if _, _, err := rules.ParseIdentifier(id); err != nil {
		c.writeErr(err)
		return
	}
	lifted, err := bs.Unblock(id, now)
	if err != nil {
		c.writeErr(err)
		return
	}
	if lifted {
		s.log.Info("identifier unblocked", "identifier", id, "client", c.addr)
	}
	c.writeInt(b2i(lifted))
}

// RL.BLOCKS
//
// Reply: an array of [identifier, ttl_ms, reason] rows, by identifier.
func cmdBlocks(s *Server, c *conn, args [][]byte, now int64) {
	bs := s.blockStore(c)
	if bs == nil {
		return
	}
	all := bs.ActiveBlocks(now)
	c.writeArray(len(all))
	for _, b := range all {
		c.writeArray(3)
		c.writeBulkString(b.Identifier)
		c.writeInt(ceilMillis(int64(b.TTL)))
		c.writeBulkString(b.Reason)
	}
}

// writeBlockName writes "block:" and the identifier of q's block as a bulk
// string, RL.CHECKRULES's sixth element for a blocked request, without
// allocating.
func (c *conn) writeBlockName(q *rules.Query) {
	const prefix = "block:"
	id := q.Block.Identifier
	c.out = append(c.out, '$')
	c.out = strconv.AppendInt(c.out, int64(len(prefix)+len(id)), 10)
	c.out = append(c.out, "\r\n"+prefix...)
	c.out = append(c.out, id...)
	c.out = append(c.out, "\r\n"...)
}
