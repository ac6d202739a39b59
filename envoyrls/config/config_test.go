package config

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
)

const sample = `domain: api
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 60}
  - key: path
    value: /login*
    rate_limit: {unit: second, requests_per_unit: 5, name: login}
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 100}
  - key: path
    value: /a*b*c
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: header
    value: gold
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 100
      algorithm: token
      burst: 20
    rate_limits:
      - {unit: hour, requests_per_unit: 1000, algorithm: sliding}
      - {unit: second, unit_multiplier: 10, requests_per_unit: 7, name: ten}
  - key: tenant
    value_to_metric: true
    descriptors:
      - key: plan
        value: free
        rate_limit: {unit: day, requests_per_unit: 0}
  - key: internal
    rate_limit: {unlimited: true}
`

func mustParse(t *testing.T, src string) *Config {
	t.Helper()
	c := Empty()
	if err := Parse(c, "test.yaml", []byte(src), Options{}); err != nil {
		t.Fatal(err)
	}
	return c
}

func entries(kv ...string) []Entry {
	var out []Entry
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, Entry{kv[i], kv[i+1]})
	}
	return out
}

// TestMatch: the most specific match, level by level, as
// envoyproxy/ratelimit finds it, and the metric key of each.
func TestMatch(t *testing.T) {
	c := mustParse(t, sample)
	cases := []struct {
		domain  string
		entries []Entry
		want    string // the matched descriptor's path; "" none
		metric  string
		share   string // Share[0] if any
	}{
		{"api", entries("remote_address", "10.0.0.1"), "remote_address", "remote_address", ""},
		{"api", entries("path", "/login/x"), "path_/login*", "path_/login*", ""},
		{"api", entries("path", "/login"), "path_/login*", "path_/login*", ""},
		{"api", entries("path", "/logi"), "", "", ""},
		{"api", entries("path", "/login/x", "user", "bob"), "path_/login*.user", "path_/login*.user", ""},
		{"api", entries("path", "/login/x", "user", "bob", "x", "y"), "", "", ""}, // deeper than the tree
		{"api", entries("path", "/a-b-c"), "path_/a*b*c", "path_/a*b*c", "/a*b*c"},
		{"api", entries("path", "/abc"), "path_/a*b*c", "path_/a*b*c", "/a*b*c"},
		{"api", entries("path", "/acb"), "", "", ""},
		{"api", entries("header", "gold"), "header_gold", "header_gold", ""},
		{"api", entries("header", "silver"), "", "", ""},
		{"api", entries("tenant", "t1"), "", "", ""}, // no limit at this level
		{"api", entries("tenant", "t1", "plan", "free"), "tenant.plan_free", "tenant_t1.plan_free", ""},
		{"api", entries("internal", "x"), "internal", "internal", ""},
		{"other", entries("remote_address", "10.0.0.1"), "", "", ""},
	}
	for _, tc := range cases {
		m := c.Match(tc.domain, tc.entries)
		got := ""
		if m.Descriptor != nil {
			got = m.Descriptor.path
		}
		share := ""
		if m.Share != nil {
			share = m.Share[0]
		}
		if got != tc.want || m.MetricKey != tc.metric || share != tc.share {
			t.Errorf("%s %v: matched %q metric %q share %q, want %q %q %q", tc.domain, tc.entries, got, m.MetricKey, share, tc.want, tc.metric, tc.share)
		}
	}
	if m := c.Match("api", entries("header", "gold")); len(m.Descriptor.Limits) != 3 {
		t.Fatalf("header_gold has %d limits, want 3", len(m.Descriptor.Limits))
	}
}

// TestLimits: the fields of rate_limit and rlserver's additions.
func TestLimits(t *testing.T) {
	c := mustParse(t, sample)
	ls := c.Match("api", entries("header", "gold")).Descriptor.Limits
	if l := ls[0]; l.Algo != engine.Token || l.Burst != 20 || l.RequestsPerUnit != 100 || l.Window() != 60e9 || l.Index != 0 {
		t.Errorf("rate_limit: %+v", l)
	}
	if l := ls[1]; l.Algo != engine.Sliding || l.Window() != 3600e9 || l.Index != 1 {
		t.Errorf("rate_limits[0]: %+v", l)
	}
	if l := ls[2]; l.Algo != engine.Fixed || l.Window() != 10e9 || l.Name != "ten" || l.Index != 2 {
		t.Errorf("rate_limits[1]: %+v", l)
	}
	if l := c.Match("api", entries("internal", "x")).Descriptor.Limits[0]; !l.Unlimited {
		t.Errorf("internal: %+v", l)
	}
	for _, u := range []string{"second", "MINUTE", "Hour", "day", "week", "month", "year"} {
		if _, ok := ParseUnit(u); !ok {
			t.Errorf("unit %s refused", u)
		}
	}
	if (&Limit{Unit: Year, UnitMultiplier: 1}).Window() != 365*86400e9 || Month.Seconds() != 30*86400 {
		t.Error("month and year are not envoyproxy/ratelimit's 30 and 365 days")
	}
}

