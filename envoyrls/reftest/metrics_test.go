package reftest

import (
	"bufio"
	"errors"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testutil"
)

// scrape returns s's exposition lines (no comments) that start with one
// of prefixes.
func scrape(t *testing.T, s *side, prefixes ...string) []string {
	t.Helper()
	resp, err := http.Get(s.metrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				out = append(out, line)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestMetricsNames: after the same traffic, the reference's Prometheus
// series of the descriptors (names, labels, values) and of its
// configuration loads are among rlserver's.
func TestMetricsNames(t *testing.T) {
	yaml := `domain: met
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: t
    value: acme
    descriptors:
      - key: u
        rate_limit: {unit: minute, requests_per_unit: 2}
  - key: s
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
` + probe
	p := startPair(t, "met", yaml, opts{steps: 10 * time.Second})
	var steps []step
	for i := 0; i < 7; i++ {
		steps = append(steps, step{"a", req("met", desc("a", "1")), nil})
	}
	for i := 0; i < 3; i++ {
		steps = append(steps, step{"t.u", req("met", desc("t", "acme", "u", "x")), nil})
		steps = append(steps, step{"s", req("met", desc("s", "1")), nil})
	}
	steps = append(steps, step{"unknown domain", req("nowhere", desc("a", "1")), nil})
	p.run(steps...)
	prefixes := []string{"ratelimit_service_rate_limit_", "ratelimit_service_config_load_", "ratelimit_service_total_requests",
		"ratelimit_service_response_time_seconds"}
	var ref []string
	// The reference's stats reach its exporter when they are flushed,
	// every half second (STATS_FLUSH_INTERVAL), one counter after another:
	// until every step has been counted, a scrape may hold only some of
	// them, and a scrape during a flush may hold a step's total_hits
	// without its over_limit (a fresh-clone run saw over_limit 1 of 2 for
	// key s). So the wait also wants two scrapes a flush apart to agree.
	// Past 20 s, the comparison below shows what is missing.
	var last string
	testutil.Poll(20*time.Second, func() error {
		ref = scrape(t, p.ref, prefixes...)
		j := strings.Join(ref, "\n")
		all := strings.Contains(j, "ratelimit_service_total_requests")
		for _, hits := range []string{`key1="a"} 7`, `key1="s"} 3`, `key1="t_acme",key2="u"} 3`} {
			all = all && strings.Contains(j, `ratelimit_service_rate_limit_total_hits{domain="met",`+hits)
		}
		if !all {
			return errors.New("not every step counted yet")
		}
		if stable := stableSeries(j); stable != last {
			last = stable
			time.Sleep(600 * time.Millisecond) // a flush interval and more
			return errors.New("the reference's series still moving")
		}
		return nil
	})
	// The calls counted include the probes waitLoaded sent until each had
	// its configuration, which may differ, and times differ: these series
	// are compared without their values.
	noValue := func(l string) string {
		if strings.HasPrefix(l, "ratelimit_service_total_requests") || strings.HasPrefix(l, "ratelimit_service_response_time_seconds") {
			return l[:strings.LastIndexByte(l, ' ')]
		}
		return l
	}
	for i := range ref {
		ref[i] = noValue(ref[i])
	}
	ours := map[string]bool{}
	for _, l := range scrape(t, p.ours, prefixes...) {
		ours[noValue(l)] = true
	}
	t.Logf("the reference's series:\n%s", strings.Join(ref, "\n"))
	if testing.Verbose() {
		t.Logf("everything the reference names ratelimit_*:\n%s", strings.Join(scrape(t, p.ref, "ratelimit"), "\n"))
		t.Logf("rlserver's ratelimit_*:\n%s", strings.Join(scrape(t, p.ours, "ratelimit"), "\n"))
	}
	var missing []string
	for _, l := range ref {
		if !ours[l] {
			missing = append(missing, l)
		}
	}
	if len(ref) == 0 || len(missing) > 0 {
		t.Fatalf("rlserver lacks %d of the reference's %d series:\n%s\nrlserver's:\n%s", len(missing), len(ref),
			strings.Join(missing, "\n"), strings.Join(scrape(t, p.ours, prefixes...), "\n"))
	}
}

// stableSeries is the series of a scrape whose values must stop moving once
// every step is counted: all of them but the request counts and times,
// which the probes of other tests' waits may still change.
func stableSeries(scraped string) string {
	var keep []string
	for _, l := range strings.Split(scraped, "\n") {
		if !strings.HasPrefix(l, "ratelimit_service_total_requests") && !strings.HasPrefix(l, "ratelimit_service_response_time_seconds") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
