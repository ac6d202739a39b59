// Package engine implements the rate-limiting algorithms of rlserver: fixed
// window, sliding window counter, sliding window log, token bucket, leaky
// bucket and GCRA, plus redis-cell's CL.THROTTLE arithmetic.
//
// The package is pure: every decision is a deterministic function of the
// key's State, the Params, the cost and the caller's clock reading (integer
// nanoseconds since the Unix epoch). It reads no clock, takes no locks, logs
// nothing and does no I/O, so a Raft replica that replays a check with the
// leader's timestamp reaches the same State.
//
// Integer arithmetic is used throughout; products that can exceed 64 bits
// are computed in 128 bits (see mul.go), so there is no floating-point drift.
package engine
