// Package compat holds tests only: the rate limiters people already run on
// Redis, driven unchanged against rlserver and a real redis-server in lock
// step, must decide identically.
//
// Each test starts a redis-server (internal/redistest, side a, the
// reference) and an in-memory rlserver (internal/testserver, side b), makes
// every call of a library on a and at once on b, and compares what they
// answer and what they stored. The libraries are the real ones, as their
// users call them, with the scripts they carry: go-redis/redis_rate v10 and
// ulule/limiter v3 (Go, imported by the tests, on go-redis clients in RESP3
// and RESP2), Python's limits and Flask-Limiter on Flask (Debian's
// python3-limits, python3-flask-limiter and python3-flask, run by
// /usr/bin/python3 on the drivers in testdata/, over redis-py), and
// scripts of our own in the shapes rate-limiting tutorials teach
// (testdata/*.lua, by EVAL and by SCRIPT LOAD + EVALSHA).
//
// The two servers keep their own clocks. Before a step, a key within the
// guard (25 ms; 50 ms for the Python drivers) of expiring on either side
// is waited out, and so is a decision boundary of a script that reads the
// server's TIME (the instants its state says its answer changes at). A step
// that still runs past an expiry or a boundary (a slow machine) is not
// compared: both sides are flushed and the run goes on, counted, and too
// many fail it. The Python libraries read the time on the client: both
// sides get the same timestamp for a step. Resets may differ by a second;
// values the clocks write (PTTLs, stored timestamps, tokens) by what the
// time between the two sides' calls explains.
//
// -compat.sut=redis points side b at a second redis-server, to check the
// harness itself, and TestHarnessSeesDifferences checks that every driver
// fails when the two sides are given different limits. Randomized tests
// print their seed and replay it with -seed or RL_SEED; RL_COMPAT_STEPS
// sets the steps of a run.
package compat
