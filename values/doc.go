// Package values holds the Redis values that Lua rate limiters and their
// libraries keep in Redis — strings (integers and floats included), lists,
// hashes and sorted sets, each key with an optional expiry — and the
// commands on them (GET, SET, INCRBY, LPUSH, HSET, ZADD, EXPIRE, ...), with
// Redis 7's replies and errors.
//
// It is a pure room, as engine is for the limiter's algorithms: no clock
// (now is passed in), no locks, no I/O. Commands run against a Keyspace,
// which the caller implements over its store (shards.Store keeps these
// values beside the limiter's records, in one journal and one snapshot)
// and makes atomic by holding the keys' locks for the whole command (or
// script). Exec parses a command, checks its arity and runs it; the reply
// is a Reply tree that the server writes as RESP2 or RESP3 and that the
// script engine turns into Lua values. Exec is deterministic (the same
// keys, now and arguments give the same reply and changes), so a command
// may be replayed to replicate its effects.
//
// The files follow Redis's command groups: cmd_string.go, cmd_list.go,
// cmd_hash.go, cmd_zset.go with zrange.go, and cmd_keys.go for commands
// on keys of any type; table.go lists them with the fields COMMAND gives.
// The values themselves are in str.go, list.go (a ring buffer), hash.go,
// zset.go and skiplist.go (a sorted set Redis would hold as a listpack is
// a slice in order, with no object per member; a larger one a skiplist
// with spans and a member map, for O(log n) inserts, deletes, ranks and
// ranges by score); codec.go encodes
// them for the journal and snapshots. parse.go and ldouble.go reproduce
// how Redis reads numbers (its own integer parser, C's strtod and
// strtold) and computes INCRBYFLOAT in x87 long double; glob.go matches
// KEYS and SCAN patterns as Redis does.
//
// Where Redis's answer depends on how it encodes a small value, the
// encoding's visible effects are reproduced: a hash Redis would hold as a
// listpack lists its fields in insertion order, kept through deletions; a
// sorted set Redis would hold as a listpack stores a score of -0 as 0.
//
// What differs from Redis 7.0, on purpose or of necessity:
//   - A key holding limiter state is a key to DEL, UNLINK, EXISTS, TYPE
//     (which names its kind), TTL, PTTL, EXPIRETIME, PEXPIRETIME, KEYS,
//     SCAN and DBSIZE; every other command answers WRONGTYPE on it,
//     SET, EXPIRE, PERSIST and RENAME (from it) included, where Redis
//     would overwrite any type: its expiry belongs to its algorithm.
//     RENAME onto it replaces it, as DEL would remove it.
//   - SCAN's cursors are the Keyspace's. KEYS and SCAN list keys in the
//     Keyspace's order, and a hash of more than 512 fields (or with a
//     field or value over 64 bytes) in its own order, where Redis's is
//     its hash table's.
//   - A key set to expire at a time already past is deleted at once;
//     Redis leaves it to be reclaimed, which only DBSIZE and SCAN TYPE
//     none can see.
//   - A range by lex over members of different scores, which Redis
//     leaves undefined, scans the members in order, as Redis scans a
//     listpack; for a larger set Redis's answer depends on its skiplist's
//     random shape.
//   - INCRBYFLOAT and HINCRBYFLOAT compute as Redis built for x86-64
//     does (80-bit long double); Redis on arm64 uses 128-bit ones.
package values
