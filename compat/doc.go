// Package compat holds tests only: the rate limiters people already run on
// Redis, driven unchanged against rlserver and a real redis-server in lock
// step, must decide identically.
//
// Each test starts a redis-server (internal/redistest, side a, the
// reference) and an in-memory rlserver (internal/testserver, side b), makes
// every call of a library on a and at once on b, and compares what they
// answer and what they stored. The libraries are the real ones, as their
// users call them, with the scripts they carry: go-redis/redis_rate and
// ulule/limiter (Go, imported by the tests), Python's limits and
// Flask-Limiter on Flask (Debian's packages, run by /usr/bin/python3 on
// the drivers in testdata/), and scripts of our own in the shapes rate
// limiting tutorials teach (testdata/*.lua).
//
// The two servers keep their own clocks. A key that is about to expire on
// either side is waited out before a step (an expiry inside a step may
// legitimately land on one side only), and a script that reads the
// server's TIME is stepped only when its state is not within the guard of
// a decision boundary. Resets may differ by a second; values the clocks
// write (PTTLs, timestamps) by what the time between the two sides' calls
// explains. -compat.sut=redis points side b at a second redis-server, to
// check the harness itself; every randomized test prints its seed and
// replays it with -seed or RL_SEED.
package compat
