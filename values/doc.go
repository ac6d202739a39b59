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
// script engine turns into Lua values.
package values
