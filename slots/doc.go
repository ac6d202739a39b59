// Package slots maps keys to Redis Cluster's hash slots, so that rlserver
// places keys exactly where a cluster-aware Redis client expects them.
//
// The keyspace is Count (16384) slots. A key's slot is the CRC16 of the
// key (the XMODEM / CCITT variant Redis Cluster uses: polynomial 0x1021,
// initial value 0, no reflection) modulo Count, except that a key holding a
// hash tag is hashed on the tag alone: the bytes between its first '{' and
// the first '}' after it, if there is at least one byte between them. Keys
// such as "{user1}:api" and "{user1}:login" so share a slot, and may be
// used together in one MULTI transaction.
//
// Of neither allocates nor keeps its argument, and is safe for concurrent
// use.
package slots
