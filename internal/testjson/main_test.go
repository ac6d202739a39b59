package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestReport: a passing test's logs are kept back, a failing test's shown
// (without the === lines), package lines printed, times written for
// top-level tests only; a package that ends without a result, or a test a
// panic ended, fails and shows what was printed.
func TestReport(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"start","Package":"p"}`,
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:1: quiet log\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA","Elapsed":1.5}`,
		`{"Action":"output","Package":"p","Test":"TestB/sub","Output":"    b_test.go:9: sub log\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB/sub","Elapsed":0.25}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"--- FAIL: TestB (0.30s)\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB","Elapsed":0.3}`,
		`{"Action":"output","Package":"p","Output":"PASS\n"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t1.9s\n"}`,
		`{"Action":"fail","Package":"p","Elapsed":1.9}`,
		`{"Action":"start","Package":"q"}`,
		`{"Action":"output","Package":"q","Test":"TestC","Output":"panic: boom\n"}`,
		`{"Action":"fail","Package":"q","Elapsed":0.1}`,
		`{"Action":"start","Package":"r"}`,
		`{"Action":"output","Package":"r","Test":"TestD","Output":"still running\n"}`,
		`# a build error as text`,
	}, "\n")
	var out, times bytes.Buffer
	failed, err := report(strings.NewReader(in), &out, &times)
	if err != nil || !failed {
		t.Fatalf("report: failed %v, err %v; want a failure", failed, err)
	}
	got := out.String()
	for _, want := range []string{"sub log", "--- FAIL: TestB", "FAIL\tp\t1.9s", "panic: boom", "r ended without a result", "still running", "# a build error as text"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"quiet log", "=== RUN", "PASS\n"} {
		if strings.Contains(got, not) {
			t.Errorf("output has %q:\n%s", not, got)
		}
	}
	if want := "1.50\tp\tTestA\n0.30\tp\tTestB\n"; times.String() != want {
		t.Errorf("times %q, want %q", times.String(), want)
	}
	failed, err = report(strings.NewReader(`{"Action":"start","Package":"p"}`+"\n"+`{"Action":"pass","Package":"p","Test":"TestA"}`+"\n"+`{"Action":"pass","Package":"p"}`), &out, nil)
	if failed || err != nil {
		t.Errorf("a passing run: failed %v, err %v", failed, err)
	}
}
