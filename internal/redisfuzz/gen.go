package redisfuzz

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Gen generates random commands over strings, lists, hashes and sorted
// sets: keys from a small set so that types collide, expiries, numbers at
// the edges of their ranges, options in every order, and now and then bad
// arguments, a wrong number of them or a name in mixed case. The same
// seed gives the same sequence.
//
// Expiries are either far (hours ahead, or absolute times years away) or
// already past, never a few ms away: two servers compared in lock step
// then agree on which keys have expired whatever their clocks' jitter.
type Gen struct {
	r *rand.Rand
	// Keys are the key names drawn from.
	Keys []string
	// Only, when not empty, restricts the commands generated to these
	// (lower-case) names.
	Only []string
}

// New returns a generator seeded with seed.
func New(seed uint64) *Gen {
	return &Gen{
		r:    rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d)),
		Keys: []string{"a", "b", "{t}c"},
	}
}

// template builds one command's arguments (after the name).
type template struct {
	name   string
	weight int
	args   func(g *Gen) []string
}

// Next returns the next command: its name and arguments.
func (g *Gen) Next() [][]byte {
	t := g.pick()
	args := append([]string{t.name}, t.args(g)...)
	switch n := g.r.IntN(100); {
	case n < 2 && len(args) > 1: // one argument too few
		args = args[:len(args)-1]
	case n < 4: // one too many
		args = append(args, g.any())
	case n < 10:
		args[0] = mixCase(g, args[0])
	}
	out := make([][]byte, len(args))
	for i, a := range args {
		out[i] = []byte(a)
	}
	return out
}

func (g *Gen) pick() template {
	ts := templates
	if len(g.Only) > 0 {
		ts = nil
		for _, t := range templates {
			for _, o := range g.Only {
				if t.name == o {
					ts = append(ts, t)
				}
			}
		}
	}
	total := 0
	for _, t := range ts {
		total += t.weight
	}
	n := g.r.IntN(total)
	for _, t := range ts {
		if n -= t.weight; n < 0 {
			return t
		}
	}
	return ts[0]
}

func mixCase(g *Gen, s string) string {
	b := []byte(s)
	for i := range b {
		if g.r.IntN(2) == 0 && b[i] >= 'a' && b[i] <= 'z' {
			b[i] -= 'a' - 'A'
		}
	}
	return string(b)
}

// oneOf returns one of xs.
func (g *Gen) oneOf(xs ...string) string { return xs[g.r.IntN(len(xs))] }

// key returns a key name: one of Keys, shared by every type, or of a
// type's own keys (prefix "s", "l", "h" or "z"), so that commands meet
// values of their type most of the time and of another now and then.
func (g *Gen) key() string {
	if g.r.IntN(30) == 0 {
		return "y" + strconv.Itoa(g.r.IntN(3))
	}
	return g.Keys[g.r.IntN(len(g.Keys))]
}

// typed returns a key of prefix's own (two of them), or another key one
// time in five.
func (g *Gen) typed(prefix string) string {
	if g.r.IntN(5) == 0 {
		return g.key()
	}
	return prefix + strconv.Itoa(g.r.IntN(2))
}

func (g *Gen) skey() string { return g.typed("s") }
func (g *Gen) lkey() string { return g.typed("l") }
func (g *Gen) hkey() string { return g.typed("h") }
func (g *Gen) zkey() string { return g.typed("z") }

// anyKey returns a key of any type's.
func (g *Gen) anyKey() string {
	return g.typed(g.oneOf("s", "l", "h", "z"))
}

func (g *Gen) keys(min int) []string {
	out := make([]string, min+g.r.IntN(3))
	for i := range out {
		out[i] = g.anyKey()
	}
	return out
}

// Edge and odd arguments.
var (
	oddInts = []string{"0", "-0", "+1", "01", " 1", "1 ", "", "abc", "1.5", "1e3",
		"9223372036854775807", "-9223372036854775808", "9223372036854775808",
		"-9223372036854775809", "4611686018427387904", "-1", "100000000000000000000"}
	oddFloats = []string{"0", "-0", "-0.0", "1\x00", "(1\x00x", "+1.5", ".5", "5.", "1e3", "1E-3", "0.1", "0.2",
		"3.0000000000000004", "1e300", "-1e300", "1e308", "1e400", "1e-310", "1e-400",
		"inf", "-inf", "+inf", "Infinity", "nan", "abc", "", " 1", "1 ", "0x10", "0x1p-2",
		"1.7976931348623157e308", "4.9e-324", "123456789012345678", "0.000003814697265625",
		"9007199254740993", "-2.5e-5", "10.50"}
	oddStrings = []string{"", "v", "hello", "0", "-1", "42", "3.14", "abc def", "x\x00y",
		"1e400", strings.Repeat("x", 70), strings.Repeat("long", 20)}
)

// any returns some argument.
func (g *Gen) any() string {
	switch g.r.IntN(4) {
	case 0:
		return g.intArg()
	case 1:
		return g.floatArg()
	case 2:
		return g.str()
	}
	return g.anyKey()
}

// intArg returns an integer argument, now and then an odd one.
func (g *Gen) intArg() string {
	switch n := g.r.IntN(20); {
	case n < 2:
		return oddInts[g.r.IntN(len(oddInts))]
	case n < 4:
		return strconv.FormatInt(g.r.Int64()-math.MaxInt64/2*g.r.Int64N(3), 10)
	}
	return strconv.Itoa(g.r.IntN(40) - 10)
}

// smallInt returns a small integer, sometimes negative.
func (g *Gen) smallInt(lo, hi int) string { return strconv.Itoa(lo + g.r.IntN(hi-lo+1)) }

