package server

import (
	"strconv"

	"github.com/rlserver/rlserver/slots"
)

// keysOf appends to dst the keys a call of cmd with args names, as
// COMMAND GETKEYS gives them: firstKey to lastKey by keyStep, or, for the
// EVAL family, the numkeys keys after the count at numKeysAt. It returns
// dst unchanged for a keyless command or a call too short to name its keys
// (arity and the numkeys count are checked by the command itself).
func (cmd *command) keysOf(args [][]byte, dst [][]byte) [][]byte {
	if cmd.numKeysAt > 0 {
		n, ok := numKeys(cmd, args)
		if !ok {
			return dst
		}
		return append(dst, args[cmd.numKeysAt+1:cmd.numKeysAt+1+n]...)
	}
	if cmd.firstKey <= 0 || len(args) <= cmd.firstKey {
		return dst
	}
	last := cmd.lastKey
	if last < 0 {
		last = len(args) + last
	}
	last = min(last, len(args)-1)
	step := max(cmd.keyStep, 1)
	for i := cmd.firstKey; i <= last; i += step {
		dst = append(dst, args[i])
	}
	return dst
}

// numKeys returns the EVAL family's key count, and false if it is not a
// number of keys that args hold.
func numKeys(cmd *command, args [][]byte) (int, bool) {
	if len(args) <= cmd.numKeysAt {
		return 0, false
	}
	n, err := strconv.Atoi(string(args[cmd.numKeysAt]))
	if err != nil || n < 0 || n > len(args)-cmd.numKeysAt-1 {
		return 0, false
	}
	return n, true
}

// slotOf returns the slot of the keys a call of cmd names, -1 when it names
// none, and false when they lie in more than one slot (CROSSSLOT). A
// command with one key costs a CRC, as before multi-key commands existed.
func (cmd *command) slotOf(args [][]byte) (int, bool) {
	if cmd.numKeysAt == 0 && cmd.lastKey == cmd.firstKey {
		if cmd.firstKey <= 0 || len(args) <= cmd.firstKey {
			return -1, true
		}
		return slots.Of(args[cmd.firstKey]), true
	}
	var buf [8][]byte
	slot := -1
	for _, k := range cmd.keysOf(args, buf[:0]) {
		switch sl := slots.Of(k); {
		case slot < 0:
			slot = sl
		case sl != slot:
			return 0, false
		}
	}
	return slot, true
}
