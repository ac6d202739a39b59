// Package shards holds the limiter state of every key in lock-striped
// shards: a power-of-two number of compact hash tables (see table.go: an
// open-addressing index over records packed in pointer-free pages, about
// 45 bytes per key with a 16-byte name), each behind its own mutex, chosen
// by the xxhash of the key. It applies the engine's algorithms under the
// shard lock, answers WRONGTYPE when a key is used with another algorithm
// than its state holds, and drops state that is indistinguishable from a
// fresh key, lazily on access and by a bounded incremental Sweep.
//
// Time is a parameter: callers pass now (ns since the epoch). Each shard
// keeps the latest time it has seen and never runs a check at an earlier
// time, so the state of one key only ever moves forward even when
// concurrent callers stamped their requests in a different order.
//
// CheckAll (multi.go) charges several keys all or nothing, holding their
// shards' locks in index order; CheckRules runs it for the rules that
// match a request. Transact (tx.go) holds the shards of a group of commands'
// keys, in the same order, while they run through a Tx (for EXEC). The rule table (rules.go) is part of the Store's state,
// changed only through SetRule, CreateRule and DeleteRule, so that rules
// travel with the counters.
package shards
