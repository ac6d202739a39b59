package script

import (
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/rlserver/rlserver/values"
)

// memCaller is a small in-memory keyspace for the tests that need no real
// Redis (hostile scripts, benchmarks): strings, sorted sets, hashes and
// TTLs in milliseconds that never run out. It is safe for concurrent use.
type memCaller struct {
	mu    sync.Mutex
	str   map[string]string
	zsets map[string]map[string]float64
	hash  map[string]map[string]string
	ttl   map[string]int64
	calls int
}

func newMemCaller() *memCaller {
	return &memCaller{str: map[string]string{}, zsets: map[string]map[string]float64{},
		hash: map[string]map[string]string{}, ttl: map[string]int64{}}
}

var memCommands = map[string]values.Command{
	"get":              {Name: "get", Arity: 2, Flags: values.ReadOnly | values.Fast},
	"set":              {Name: "set", Arity: -3, Flags: values.Write | values.DenyOOM},
	"incr":             {Name: "incr", Arity: 2, Flags: values.Write | values.DenyOOM | values.Fast},
	"del":              {Name: "del", Arity: -2, Flags: values.Write},
	"pexpire":          {Name: "pexpire", Arity: -3, Flags: values.Write | values.Fast},
	"pttl":             {Name: "pttl", Arity: 2, Flags: values.ReadOnly | values.Fast},
	"zadd":             {Name: "zadd", Arity: -4, Flags: values.Write | values.DenyOOM | values.Fast},
	"zcard":            {Name: "zcard", Arity: 2, Flags: values.ReadOnly | values.Fast},
	"zremrangebyscore": {Name: "zremrangebyscore", Arity: 4, Flags: values.Write},
	"hget":             {Name: "hget", Arity: 3, Flags: values.ReadOnly | values.Fast},
	"hset":             {Name: "hset", Arity: -4, Flags: values.Write | values.DenyOOM | values.Fast},
	"ping":             {Name: "ping", Arity: -1, Flags: values.Fast},
	"eval":             {Name: "eval", Arity: -3, Flags: values.NoScript},
}

func (m *memCaller) Command(name []byte) (values.Command, bool) {
	c, ok := memCommands[strings.ToLower(string(name))]
	return c, ok
}

func bulk(s string) values.Reply   { return values.Reply{Kind: values.Bulk, Str: []byte(s)} }
func integer(n int64) values.Reply { return values.Reply{Kind: values.Int, Int: n} }
func errReply(s string) values.Reply {
	return values.Reply{Kind: values.Error, Str: []byte(s)}
}

var okReply = values.Reply{Kind: values.Status, Str: []byte("OK")}

func (m *memCaller) Call(args [][]byte, resp int) values.Reply {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	a := make([]string, len(args))
	for i, b := range args {
		a[i] = string(b)
	}
	switch strings.ToLower(a[0]) {
	case "get":
		if _, ok := m.zsets[a[1]]; ok {
			return errReply("WRONGTYPE Operation against a key holding the wrong kind of value")
		}
		if v, ok := m.str[a[1]]; ok {
			return bulk(v)
		}
		return values.Reply{Kind: values.Nil}
	case "set":
		m.str[a[1]] = a[2]
		return okReply
	case "incr":
		n, err := strconv.ParseInt(m.strOr(a[1], "0"), 10, 64)
		if err != nil {
			return errReply("ERR value is not an integer or out of range")
		}
		m.str[a[1]] = strconv.FormatInt(n+1, 10)
		return integer(n + 1)
	case "del":
		n := int64(0)
		for _, k := range a[1:] {
			if m.exists(k) {
				n++
			}
			delete(m.str, k)
			delete(m.zsets, k)
			delete(m.hash, k)
			delete(m.ttl, k)
		}
		return integer(n)
	case "pexpire":
		if !m.exists(a[1]) {
			return integer(0)
		}
		ms, _ := strconv.ParseInt(a[2], 10, 64)
		m.ttl[a[1]] = ms
		return integer(1)
	case "pttl":
		if !m.exists(a[1]) {
			return integer(-2)
		}
		if t, ok := m.ttl[a[1]]; ok {
			return integer(t)
		}
		return integer(-1)
	case "zadd":
		z := m.zsets[a[1]]
		if z == nil {
			z = map[string]float64{}
			m.zsets[a[1]] = z
		}
		added := int64(0)
		for i := 2; i+1 < len(a); i += 2 {
			score, _ := strconv.ParseFloat(a[i], 64)
			if _, ok := z[a[i+1]]; !ok {
				added++
			}
			z[a[i+1]] = score
		}
		return integer(added)
	case "zcard":
		return integer(int64(len(m.zsets[a[1]])))
	case "zremrangebyscore":
		lo, _ := strconv.ParseFloat(a[2], 64)
		hi, _ := strconv.ParseFloat(a[3], 64)
		n := int64(0)
		for member, s := range m.zsets[a[1]] {
			if s >= lo && s <= hi {
				delete(m.zsets[a[1]], member)
				n++
			}
		}
		return integer(n)
	case "hget":
		if v, ok := m.hash[a[1]][a[2]]; ok {
			return bulk(v)
		}
		return values.Reply{Kind: values.Nil}
	case "hset":
		h := m.hash[a[1]]
		if h == nil {
			h = map[string]string{}
			m.hash[a[1]] = h
		}
		n := int64(0)
		for i := 2; i+1 < len(a); i += 2 {
			if _, ok := h[a[i]]; !ok {
				n++
			}
			h[a[i]] = a[i+1]
		}
		return integer(n)
	case "ping":
		return values.Reply{Kind: values.Status, Str: []byte("PONG")}
	}
	return errReply("ERR unknown command")
}

func (m *memCaller) strOr(k, def string) string {
	if v, ok := m.str[k]; ok {
		return v
	}
	return def
}

func (m *memCaller) exists(k string) bool {
	_, s := m.str[k]
	_, z := m.zsets[k]
	_, h := m.hash[k]
	return s || z || h
}

// set stores a string from the test's side.
func (m *memCaller) set(k, v string) {
	m.mu.Lock()
	m.str[k] = v
	m.mu.Unlock()
}

// dump describes the keyspace, to compare two of them.
func (m *memCaller) dump() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var lines []string
	for k, v := range m.str {
		lines = append(lines, "s "+k+"="+v)
	}
	for k, z := range m.zsets {
		for member, s := range z {
			lines = append(lines, "z "+k+" "+member+"="+strconv.FormatFloat(s, 'g', -1, 64))
		}
	}
	for k, t := range m.ttl {
		lines = append(lines, "t "+k+"="+strconv.FormatInt(t, 10))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
