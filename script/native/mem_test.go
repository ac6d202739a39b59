package native

import (
	"sort"
	"strconv"

	"github.com/rlserver/rlserver/values"
)

// memKeys is a values.Keyspace in a map at a clock the test moves: the
// keyspace both paths run on in the tests without a server.
type memKeys struct {
	now int64 // ns since the epoch
	m   map[string]memEntry
}

type memEntry struct {
	v   *values.Value
	exp int64
}

func newMemKeys(now int64) *memKeys { return &memKeys{now: now, m: map[string]memEntry{}} }

func (k *memKeys) Lookup(key []byte) values.Entry {
	e, ok := k.m[string(key)]
	if !ok {
		return values.Entry{}
	}
	if e.exp != 0 && e.exp <= k.now {
		delete(k.m, string(key))
		return values.Entry{}
	}
	return values.Entry{Value: e.v, Expires: e.exp}
}

func (k *memKeys) Put(key []byte, v *values.Value, exp int64) {
	k.m[string(key)] = memEntry{v, exp}
}

func (k *memKeys) Delete(key []byte) bool {
	ok := k.Lookup(key).Exists()
	delete(k.m, string(key))
	return ok
}

func (k *memKeys) Writable(bool) error { return nil }

func (k *memKeys) live() []string {
	var keys []string
	for key := range k.m {
		if k.Lookup([]byte(key)).Exists() {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	return keys
}

func (k *memKeys) Scan(cursor uint64, count int, fn func(key []byte, kind string) bool) uint64 {
	for _, key := range k.live() {
		if !fn([]byte(key), k.m[key].v.Kind().String()) {
			break
		}
	}
	return 0
}

func (k *memKeys) Len() int { return len(k.live()) }
func (k *memKeys) Flush()   { clear(k.m) }

// memCaller is the script.Caller over a memKeys: the commands of package
// values, and TIME at the keyspace's clock (also as a script.Clock, which
// the native handlers read).
type memCaller struct{ ks *memKeys }

var timeCommand = values.Command{Name: "time", Arity: 1, Flags: values.Fast}

func (c memCaller) Command(name []byte) (values.Command, bool) {
	if vc := values.Lookup(name); vc != nil {
		return *vc, true
	}
	if string(name) == "TIME" || string(name) == "time" {
		return timeCommand, true
	}
	return values.Command{}, false
}

func (c memCaller) Call(args [][]byte, resp int) values.Reply {
	if string(args[0]) == "TIME" || string(args[0]) == "time" {
		sec, usec := c.Time()
		return values.ArrayReply(values.BulkString(strconv.FormatInt(sec, 10)), values.BulkString(strconv.FormatInt(usec, 10)))
	}
	return values.Exec(c.ks, c.ks.now, resp, args)
}

// CallCommand makes memCaller a script.CommandCaller, so that the traces
// run the handlers' commands as the server does: looked up once.
func (c memCaller) CallCommand(cmd *values.Command, args [][]byte, resp int) values.Reply {
	return values.ExecCommand(c.ks, cmd, c.ks.now, resp, args)
}

func (c memCaller) Time() (int64, int64) { return c.ks.now / 1e9, c.ks.now % 1e9 / 1e3 }
