// Package readme holds the test that keeps the README true: it runs every
// ```console block of README.md against real servers and compares what
// each command prints with what the README shows (see readme_test.go and
// the README's "The examples are tested" section for the rules).
package readme
