//go:build race

package server

// raceEnabled says that the race detector is on. It makes sync.Pool drop
// a quarter of what it is given, at random, so that a test of reuse
// through a pool cannot count on it.
const raceEnabled = true
