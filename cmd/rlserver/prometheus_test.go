package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/rlproc"
	"github.com/rlserver/rlserver/internal/testutil"
)

// alertsFile is the shipped alerting rules, from cmd/rlserver.
const alertsFile = "../../deploy/prometheus/alerts.yml"

// TestAlertRulesPromtool: promtool accepts deploy/prometheus/alerts.yml
// and its unit tests (alerts_test.yml: node down, refusing writes,
// replica lag, memory near --maxmemory, denial ratio jump) pass.
func TestAlertRulesPromtool(t *testing.T) {
	parallel(t)
	promtool := testutil.RequireTool(t, "promtool", "apt-get install prometheus")
	if out, err := exec.Command(promtool, "check", "rules", alertsFile).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	cmd := exec.Command(promtool, "test", "rules", "alerts_test.yml")
	cmd.Dir = filepath.Dir(alertsFile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// alertMetrics returns the rlserver_* metric names alerts.yml uses.
func alertMetrics(t *testing.T) []string {
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`\brlserver_[a-z0-9_]+`).FindAllString(string(b), -1) {
		seen[m] = true
	}
	var out []string
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// promQuery runs an instant PromQL query through Prometheus's HTTP API
// and returns its vector's samples as label set -> value.
func promQuery(base, q string) (map[string]float64, error) {
	res, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var body struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", q, body.Error)
	}
	out := map[string]float64{}
	for _, r := range body.Data.Result {
		v, _ := strconv.ParseFloat(fmt.Sprint(r.Value[1]), 64)
		out[fmt.Sprint(r.Metric)] = v
	}
	return out, nil
}

// TestPrometheusScrapesCluster: a real Prometheus scrapes a three-node
// cluster of real processes every second, with deploy/prometheus/alerts.yml
// loaded. Every rlserver_* metric the alerts name is exported by each
// node; after the test's checks, sum(rlserver_checks_total) over the
// Prometheus HTTP API is at least their number; up is 1 for the three;
// every rule evaluates without error and no alert fires on the healthy
// cluster.
func TestPrometheusScrapesCluster(t *testing.T) {
	parallel(t)
	promBin := testutil.RequireTool(t, "prometheus", "apt-get install prometheus")
	bin := buildBinary(t)
	rulesFile := writeFile(t, fileRule("r1", "/p", 100))
	procs := startNodes(t, bin, 3, 4, "--rules", rulesFile, "--maxmemory", "256mb")
	waitBalanced(t, procs, 60*time.Second)

	for _, p := range procs {
		page := httpGet(t, "http://"+p.http+"/metrics")
		for _, m := range alertMetrics(t) {
			if !regexp.MustCompile(`(?m)^` + m + `[{ ]`).MatchString(page) {
				t.Errorf("alerts.yml uses %s, which %s does not export", m, p.http)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	dir := t.TempDir()
	alerts, err := filepath.Abs(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, p := range procs {
		targets = append(targets, fmt.Sprintf("%q", p.http))
	}
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [%q]\n"+
		"scrape_configs:\n  - job_name: rlserver\n    static_configs:\n      - targets: [%s]\n", alerts, strings.Join(targets, ", "))
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	web := testutil.FreeAddr(t)
	prom, err := rlproc.Start("prometheus", promBin, []string{"--config.file", cfgFile, "--storage.tsdb.path", filepath.Join(dir, "tsdb"),
		"--web.listen-address", web}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prom.Kill)
	// promUp fails the test, with Prometheus's log, once it has exited.
	promUp := func() {
		t.Helper()
		if !prom.Alive() {
			t.Fatalf("prometheus exited: %v\n%s", prom.Err(), prom.Log())
		}
	}
	base := "http://" + web

	const checks = 500
	c := clusterClient(t, procs)
	ctx := context.Background()
	for i := 0; i < checks; i++ {
		if err := c.Do(ctx, "RL.CHECK", fmt.Sprintf("prom-%d", i%37), "fixed", 1000, "1h").Err(); err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
	}
	var sum map[string]float64
	testutil.WaitFor(t, 60*time.Second, fmt.Sprintf("Prometheus to count %d checks", checks), func() bool {
		promUp()
		sum, err = promQuery(base, "sum(rlserver_checks_total)")
		return err == nil && len(sum) == 1 && sum["map[]"] >= checks
	})
	up, err := promQuery(base, `up{job="rlserver"} == 1`)
	if err != nil || len(up) != 3 {
		t.Fatalf("up == 1 for %d targets (%v), want 3: %v", len(up), err, up)
	}
	// Every rule has been evaluated, without error.
	testutil.WaitFor(t, 30*time.Second, "every rule evaluated without error", func() bool {
		promUp()
		res, err := http.Get(base + "/api/v1/rules")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var body struct {
			Data struct {
				Groups []struct {
					Rules []struct {
						Name, Health, LastError string
						State                   string
					}
				}
			}
		}
		if json.Unmarshal(b, &body) != nil {
			return false
		}
		n := 0
		for _, g := range body.Data.Groups {
			for _, r := range g.Rules {
				if r.Health != "ok" {
					if r.Health == "err" {
						t.Fatalf("rule %s: %s", r.Name, r.LastError)
					}
					return false
				}
				if r.State == "firing" || r.State == "pending" {
					t.Fatalf("alert %s is %s on a healthy cluster", r.Name, r.State)
				}
				n++
			}
		}
		return n == ruleCount(t)
	})
	t.Logf("Prometheus: sum(rlserver_checks_total) = %v after %d checks", sum["map[]"], checks)
}

// ruleCount returns the number of rules (records and alerts) in
// alerts.yml.
func ruleCount(t *testing.T) int {
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	return len(regexp.MustCompile(`(?m)^\s*- (record|alert):`).FindAll(b, -1))
}
