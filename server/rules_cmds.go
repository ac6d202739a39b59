package server

import (
	"fmt"

	"github.com/rlserver/rlserver/rules"
)

func ruleCommands() []*command {
	id := argDoc{name: "id", typ: "string"}
	return []*command{
		{name: "rl.checkrules", arity: -4, flags: []string{"write", "fast"}, group: "rlserver",
			complexity: "O(rules + matching rules × check)",
			summary:    "Check a request against every matching rule; charge all of them or, if one denies, none",
			args: []argDoc{{name: "target", typ: "string"}, {name: "tier", typ: "string"},
				{name: "identifier", typ: "string", multiple: true},
				{name: "cost", typ: "integer", token: "COST", optional: true}},
			handler: cmdCheckRules},
		{name: "rl.rule.set", arity: 3, flags: []string{"write"}, group: "rlserver", complexity: "O(rules)",
			summary: "Create or replace a rule given as JSON (admin user only when --admin-token is set)",
			args:    []argDoc{id, {name: "json", typ: "string"}}, handler: cmdRuleSet},
		{name: "rl.rule.get", arity: 2, flags: []string{"readonly", "fast"}, group: "rlserver", complexity: "O(log rules)",
			summary: "Return a rule as JSON, or nil", args: []argDoc{id}, handler: cmdRuleGet},
		{name: "rl.rule.del", arity: 2, flags: []string{"write"}, group: "rlserver", complexity: "O(rules)",
			summary: "Delete a rule (admin user only when --admin-token is set)", args: []argDoc{id}, handler: cmdRuleDel},
		{name: "rl.rule.list", arity: 1, flags: []string{"readonly"}, group: "rlserver", complexity: "O(rules)",
			summary: "Return every rule as JSON, in id order", handler: cmdRuleList},
	}
}

// mayWriteRules answers the error and returns false if c may not change
// rules: the rule table is admin state, like FLUSHALL.
func (s *Server) mayWriteRules(c *conn, cmd string) bool {
	switch {
	case s.cfg.Rules == nil:
		c.writeError(errNoRules)
		return false
	case s.cfg.AdminToken != "" && !c.admin:
		c.writeError("NOPERM this user has no permissions to run the '" + cmd + "' command (AUTH admin <admin-token> first)")
		return false
	}
	return true
}

// RL.RULE.SET id json
//
// Reply: 1 if the rule was added, 0 if it replaced one. The JSON's "id"
// must be empty or equal to id.
func cmdRuleSet(s *Server, c *conn, args [][]byte, now int64) {
	if !s.mayWriteRules(c, "rl.rule.set") {
		return
	}
	r, err := s.parseRule(args)
	if err != nil {
		c.writeErr(err)
		return
	}
	added, err := c.ruleStore().SetRule(r)
	if err != nil {
		c.writeErr(err)
		return
	}
	s.log.Info("rule set", "id", r.ID, "added", added, "client", c.addr)
	c.writeInt(b2i(added))
}

// parseRule decodes and validates RL.RULE.SET's rule. The JSON's "id" must
// be empty or equal to the id argument.
func (s *Server) parseRule(args [][]byte) (rules.Rule, error) {
	r, err := rules.DecodeJSON(args[2])
	if err != nil {
		return r, err
	}
	switch id := string(args[1]); {
	case r.ID == "":
		r.ID = id
	case r.ID != id:
		return r, fmt.Errorf("%w: id %q in the JSON does not match the argument %q", rules.ErrInvalid, r.ID, id)
	}
	return r, r.Validate(s.cfg.MaxLogLimit)
}

// RL.RULE.GET id
func cmdRuleGet(s *Server, c *conn, args [][]byte, now int64) {
	if s.cfg.Rules == nil {
		c.writeError(errNoRules)
		return
	}
	r, ok := c.ruleStore().Rule(string(args[1]))
	if !ok {
		c.writeNull()
		return
	}
	c.writeBulk(rules.EncodeJSON(r))
}

// RL.RULE.DEL id
//
// Reply: 1 if the rule existed, else 0.
func cmdRuleDel(s *Server, c *conn, args [][]byte, now int64) {
	if !s.mayWriteRules(c, "rl.rule.del") {
		return
	}
	existed, err := c.ruleStore().DeleteRule(string(args[1]))
	if err != nil {
		c.writeErr(err)
		return
	}
	if existed {
		s.log.Info("rule deleted", "id", string(args[1]), "client", c.addr)
	}
	c.writeInt(b2i(existed))
}

// RL.RULE.LIST
//
// Reply: an array of the rules as JSON strings, in id order.
func cmdRuleList(s *Server, c *conn, args [][]byte, now int64) {
	if s.cfg.Rules == nil {
		c.writeError(errNoRules)
		return
	}
	all := c.ruleStore().Rules()
	c.writeArray(len(all))
	for _, r := range all {
		c.writeBulk(rules.EncodeJSON(r))
	}
}