// floatArg returns a float argument in one of many spellings.
func (g *Gen) floatArg() string {
	switch g.r.IntN(8) {
	case 0, 1:
		return oddFloats[g.r.IntN(len(oddFloats))]
	case 2:
		return strconv.FormatFloat(g.r.NormFloat64()*1e6, 'e', g.r.IntN(20), 64)
	case 3:
		return strconv.FormatFloat(g.r.Float64()*100, 'f', g.r.IntN(20), 64)
	case 4:
		return strconv.FormatFloat(math.Ldexp(g.r.Float64(), g.r.IntN(200)-100), 'g', -1, 64)
	}
	return g.smallInt(-5, 20)
}

// str returns a string value.
func (g *Gen) str() string {
	switch g.r.IntN(6) {
	case 0:
		return oddStrings[g.r.IntN(len(oddStrings))]
	case 1:
		return g.floatArg()
	case 2:
		return g.intArg()
	}
	return "v" + strconv.Itoa(g.r.IntN(10))
}

// member returns a sorted set member or hash field.
func (g *Gen) member() string {
	if g.r.IntN(40) == 0 {
		return strings.Repeat("m", 65+g.r.IntN(3))
	}
	return "m" + strconv.Itoa(g.r.IntN(12))
}

func (g *Gen) field() string {
	if g.r.IntN(40) == 0 {
		return strings.Repeat("f", 65)
	}
	return "f" + strconv.Itoa(g.r.IntN(6))
}

// score returns a score, mostly a small one so that members tie.
func (g *Gen) score() string {
	switch g.r.IntN(20) {
	case 0, 1, 2:
		return g.floatArg()
	case 3:
		return g.oneOf("-0", "0", "-0.0", "+inf", "-inf")
	}
	return g.smallInt(-3, 10)
}

// bound returns a score range end.
func (g *Gen) bound() string {
	switch g.r.IntN(8) {
	case 0:
		return g.oneOf("-inf", "+inf", "inf", "(-inf", "(+inf", "", "(", "abc", " 1", "nan", "1e400")
	case 1, 2:
		return "(" + g.score()
	}
	return g.score()
}

// lexBound returns a lex range end.
func (g *Gen) lexBound() string {
	switch g.r.IntN(6) {
	case 0:
		return g.oneOf("-", "+", "", "m1", "-x", "[", "(")
	case 1, 2:
		return "(" + g.member()
	}
	return "[" + g.member()
}

// rank returns a rank argument.
func (g *Gen) rank() string {
	if g.r.IntN(15) == 0 {
		return g.intArg()
	}
	return g.smallInt(-8, 8)
}

// seconds and millis return expiry arguments: far ahead, past, or odd.
func (g *Gen) seconds() string {
	switch g.r.IntN(10) {
	case 0:
		return g.oneOf("0", "-1", "abc", "9223372036854775807", "9223372036854775", "9223372036854", "-9223372036854775808")
	case 1:
		return g.smallInt(-100, -1)
	}
	return strconv.Itoa(3600 + g.r.IntN(1_000_000))
}

func (g *Gen) millis() string {
	switch g.r.IntN(10) {
	case 0:
		return g.oneOf("0", "-1", "abc", "9223372036854775807", "9223372036854775", "-9223372036854775808")
	case 1:
		return g.smallInt(-100000, -1)
	}
	return strconv.Itoa(3_600_000 + g.r.IntN(1_000_000_000))
}

// unixSeconds and unixMillis return absolute expiry times: years ahead or
// long past.
func (g *Gen) unixSeconds() string {
	switch g.r.IntN(6) {
	case 0:
		return g.oneOf("0", "1", "-5", "abc", "9223372036854775807", "99999999999")
	case 1:
		return strconv.Itoa(1 + g.r.IntN(1_000_000_000))
	}
	return strconv.Itoa(4_102_444_800 + g.r.IntN(1_000_000_000)) // 2100 and after
}

func (g *Gen) unixMillis() string {
	switch g.r.IntN(6) {
	case 0:
		return g.oneOf("0", "1", "-5", "abc", "9223372036854775807", "99999999999999")
	case 1:
		return strconv.Itoa(1 + g.r.IntN(1_000_000_000))
	}
	return strconv.FormatInt(4_102_444_800_000+g.r.Int64N(1_000_000_000_000), 10)
}

// pattern returns a glob pattern.
func (g *Gen) pattern() string {
	if g.r.IntN(3) == 0 {
		return g.oneOf("*", "a*", "?", "*e", "{t}*", "[a-c]", "[^a]", "[c-a]", "\\a", "*[", "[", "z?", "**", "[!a]")
	}
	const chars = "abcdez{}t*?[]^-\\"
	b := make([]byte, 1+g.r.IntN(5))
	for i := range b {
		b[i] = chars[g.r.IntN(len(chars))]
	}
	return string(b)
}

// opts returns some of the options in opts, in random order, each
// possibly repeated.
func (g *Gen) opts(opts ...string) []string {
	var out []string
	for _, o := range opts {
		if g.r.IntN(4) == 0 {
			if g.r.IntN(40) == 0 {
				o += "\x00z" // C's string functions stop at the NUL
			}
			out = append(out, mixCase(g, o))
		}
	}
	g.r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// expiryOpt returns SET's or GETEX's expiry option, if any.
func (g *Gen) expiryOpt() []string {
	switch g.r.IntN(12) {
	case 0:
		return []string{"EX", g.seconds()}
	case 1:
		return []string{"PX", g.millis()}
	case 2:
		return []string{"EXAT", g.unixSeconds()}
	case 3:
		return []string{"PXAT", g.unixMillis()}
	case 4:
		return []string{"KEEPTTL"}
	case 5:
		return []string{g.oneOf("EX", "PX")}
	}
	return nil
}

func join(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func one(s ...string) []string { return s }
