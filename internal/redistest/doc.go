// Package redistest starts a throwaway redis-server for tests.
//
// Start runs the redis-server found on PATH (the Debian package; CI installs
// it) on a free 127.0.0.1 port with persistence off and a temporary working
// directory, waits until it answers PING, and stops it when the test ends,
// all through internal/rlproc.
// Without redis-server the test fails, naming the fix, unless the
// environment sets RLSERVER_SKIP_REDIS=1, in which case it is skipped.
//
// FreePort and Ping, which are internal/rlproc's (the harness of real
// rlserver processes), serve tests that start other Redis-protocol servers
// the same way.
package redistest
