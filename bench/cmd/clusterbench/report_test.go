package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReport builds a report from made-up samples of three rounds,
// writes it, and rewrites it from its JSON.
func TestReport(t *testing.T) {
	var samples []Sample
	for round := 1; round <= 3; round++ {
		for _, s := range setups {
			for _, tool := range []string{toolRL, toolRB} {
				rps := 1000.0 * float64(round)
				if s.Cluster {
					rps *= 0.4
				}
				samples = append(samples, Sample{Setup: s.Name, Tool: tool, Round: round, RPS: rps, P99: 100,
					ServerCPU: 1, NodeCPU: []float64{0.5, 0.3, 0.2}})
			}
		}
	}
	rep := &report{Machine: map[string]string{}, Options: options{rounds: 3}.summary(), Rows: medians(samples), Samples: samples}
	rep.evaluate()
	if len(rep.Rows) != 8 || len(rep.Targets) != 4 {
		t.Fatalf("%d rows, %d targets", len(rep.Rows), len(rep.Targets))
	}
	if r := rep.row("cluster fast", toolRL); r.RPS != 800 || len(r.RoundsRPS) != 3 {
		t.Fatalf("cluster fast: %+v", r)
	}
	for _, tg := range rep.Targets {
		if tg.Value != 0.4 || tg.Met != strings.Contains(tg.Name, "strong") {
			t.Errorf("%+v", tg)
		}
	}
	dir := t.TempDir()
	if err := rep.write(dir); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "cluster.md"))
	if err := rewrite(filepath.Join(dir, "cluster.json"), dir); err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(filepath.Join(dir, "cluster.md"))
	if string(md) != string(again) || !strings.Contains(string(md), "| cluster fast vs single fast, rlbench | ≥ 0.5× | 0.40×") {
		t.Fatalf("markdown:\n%s", md)
	}
}