// TestErrors: each error names the file, the line and the field.
func TestErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{"domain: \"\"\n", `test.yaml:1: domain: config file cannot have empty domain`},
		{"domain: a\ndescriptors:\n  - value: x\n", `test.yaml:3: descriptors[0].key: descriptor has empty key`},
		{"domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n",
			`test.yaml:5: descriptors[0].rate_limit.unit: invalid rate limit unit 'fortnight'`},
		{"domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      requests_per_unit: 1\n",
			`test.yaml:5: descriptors[0].rate_limit.unit: invalid rate limit unit ''`},
		{"domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}\n",
			`test.yaml:4: descriptors[0].rate_limit.unit: should not specify rate limit unit when unlimited`},
		{"domain: a\ndescriptors:\n  - key: k\n  - key: k\n", `test.yaml:4: descriptors[1]: duplicate descriptor composite key 'k'`},
		{"domain: a\ndescriptors:\n  - key: k\n    ratelimit: {}\n", `test.yaml:4: descriptors[0].ratelimit: config error, unknown key 'ratelimit'`},
		{"domain: a\ndescriptors:\n  - key: k\n    descriptors:\n      - key: j\n        rate_limit: {unit: second, requests_per_unit: -1}\n",
			`test.yaml:6: descriptors[0].descriptors[0].rate_limit.requests_per_unit: want an integer from 0 to 4294967295, got "-1"`},
		{"domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, name: n, replaces: [{name: n}]}\n",
			`replaces should not contain name of same descriptor`},
		{"domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: \"\"}]}\n",
			`should not have an empty replaces entry`},
		{"domain: a\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n", `share_threshold can only be used with wildcard values`},
		{"domain: a\ndescriptors:\n  - key: k\n    quota_mode: true\n", `test.yaml:4: descriptors[0].quota_mode: quota_mode is not supported`},
		{"domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: magic}\n",
			`descriptors[0].rate_limit.algorithm: want fixed, sliding, log, token, leaky or gcra, got "magic"`},
		{"domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, burst: 5}\n",
			`descriptors[0].rate_limit.burst: burst applies to token, leaky and gcra, not fixed`},
		{"domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, requests_per_unit: 1, unit_multiplier: 2}\n",
			`descriptors[0].rate_limit.unit_multiplier: want a window of 1 to 366 days`},
		{"domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 20000, algorithm: log}\n",
			`above the maximum for the log algorithm, 10000`},
		{"domain: a\ndescriptors:\n  - key: k\n    rate_limits:\n      - {unit: second}\n      - {unit: minute, requests_per_unit: x}\n",
			`test.yaml:6: descriptors[0].rate_limits[1].requests_per_unit: want an integer`},
		{"domain: a\ndescriptors: [\n", `test.yaml: not valid YAML`},
		{"- a\n", `test.yaml:1: want a mapping with domain and descriptors`},
	}
	for _, tc := range cases {
		err := Parse(Empty(), "test.yaml", []byte(tc.src), Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.src, err, tc.want)
		}
	}
}

// TestLoadDirectory: a directory's YAML files are read in name order; a
// domain in two files is an error naming the second.
func TestLoadDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "domain: one\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	write("b.yml", "domain: two\n")
	write("notes.txt", "not yaml: [")
	c, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Domains() != 2 || len(c.Files()) != 2 || !c.Known("one") || !c.Known("two") {
		t.Fatalf("loaded %d domains from %v", c.Domains(), c.Files())
	}
	stamp := Stamp(dir)
	write("c.yaml", "domain: one\n")
	if Stamp(dir) == stamp {
		t.Fatal("a new file left the stamp unchanged")
	}
	if _, err := Load(dir, Options{}); err == nil || !strings.Contains(err.Error(), "c.yaml:1: domain: duplicate domain 'one'") {
		t.Fatalf("duplicate domain: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml"), Options{}); err == nil {
		t.Fatal("a missing file loaded")
	}
}

