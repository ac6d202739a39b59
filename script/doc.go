// Package script runs Redis scripts: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO
// and SCRIPT LOAD | EXISTS | FLUSH | KILL, with Redis 7.0's semantics.
//
// An Engine compiles each script body once per sha1 (a cache that SCRIPT
// FLUSH empties), runs it in a pooled Lua 5.1 interpreter
// (github.com/yuin/gopher-lua) whose globals and libraries are read-only
// and reset between runs, and bridges redis.call and redis.pcall to a
// Caller that the server implements over its keyspace. Replies cross the
// bridge as values.Reply trees, converted to and from Lua values exactly
// as Redis converts them (RESP2 and RESP3).
//
// A Runner is what runs one script: the interpreter for a compiled body,
// or a native handler registered for a known sha (Register), which must
// answer and change the keyspace exactly as the script would. Eval picks
// the native handler when there is one; nothing else about the run
// depends on which path served it.
//
// A run that goes past Config.TimeLimit is busy (Busy, BusyTags, OnBusy):
// the server answers BUSY to what would wait for it, and Kill (SCRIPT
// KILL) stops it unless it has written. A run whose Lua values grow past
// Config.MemoryLimit is stopped with an error. DESIGN.md describes how
// states are pooled, how the limits work and what differs from Redis.
//
// The package does no I/O of its own: it logs redis.log through the
// Logger it is given and reads time only through Config.Now.
package script
