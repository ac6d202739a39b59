// Command testjson reads `go test -json` on its standard input and prints
// what `go test` without -v would have printed: each package's ok or FAIL
// line, and the output of the tests that failed (the passing ones' logs
// are kept back). With -times FILE it also appends each test's elapsed
// time to FILE, one line each (seconds, package, test), so that a full run
// of the suite yields its timing table (scripts/test.sh, docs/testing.md).
// It exits 1 if any test or package failed, or the input ended mid-run.
//
//	go test -json ./... | go run ./internal/testjson -times /tmp/times.txt
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// event is one line of test2json's output.
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

func main() {
	times := flag.String("times", "", "append each test's elapsed seconds, package and name to this file")
	flag.Parse()
	var tw io.Writer
	if *times != "" {
		f, err := os.OpenFile(*times, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testjson:", err)
			os.Exit(2)
		}
		defer f.Close()
		tw = f
	}
	failed, err := report(os.Stdin, os.Stdout, tw)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testjson:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// report copies in's events to out as non-verbose go test prints them,
// and each finished test's time to times (if not nil). It reports whether
// anything failed.
func report(in io.Reader, out, times io.Writer) (bool, error) {
	held := map[string][]string{} // package/test: output kept back until the test ends
	open := map[string]bool{}     // packages started and not ended
	failed := false
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			fmt.Fprintf(out, "%s\n", line) // a build error, printed by go test as text
			continue
		}
		key := e.Package + "\x00" + e.Test
		switch e.Action {
		case "start":
			open[e.Package] = true
		case "output":
			if e.Test == "" {
				if !quiet(e.Output) {
					fmt.Fprint(out, e.Output)
				}
				continue
			}
			held[key] = append(held[key], e.Output)
		case "build-output":
			fmt.Fprint(out, e.Output)
		case "build-fail":
			failed = true
		case "pass", "skip", "fail":
			if e.Test == "" {
				delete(open, e.Package)
				if e.Action == "fail" {
					failed = true
					flushPackage(out, held, e.Package) // tests a panic or timeout ended
				}
				continue
			}
			if e.Action == "fail" {
				failed = true
				for _, o := range held[key] {
					if !strings.HasPrefix(strings.TrimSpace(o), "=== ") {
						fmt.Fprint(out, o)
					}
				}
			}
			delete(held, key)
			if times != nil && !strings.Contains(e.Test, "/") {
				fmt.Fprintf(times, "%.2f\t%s\t%s\n", e.Elapsed, e.Package, e.Test)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return true, err
	}
	for pkg := range open {
		fmt.Fprintf(out, "testjson: %s ended without a result (a crash or a timeout?)\n", pkg)
		flushPackage(out, held, pkg)
		failed = true
	}
	return failed, nil
}

// flushPackage prints what the unfinished tests of pkg printed.
func flushPackage(out io.Writer, held map[string][]string, pkg string) {
	for key, lines := range held {
		if strings.HasPrefix(key, pkg+"\x00") {
			fmt.Fprint(out, strings.Join(lines, ""))
			delete(held, key)
		}
	}
}

// quiet reports whether a package-level line is one that go test without
// -v does not print (the verbose run's PASS line).
func quiet(s string) bool {
	t := strings.TrimSpace(s)
	return t == "PASS" || strings.HasPrefix(t, "=== ")
}