// TestEnvoyproxyFormatLoads: the fields envoyproxy/ratelimit accepts and
// rlserver ignores (metadata, quota_mode: false) load.
func TestEnvoyproxyFormatLoads(t *testing.T) {
	mustParse(t, `domain: d
descriptors:
  - key: k
    value: "123"
    quota_mode: false
    metadata:
      team: {name: x, ids: [1, 2]}
    rate_limit:
      name: n
      unit: Second
      requests_per_unit: 10
      replaces:
        - name: other
  - key: n
    value: 5
    descriptors:
`)
}

// TestLoadBounded: a file, or a directory's files together, larger than
// MaxBytes is refused naming the file; /dev/zero (a path that never ends)
// is refused at the bound with little memory; a FIFO with no writer reads
// as empty, which is refused as an empty file, at once.
func TestLoadBounded(t *testing.T) {
	dir := t.TempDir()
	one := "domain: one\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n"
	two := strings.Replace(one, "one", "two", 1)
	os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(one), 0o644)
	os.WriteFile(filepath.Join(dir, "b.yaml"), []byte(two), 0o644)
	if _, err := Load(dir, Options{MaxBytes: int64(len(one) + len(two))}); err != nil {
		t.Fatalf("within the bound: %v", err)
	}
	_, err := Load(dir, Options{MaxBytes: int64(len(one) + len(two) - 1)})
	if err == nil || !strings.Contains(err.Error(), "b.yaml") || !strings.Contains(err.Error(), "--max-config-bytes") {
		t.Fatalf("the files together over the bound: %v", err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = Load("/dev/zero", Options{MaxBytes: 1 << 20})
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("/dev/zero: %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Fatalf("/dev/zero with a 1 MiB bound allocated %d bytes", grew)
	}
	fifo := filepath.Join(t.TempDir(), "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := Load(fifo, Options{}); err == nil || !strings.Contains(err.Error(), "empty") || time.Since(start) > 2*time.Second {
		t.Fatalf("a FIFO with no writer: %v after %s", err, time.Since(start))
	}
}

// TestYAML11Numbers: numbers and booleans are read as envoyproxy/ratelimit
// (yaml.v2, YAML 1.1) reads them, a repeated key takes its last value,
// and what it would read otherwise is refused with its reading named.
func TestYAML11Numbers(t *testing.T) {
	for src, want := range map[string]int64{"010": 8, "0x10": 16, "1_000": 1000, "0b11": 3, "0o17": 15, "+7": 7, "12": 12} {
		c := mustParse(t, "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: "+src+"}\n")
		if got := c.Match("a", entries("k", "v")).Descriptor.Limits[0].RequestsPerUnit; got != want {
			t.Errorf("requests_per_unit: %s is %d, want %d", src, got, want)
		}
	}
	for src, want := range map[string]bool{"yes": true, "on": true, "Y": true, "off": false, "NO": false, "true": true} {
		c := mustParse(t, "domain: a\ndescriptors:\n  - key: k\n    shadow_mode: "+src+"\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
		if got := c.Match("a", entries("k", "v")).Descriptor.ShadowMode; got != want {
			t.Errorf("shadow_mode: %s is %v, want %v", src, got, want)
		}
	}
	c := mustParse(t, "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, requests_per_unit: 3}\n")
	if got := c.Match("a", entries("k", "v")).Descriptor.Limits[0].RequestsPerUnit; got != 3 {
		t.Errorf("repeated key: %d, want the last, 3", got)
	}
	for src, want := range map[string]string{
		"1e3":  `test.yaml:4: descriptors[0].rate_limit.requests_per_unit: want an integer from 0 to 4294967295, got "1e3" (envoyproxy/ratelimit reads it as the float 1000`,
		"1:30": `test.yaml:4: descriptors[0].rate_limit.requests_per_unit: want an integer from 0 to 4294967295, got "1:30" (YAML 1.1 reads it in base 60`,
		`"5"`:  `got the string "5"`,
	} {
		err := Parse(Empty(), "test.yaml", []byte("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: "+src+"}\n"), Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", src, err, want)
		}
	}
}
