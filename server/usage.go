package server

import "strings"

// syntaxOf renders cmd's arguments as redis-cli shows them in its hints
// and Redis's documentation writes them: "RL.CHECK key algo limit window
// [COST cost] [BURST burst]".
func syntaxOf(cmd *command) string {
	var b strings.Builder
	b.WriteString(strings.ToUpper(cmd.name))
	for _, a := range cmd.args {
		b.WriteByte(' ')
		writeArgSyntax(&b, a)
	}
	return b.String()
}

func writeArgSyntax(b *strings.Builder, a argDoc) {
	if a.optional {
		b.WriteByte('[')
	}
	one := func() {
		switch {
		case a.typ == "pure-token":
			b.WriteString(a.token)
		case a.typ == "oneof":
			for i, s := range a.sub {
				if i > 0 {
					b.WriteString("|")
				}
				writeArgSyntax(b, s)
			}
		case a.typ == "block":
			if a.token != "" {
				b.WriteString(a.token + " ")
			}
			for i, s := range a.sub {
				if i > 0 {
					b.WriteByte(' ')
				}
				writeArgSyntax(b, s)
			}
		default:
			if a.token != "" {
				b.WriteString(a.token + " ")
			}
			b.WriteString(a.name)
		}
	}
	one()
	if a.multiple {
		b.WriteString(" [")
		one()
		b.WriteString(" ...]")
	}
	if a.optional {
		b.WriteByte(']')
	}
}

// arityError is the reply to a call of cmd with the wrong number of
// arguments: Redis's sentence, then, for rlserver's own commands (RL.*),
// the syntax, as CL.THROTTLE's reply shows redis-cell's.
func arityError(cmd *command) string {
	msg := "ERR wrong number of arguments for '" + cmd.name + "' command"
	if cmd.usage != "" {
		msg += "; usage: " + cmd.usage
	}
	return msg
}
