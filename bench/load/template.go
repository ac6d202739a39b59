package load

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/rlserver/rlserver/slots"
)

// Placeholders a command template may contain. Each is replaced in place by
// a fixed-width decimal number, so a template is encoded to RESP once and
// only its digits are rewritten per request.
const (
	// RandInt is redis-benchmark's placeholder: a key number, zero-padded
	// to 12 digits, drawn from the run's key distribution.
	RandInt = "__rand_int__"
	// NowMicros is the client's clock in microseconds since the Unix epoch
	// (16 digits), stamped once per pipelined batch, for scripts that take
	// the time as an argument.
	NowMicros = "__now_us__"
)

const (
	randWidth = 12
	nowWidth  = 16
)

// Template is one command encoded as RESP with the positions of its
// placeholders.
type Template struct {
	Text string // as given, for reports
	// deniedFirst is the first element of an array reply that means
	// "denied": ":1" for CL.THROTTLE (limited), ":0" for anything else
	// (RL.CHECK and the Lua limiters reply allowed first).
	deniedFirst string
	wire        []byte
	keys        []int // offsets of RandInt digit fields in wire
	nows        []int // offsets of NowMicros digit fields in wire
	// keyOff and keyLen locate the key a cluster routes by in wire (see
	// keyArg); keyLen is -1 for a command without one.
	keyOff, keyLen int
}

// ParseTemplate splits text into arguments at spaces ('single' and "double"
// quotes group, as in redis-cli) and encodes it.
func ParseTemplate(text string) (*Template, error) {
	args, err := splitArgs(text)
	if err != nil {
		return nil, err
	}
	if len(args) == 0 {
		return nil, errors.New("empty command template")
	}
	t := &Template{Text: text, deniedFirst: ":0\r\n", keyLen: -1}
	key := keyArg(args)
	if strings.EqualFold(args[0], "CL.THROTTLE") {
		t.deniedFirst = ":1\r\n"
	}
	t.wire = append(t.wire, '*')
	t.wire = strconv.AppendInt(t.wire, int64(len(args)), 10)
	t.wire = append(t.wire, '\r', '\n')
	for ai, a := range args {
		expanded := strings.ReplaceAll(strings.ReplaceAll(a, RandInt, strings.Repeat("0", randWidth)),
			NowMicros, strings.Repeat("0", nowWidth))
		t.wire = append(t.wire, '$')
		t.wire = strconv.AppendInt(t.wire, int64(len(expanded)), 10)
		t.wire = append(t.wire, '\r', '\n')
		base := len(t.wire)
		if ai == key {
			t.keyOff, t.keyLen = base, len(expanded)
		}
		for i := 0; i < len(a); {
			switch {
			case strings.HasPrefix(a[i:], RandInt):
				t.keys = append(t.keys, len(t.wire))
				t.wire = append(t.wire, strings.Repeat("0", randWidth)...)
				i += len(RandInt)
			case strings.HasPrefix(a[i:], NowMicros):
				t.nows = append(t.nows, len(t.wire))
				t.wire = append(t.wire, strings.Repeat("0", nowWidth)...)
				i += len(NowMicros)
			default:
				t.wire = append(t.wire, a[i])
				i++
			}
		}
		if len(t.wire)-base != len(expanded) {
			panic("load: template length mismatch")
		}
		t.wire = append(t.wire, '\r', '\n')
	}
	return t, nil
}

// keyArg returns the index of the argument a cluster routes the command
// by: the first that contains RandInt, else the command's first argument
// (the key of RL.CHECK, INCR, GET...), else -1 (PING).
func keyArg(args []string) int {
	for i, a := range args {
		if strings.Contains(a, RandInt) {
			return i
		}
	}
	if len(args) > 1 {
		return 1
	}
	return -1
}

// slotAt returns the slot of the command appended at req by appendTo, or
// -1 if it has no key.
func (t *Template) slotAt(req []byte) int {
	if t.keyLen < 0 {
		return -1
	}
	return slots.Of(req[t.keyOff : t.keyOff+t.keyLen])
}

// denied reports whether reply is an array whose first element says the
// request was denied.
func (t *Template) denied(reply []byte) bool {
	if len(reply) < 4 || reply[0] != '*' {
		return false
	}
	_, next := lineAt(reply, 1)
	return next > 0 && len(reply) >= next+len(t.deniedFirst) && string(reply[next:next+len(t.deniedFirst)]) == t.deniedFirst
}

// HasNow reports whether the template uses NowMicros.
func (t *Template) HasNow() bool { return len(t.nows) > 0 }

// appendTo appends the command with key number key and clock nowDigits
// (already formatted) to dst.
func (t *Template) appendTo(dst []byte, key uint64, nowDigits *[nowWidth]byte) []byte {
	start := len(dst)
	dst = append(dst, t.wire...)
	if len(t.keys) > 0 {
		var kd [randWidth]byte
		putDigits(kd[:], key)
		for _, off := range t.keys {
			copy(dst[start+off:], kd[:])
		}
	}
	for _, off := range t.nows {
		copy(dst[start+off:], nowDigits[:])
	}
	return dst
}

// putDigits writes v zero-padded into d, keeping the low digits.
func putDigits(d []byte, v uint64) {
	for i := len(d) - 1; i >= 0; i-- {
		d[i] = byte('0' + v%10)
		v /= 10
	}
}

// splitArgs splits a command line like redis-cli does, without escapes.
func splitArgs(s string) ([]string, error) {
	var out []string
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == ' ' || c == '\t':
			i++
		case c == '"' || c == '\'':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unbalanced quotes in %q", s)
			}
			out = append(out, s[i+1:i+1+j])
			i += j + 2
		default:
			j := strings.IndexAny(s[i:], " \t")
			if j < 0 {
				j = len(s) - i
			}
			out = append(out, s[i:i+j])
			i += j
		}
	}
	return out, nil
}
