package values

// Keyspace is the keys a command runs against: typed values with an
// optional expiry, beside keys of other kinds (limiter state) that these
// commands see only as a key of another type. Its implementation binds the
// time the command runs at (the same now as Exec's): a key whose expiry is
// at or before it is absent. A Keyspace is used by one goroutine at a time;
// the caller holds what makes a command's calls atomic. No method keeps
// the key it is passed: its bytes belong to the caller.
type Keyspace interface {
	// Lookup returns what key holds. Entry.Value is owned by the Keyspace:
	// a command may change it in place, and must then Put it (or Delete
	// the key) before it returns.
	Lookup(key []byte) Entry
	// Put stores v as key's value with expiry exp (ns since the epoch, 0
	// for none), replacing what the key held; the Keyspace takes v. A
	// command calls it after every change of a value, so that the store
	// accounts the value's memory and records the change. An empty list,
	// hash or sorted set is never Put: the command Deletes the key.
	//
	// v is often the Value the key already held, changed in place: its
	// Size is then the new size, and the store must remember the size it
	// accounted for the key to account the difference.
	Put(key []byte, v *Value, exp int64)
	// Delete removes key whatever it holds (limiter state too) and
	// reports whether it held anything. The Value it removes is not
	// reused: RENAME Deletes a key and Puts its Value under another.
	Delete(key []byte) bool
	// Writable returns the error a write command must answer instead of
	// running (nil when it may run): with grow set (a command flagged
	// DenyOOM, that may add memory) the store's OOM error when it is over
	// its memory bound and cannot evict, and in any case a refusal such as
	// a full disk's.
	Writable(grow bool) error
	// Scan calls fn with keys live now, starting at cursor, until fn
	// returns false or about count keys were visited, and returns the
	// cursor to continue from (0 when every key was visited). A key live
	// during a whole iteration is visited at least once. Kind is the
	// key's TYPE name. fn must not keep key.
	Scan(cursor uint64, count int, fn func(key []byte, kind string) bool) uint64
	// Len returns the number of keys live now, every kind included.
	Len() int
	// Flush removes every key.
	Flush()
}

// Entry is what a key holds, as Keyspace.Lookup returns it.
type Entry struct {
	// Value is the key's value, nil when it holds none (absent, or a key
	// of another kind).
	Value *Value
	// Expires is when the key expires, ns since the epoch; 0 for never.
	// The key is absent from that ns on. A Redis expiry time of W ms
	// (Redis keeps a key during its expiry's ms, and drops it after) is
	// Expires (W+1) ms; a W past the year 2262, which ns cannot hold, is
	// kept in the Value with Expires math.MaxInt64.
	Expires int64
	// Other is the TYPE name of a key of another kind (limiter state:
	// "rl-fixed", "rl-token", ...), which commands on values answer with
	// WRONGTYPE; "" when the key holds a Value or nothing.
	Other string
}

// Exists reports whether the key holds anything.
func (e Entry) Exists() bool { return e.Value != nil || e.Other != "" }
