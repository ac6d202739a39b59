package values

import "fmt"

// Value is one key's Redis value: a string, a list, a hash or a sorted
// set. Commands create and change Values; a Keyspace stores them. A Value
// is not safe for concurrent use: the Keyspace's caller serialises the
// commands on a key.
type Value struct {
	kind Kind
	far  int64 // Redis's expiry time (ms) when too far for Entry.Expires, else 0
	str  strVal
	list *deque
	hash *hashVal
	zset *zset
}

// Kind is the type of a Value, as TYPE names it.
type Kind uint8

// The kinds of Value.
const (
	KindString Kind = iota + 1
	KindList
	KindHash
	KindZSet
)

// String returns the kind's TYPE name: "string", "list", "hash" or "zset".
func (k Kind) String() string {
	switch k {
	case KindString:
		return "string"
	case KindList:
		return "list"
	case KindHash:
		return "hash"
	case KindZSet:
		return "zset"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// valueOverhead is what a Value costs beside its contents: the struct and
// its allocation, and a share of the store's entry for its key.
const valueOverhead = 64

// Prefetch reads the value's header and the first byte of a string's
// contents, so that a command on it that follows soon finds them in the
// CPU's caches (shards.Store.Prefetch). The result is meaningless.
func (v *Value) Prefetch() uint64 {
	n := uint64(v.kind) + uint64(v.str.n) // kind and str.n: both of the header's cache lines
	if len(v.str.b) > 0 {
		n += uint64(v.str.b[0])
	}
	return n
}

// Kind returns the value's kind.
func (v *Value) Kind() Kind { return v.kind }

// Size returns the approximate number of bytes the value holds, contents
// and bookkeeping, for the store's --maxmemory accounting. It is kept
// current as the value changes and costs nothing to read.
func (v *Value) Size() int64 {
	switch v.kind {
	case KindList:
		return valueOverhead + v.list.size
	case KindHash:
		return valueOverhead + v.hash.size
	case KindZSet:
		return valueOverhead + v.zset.size
	}
	return valueOverhead + v.str.size()
}

// Len returns the number of elements: 1 for a string, the length of a
// list, the fields of a hash, the members of a sorted set.
func (v *Value) Len() int {
	switch v.kind {
	case KindList:
		return v.list.len()
	case KindHash:
		return v.hash.len()
	case KindZSet:
		return v.zset.len()
	}
	return 1
}

// NewString returns a string value holding a copy of b.
func NewString(b []byte) *Value {
	v := &Value{kind: KindString}
	v.str.setBytes(b)
	return v
}

func newList() *Value {
	return &Value{kind: KindList, list: &deque{}}
}

func newHash() *Value {
	return &Value{kind: KindHash, hash: &hashVal{ordered: true}}
}

func newZSet() *Value {
	return &Value{kind: KindZSet, zset: newZSetVal()}
}

// Verify checks the value's internal invariants (its recorded size
// against its contents, the order and spans of a sorted set, a hash's
// index) and returns what is wrong, or nil. It walks the whole value: for tests and debugging.
func (v *Value) Verify() error {
	var err error
	switch v.kind {
	case KindString:
	case KindList:
		_, err = v.list.verify()
	case KindHash:
		err = v.hash.verify()
	case KindZSet:
		err = v.zset.verify()
	default:
		return fmt.Errorf("values: unknown kind %d", v.kind)
	}
	return err
}
