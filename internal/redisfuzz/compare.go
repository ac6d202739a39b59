// Package redisfuzz drives two Redis-protocol servers (or one server and
// an in-process implementation) with the same random commands and
// compares their replies: Gen generates the commands from a seed, Conn is
// a RESP2/RESP3 client that keeps every reply type apart, and Compare
// runs one command on both sides and says how the replies differ, after
// normalising only what two correct servers may answer differently (the
// order of KEYS and SCAN and of a large hash, SCAN's cursors, and the ms
// their clocks are apart in TTLs).
package redisfuzz

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rlserver/rlserver/values"
)

// Doer runs one command on one side of a comparison.
type Doer func(args [][]byte) (values.Reply, error)

// TTLSlack is how far apart, in ms, two sides' PTTL and PEXPIRETIME
// replies may be (their clocks read a few ms apart); TTL and EXPIRETIME
// may differ by one second.
const TTLSlack = 25

// Compare runs cmd on a, the reference (a redis-server), then on b, and
// returns "" if their replies agree, or a description of the difference. SCAN is followed to its end on each side
// and compared as a set of keys; before DBSIZE both sides are scanned
// (Redis counts the expired keys it has not reclaimed yet, and a SCAN
// reclaims them). A range by lex over members of different scores, which
// Redis leaves undefined, is not compared when a's answer depends on its
// skiplist's shape. The fields of a hash Redis holds as a listpack must
// come in Redis's order.
func Compare(cmd [][]byte, a, b Doer) (string, error) {
	name := strings.ToLower(string(cmd[0]))
	if name == "dbsize" {
		for _, d := range []Doer{a, b} {
			if _, err := scanAll(d, [][]byte{[]byte("SCAN"), []byte("0")}); err != nil {
				return "", err
			}
		}
	}
	run := func(d Doer) (values.Reply, error) {
		if name == "scan" {
			return scanAll(d, cmd)
		}
		return d(cmd)
	}
	if undefined, err := lexUndefined(cmd, a); undefined || err != nil {
		return "", err
	}
	ra, err := run(a)
	if err != nil {
		return "", err
	}
	rb, err := run(b)
	if err != nil {
		return "", err
	}
	ordered, err := orderDefined(cmd, a)
	if err != nil {
		return "", err
	}
	if (ordered && same(ra, rb)) || (!ordered && Equal(cmd, ra, rb)) {
		return "", nil
	}
	return fmt.Sprintf("%s\n  a: %v\n  b: %v", Format(cmd), ra, rb), nil
}

// lexUndefined reports whether cmd is a range by lex over a sorted set
// whose result Redis leaves undefined, and a (the reference, a Redis)
// makes depend on its skiplist's random shape: members of different
// scores in a set held as a skiplist.
func lexUndefined(cmd [][]byte, a Doer) (bool, error) {
	name := strings.ToLower(string(cmd[0]))
	bylex := name == "zrangebylex" || name == "zrevrangebylex"
	for _, arg := range cmd[1:] {
		bylex = bylex || (name == "zrange" && strings.EqualFold(string(arg), "bylex"))
	}
	if !bylex || len(cmd) < 2 {
		return false, nil
	}
	enc, err := a([][]byte{[]byte("OBJECT"), []byte("ENCODING"), cmd[1]})
	if err != nil || string(enc.Str) != "skiplist" {
		return false, err
	}
	r, err := a([][]byte{[]byte("ZRANGE"), cmd[1], []byte("0"), []byte("-1"), []byte("WITHSCORES")})
	if err != nil || r.Kind != values.Array {
		return false, err
	}
	var scores []string // RESP2: member, score, ...; RESP3: [member, score] pairs
	for i, e := range r.Elems {
		switch {
		case e.Kind == values.Array && len(e.Elems) == 2:
			scores = append(scores, e.Elems[1].String())
		case i%2 == 1:
			scores = append(scores, e.String())
		}
	}
	for _, s := range scores {
		if s != scores[0] {
			return true, nil
		}
	}
	return false, nil
}

// orderDefined reports whether cmd lists a hash that a (a Redis) holds
// as a listpack, whose order (insertion order, kept through deletions)
// the other side must then match exactly.
func orderDefined(cmd [][]byte, a Doer) (bool, error) {
	switch strings.ToLower(string(cmd[0])) {
	case "hgetall", "hkeys", "hvals":
	default:
		return false, nil
	}
	if len(cmd) != 2 {
		return false, nil
	}
	enc, err := a([][]byte{[]byte("OBJECT"), []byte("ENCODING"), cmd[1]})
	return err == nil && string(enc.Str) == "listpack", err
}

