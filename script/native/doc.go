// Package native runs the scripts of the popular rate-limiter libraries
// without the interpreter: a registry, by sha1, of script.Runner handlers
// that do what each script does, call for call, to the same Redis values
// (same commands on the same keys, so the same types, TTLs and journal
// records) and answer what it answers, number formatting included.
//
// The scripts are recognised by their sha1 alone; their text stays in the
// libraries (the tests read it from the installed package or Go module and
// check that each sha is the sha1 of that text). A handler takes on the
// inputs the libraries send (plain decimal numbers, values of the types
// the script writes); anything else it hands back to the interpreter
// before it has changed anything (script.Exec.Interpret), so that odd
// arguments and wrong types get the script's own replies and errors.
//
// Register installs every handler in an Engine; Scripts lists them.
package native
