// Package readme holds the tests that keep the documentation true: they
// run every ```console block of README.md and of the pages under docs/
// against real servers and compare what each command prints with what
// the page shows (see readme_test.go, and docs/development.md's "The
// examples are tested" for the rules), and check that the README stays a
// short map of docs/ whose relative links all resolve (pages_test.go).
package readme