// scanAll runs a SCAN and, while it returns a cursor other than 0, the
// same SCAN from that cursor, and returns [0, keys] with every key
// returned (or the first reply that is not a SCAN reply).
func scanAll(d Doer, cmd [][]byte) (values.Reply, error) {
	cmd = slices.Clone(cmd)
	var keys []values.Reply
	for range 1_000_000 {
		r, err := d(cmd)
		if err != nil {
			return r, err
		}
		if r.Kind != values.Array || len(r.Elems) != 2 {
			return r, nil
		}
		keys = append(keys, r.Elems[1].Elems...)
		if string(r.Elems[0].Str) == "0" {
			break
		}
		cmd[1] = r.Elems[0].Str
	}
	return values.ArrayReply(values.BulkString("0"), values.ArrayReply(keys...)), nil
}

// Equal reports whether a and b are the same reply to cmd, up to what
// Compare's doc allows.
func Equal(cmd [][]byte, a, b values.Reply) bool {
	name := strings.ToLower(string(cmd[0]))
	if a.Kind == values.Int && b.Kind == values.Int && a.Int >= 0 && b.Int >= 0 {
		switch name {
		case "pttl", "pexpiretime":
			return abs(a.Int-b.Int) <= TTLSlack
		case "ttl", "expiretime":
			return abs(a.Int-b.Int) <= 1
		}
	}
	return same(Normalize(cmd, a), Normalize(cmd, b))
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// Normalize returns r with the order that may differ removed: the
// elements of KEYS, HKEYS and HVALS replies and SCAN's keys sorted,
// HGETALL's pairs sorted (as a flat array in RESP2, a map in RESP3).
func Normalize(cmd [][]byte, r values.Reply) values.Reply {
	if r.Kind != values.Array && r.Kind != values.Map {
		return r
	}
	switch strings.ToLower(string(cmd[0])) {
	case "keys", "hkeys", "hvals":
		return sorted(r, 1)
	case "hgetall":
		return sorted(r, 2)
	case "scan":
		if len(r.Elems) == 2 {
			r.Elems = []values.Reply{r.Elems[0], dedup(sorted(r.Elems[1], 1))}
		}
	}
	return r
}

// sorted sorts r's elements in groups of n (pairs for n = 2).
func sorted(r values.Reply, n int) values.Reply {
	groups := make([][]values.Reply, 0, len(r.Elems)/n)
	for i := 0; i+n <= len(r.Elems); i += n {
		groups = append(groups, r.Elems[i:i+n])
	}
	slices.SortFunc(groups, func(x, y []values.Reply) int { return bytes.Compare(x[0].Str, y[0].Str) })
	out := r
	out.Elems = make([]values.Reply, 0, len(r.Elems))
	for _, g := range groups {
		out.Elems = append(out.Elems, g...)
	}
	return out
}

// dedup removes repeated elements of a sorted array (SCAN may return a
// key twice).
func dedup(r values.Reply) values.Reply {
	r.Elems = slices.CompactFunc(r.Elems, func(x, y values.Reply) bool { return bytes.Equal(x.Str, y.Str) })
	return r
}

// same compares two replies exactly: kinds, bytes, doubles by their bits.
func same(a, b values.Reply) bool {
	if a.Kind != b.Kind || a.Int != b.Int || !bytes.Equal(a.Str, b.Str) || len(a.Elems) != len(b.Elems) {
		return false
	}
	if a.Kind == values.Double && math.Float64bits(a.Float) != math.Float64bits(b.Float) {
		return false
	}
	for i := range a.Elems {
		if !same(a.Elems[i], b.Elems[i]) {
			return false
		}
	}
	return true
}

// Format renders a command for a failure message.
func Format(cmd [][]byte) string {
	parts := make([]string, len(cmd))
	for i, a := range cmd {
		parts[i] = fmt.Sprintf("%q", a)
	}
	return strings.Join(parts, " ")
}

// Wire returns r as a client reading it off the wire sees it, for
// comparing an in-process reply with a server's: RESP3 has one null, so
// a null array reads as the null, in r and in its elements.
func Wire(resp int, r values.Reply) values.Reply {
	if resp < 3 {
		return r
	}
	if r.Kind == values.NilArray {
		return values.NilReply()
	}
	if len(r.Elems) > 0 {
		elems := make([]values.Reply, len(r.Elems))
		for i, e := range r.Elems {
			elems[i] = Wire(resp, e)
		}
		r.Elems = elems
	}
	return r
}
