package httpapi_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/internal/logbuf"
	"github.com/rlserver/rlserver/internal/testserver"
)

// TestHTTPChecksCounted: checks over HTTP count in the same metrics and
// INFO fields as checks over RESP.
func TestHTTPChecksCounted(t *testing.T) {
	n, _ := start(t, testserver.Options{AdminToken: "s3cret"})
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr})
	t.Cleanup(func() { rdb.Close() })
	metric := func(name string, labels map[string]string) float64 { return n.Metric(t, name, labels) }

	body := `{"key":"m","algo":"fixed","limit":2,"window":"10s"}`
	for i := 0; i < 3; i++ {
		do(t, "POST", n.URL+"/v1/check", body, "")
	}
	if err := rdb.Do(ctx, "RL.CHECK", "m2", "fixed", 2, "10s").Err(); err != nil {
		t.Fatal(err)
	}
	if got := metric("rlserver_checks_total", map[string]string{"algo": "fixed", "result": "allowed"}); got != 3 {
		t.Errorf("checks_total{fixed,allowed} = %v, want 3 (2 over HTTP, 1 over RESP)", got)
	}
	if got := metric("rlserver_checks_total", map[string]string{"algo": "fixed", "result": "denied"}); got != 1 {
		t.Errorf("checks_total{fixed,denied} = %v, want 1", got)
	}
	info, err := rdb.Info(ctx, "rlserver").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"checks_fixed_allowed:3\r\n", "checks_fixed_denied:1\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO rlserver lacks %q:\n%s", want, info)
		}
	}

	// Rule checks: the enforcing rule denies the second request; the shadow
	// rule would have denied both.
	for _, r := range []string{
		`{"id":"one","target":"/x","tier":"*","key_type":"user","algo":"fixed","limit":1,"window":"1m"}`,
		`{"id":"zero","target":"/x","tier":"*","key_type":"user","algo":"token","limit":1,"window":"1m","shadow":true}`,
	} {
		expect(t, "create rule", do(t, "POST", n.URL+"/rules", r, "s3cret"), 201)
	}
	check := `{"target":"/x","tier":"free","ids":{"user":"u1"},"cost":1}`
	expect(t, "first", do(t, "POST", n.URL+"/v1/checkrules", check, ""), 200)
	expect(t, "second", do(t, "POST", n.URL+"/v1/checkrules", check, ""), 429)
	for result, want := range map[string]float64{"allowed": 1, "denied": 1} {
		if got := metric("rlserver_rule_checks_total", map[string]string{"result": result}); got != want {
			t.Errorf("rule_checks_total{%s} = %v, want %v", result, got, want)
		}
	}
	// The first check charged the shadow bucket's only token; the second
	// was denied by "one", and "zero" would have denied it too.
	if got := metric("rlserver_rule_shadow_denials_total", map[string]string{"rule": "zero"}); got != 1 {
		t.Errorf("shadow_denials_total{zero} = %v, want 1", got)
	}
}

// TestHTTPRuleChangesLogged: rule changes over HTTP are logged as those
// over RESP are.
func TestHTTPRuleChangesLogged(t *testing.T) {
	var logs logbuf.Buffer
	n, _ := start(t, testserver.Options{AdminToken: "s3cret", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	rule := `{"target":"/x","tier":"*","key_type":"user","algo":"fixed","limit":1,"window":"1m"}`
	expect(t, "create", do(t, "POST", n.URL+"/rules", `{"id":"a",`+rule[1:], "s3cret"), 201)
	expect(t, "replace", do(t, "PUT", n.URL+"/rules/a", rule, "s3cret"), 200)
	expect(t, "delete", do(t, "DELETE", n.URL+"/rules/a", "", "s3cret"), 204)
	expect(t, "bad", do(t, "PUT", n.URL+"/rules/b", `{}`, "s3cret"), 400)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	want := []string{`msg="rule set" id=a added=true client=127.0.0.1:`, `msg="rule set" id=a added=false client=127.0.0.1:`,
		`msg="rule deleted" id=a client=127.0.0.1:`}
	if len(lines) != len(want) {
		t.Fatalf("log has %d lines, want %d:\n%s", len(lines), len(want), logs.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) || !strings.HasSuffix(lines[i], " via=http") {
			t.Errorf("log line %d: %q, want it to contain %q and end with via=http", i, lines[i], w)
		}
	}
}
