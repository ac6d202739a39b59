//go:build !race

package testutil

// Race is true when the tests run under the race detector.
const Race = false
