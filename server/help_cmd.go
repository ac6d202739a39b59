package server

import "strings"

func helpCommands() []*command {
	return []*command{
		{name: "rl.help", arity: -1, flags: []string{"loading", "stale", "fast"}, group: "rlserver", complexity: "O(commands)",
			summary: "Show the syntax and summary of rlserver's own commands (RL.*, CL.THROTTLE), or of one",
			args:    []argDoc{{name: "command", typ: "string", optional: true}}, handler: cmdHelp},
	}
}

// ownCommand reports whether cmd is one of rlserver's own commands, which
// RL.HELP lists: RL.* and CL.THROTTLE.
func ownCommand(cmd *command) bool {
	return strings.HasPrefix(cmd.name, "rl.") || strings.HasPrefix(cmd.name, "cl.")
}

// RL.HELP [command]
//
// Reply: as Redis's HELP subcommands (CONFIG HELP, XINFO HELP), an array
// of simple strings: a heading, then for each of rlserver's own commands
// (or the one named) its syntax and, indented, its summary and complexity.
// The same syntax is in the command's wrong-arity error and, argument by
// argument, in COMMAND DOCS.
func cmdHelp(s *Server, c *conn, args [][]byte, now int64) {
	if len(args) > 2 {
		c.writeError(arityError(s.lookup(args[0])))
		return
	}
	var shown []*command
	for _, cmd := range s.list {
		if ownCommand(cmd) && (len(args) == 1 || equalFold(args[1], strings.ToUpper(cmd.name))) {
			shown = append(shown, cmd)
		}
	}
	if len(shown) == 0 {
		c.writeError("ERR unknown command " + quote(args[1]) + ": RL.HELP lists rlserver's commands")
		return
	}
	lines := []string{"RL.HELP [<command>]. rlserver's commands are:"}
	if len(args) == 2 {
		lines = lines[:0]
	}
	for _, cmd := range shown {
		lines = append(lines, cmd.usage, "    "+cmd.summary+".", "    Complexity: "+cmd.complexity+".")
	}
	c.writeArray(len(lines))
	for _, l := range lines {
		c.writeStatus(l)
	}
}
