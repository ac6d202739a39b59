package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/internal/testserver"
)

const freeRule = `{"id":"free","target":"/users/*","tier":"free","key_type":"user","algo":"sliding","limit":100,"window":"1m"}`

func TestRulesCRUD(t *testing.T) {
	n, _ := start(t, testserver.Options{})
	u := n.URL + "/rules"
	expect(t, "list empty", do(t, "GET", u, "", ""), 200, "[]")
	r := do(t, "POST", u, freeRule, "")
	expect(t, "create", r, 201, `"id":"free"`, `"burst":0`, `"shadow":false`)
	if loc := r.header.Get("Location"); loc != "/rules/free" {
		t.Errorf("Location %q", loc)
	}
	expect(t, "create again", do(t, "POST", u, freeRule, ""), 409, `rule already exists: \"free\"`)
	expect(t, "get", do(t, "GET", u+"/free", "", ""), 200, `"limit":100`)
	expect(t, "get absent", do(t, "GET", u+"/nope", "", ""), 404, `{"error":"no such rule: \"nope\""}`)
	replaced := strings.Replace(freeRule, `"limit":100`, `"limit":50`, 1)
	expect(t, "replace", do(t, "PUT", u+"/free", replaced, ""), 200, `"limit":50`)
	noID := `{"target":"*","tier":"*","key_type":"ip","algo":"TOKEN","limit":10,"window":"1s","burst":20}`
	expect(t, "put new, id from path", do(t, "PUT", u+"/per-ip", noID, ""), 201, `"id":"per-ip"`, `"algo":"token"`)
	expect(t, "put id mismatch", do(t, "PUT", u+"/other", freeRule, ""), 400, `id \"free\" in the body does not match \"other\" in the path`)
	expect(t, "list", do(t, "GET", u, "", ""), 200, `[{"id":"free",`, `{"id":"per-ip",`)
	expect(t, "delete", do(t, "DELETE", u+"/free", "", ""), 204)
	expect(t, "delete again", do(t, "DELETE", u+"/free", "", ""), 404, "no such rule")
	expect(t, "get deleted", do(t, "GET", u+"/free", "", ""), 404)
	expect(t, "patch", do(t, "PATCH", u+"/per-ip", noID, ""), 405, "use GET, PUT, DELETE")
	expect(t, "delete collection", do(t, "DELETE", u, "", ""), 405, "use GET, POST")
	if got := n.Metric(t, "rlserver_rules", nil); got != 1 {
		t.Errorf("rlserver_rules = %v", got)
	}
}

func TestInvalidRulesNameTheField(t *testing.T) {
	n, _ := start(t, testserver.Options{})
	u := n.URL + "/rules"
	for _, tt := range []struct{ body, want string }{
		{strings.Replace(freeRule, `"limit":100`, `"limit":-1`, 1), `limit: must be a positive integer`},
		{strings.Replace(freeRule, `"limit":100`, `"limit":"100"`, 1), `limit: has the wrong type (want an integer, got string)`},
		{strings.Replace(freeRule, `"window":"1m"`, `"window":"1 minute"`, 1), `window: must be a duration`},
		{strings.Replace(freeRule, `"algo":"sliding"`, `"algo":"bucket"`, 1), `algo: must be one of fixed, sliding`},
		{strings.Replace(freeRule, `"target":"/users/*"`, `"target":"/a*b"`, 1), `target: must be an exact path`},
		{strings.Replace(freeRule, `"tier":"free"`, `"tier":""`, 1), `tier: must be a tier name`},
		{strings.Replace(freeRule, `"key_type":"user"`, `"key_type":""`, 1), `key_type: must be a key type`},
		{strings.Replace(freeRule, `"id":"free"`, `"id":"a:b"`, 1), `id: must be 1 to 64`},
		{strings.Replace(freeRule, `"limit":100`, `"limit":100,"burst":5`, 1), `burst: must be a non-negative integer`},
		{strings.Replace(freeRule, `"limit":100`, `"limit":100,"colour":"red"`, 1), `colour: is not a rule field`},
		{strings.Replace(freeRule, `"limit":100`, `"limit":100,"shadow":1`, 1), `shadow: has the wrong type (want true or false, got number)`},
		{`{"id":"free",`, `malformed JSON`},
		{`[]`, `want a JSON object`},
		{``, `empty body`},
	} {
		expect(t, tt.body, do(t, "POST", u, tt.body, ""), 400, tt.want)
	}
	expect(t, "log above --max-log-limit", do(t, "POST", u,
		`{"id":"l","target":"*","tier":"*","key_type":"ip","algo":"log","limit":20000,"window":"1m"}`, ""), 400, "--max-log-limit")
	expect(t, "1 MiB body", do(t, "POST", u, `{"id":"`+strings.Repeat("x", 1<<20)+`"}`, ""), 413, "larger than 1 MiB")
}

func TestRuleWritesNeedTheAdminToken(t *testing.T) {
	n, _ := start(t, testserver.Options{AdminToken: "adm"})
	u := n.URL + "/rules"
	r := do(t, "POST", u, freeRule, "")
	expect(t, "no token", r, 401, "Bearer <admin-token>")
	if r.header.Get("WWW-Authenticate") == "" {
		t.Error("401 without WWW-Authenticate")
	}
	expect(t, "wrong token", do(t, "POST", u, freeRule, "nope"), 401)
	expect(t, "admin token", do(t, "POST", u, freeRule, "adm"), 201)
	expect(t, "put without token", do(t, "PUT", u+"/free", freeRule, ""), 401)
	expect(t, "delete without token", do(t, "DELETE", u+"/free", "", "nope"), 401)
	expect(t, "reads are open", do(t, "GET", u+"/free", "", ""), 200)
	expect(t, "delete with token", do(t, "DELETE", u+"/free", "", "adm"), 204)
}

func TestRequirePassGuardsReadsAndChecks(t *testing.T) {
	n, _ := start(t, testserver.Options{RequirePass: "pw", AdminToken: "adm"})
	check := `{"key":"k","algo":"fixed","limit":5,"window":"1m"}`
	expect(t, "check without", do(t, "POST", n.URL+"/v1/check", check, ""), 401, "Bearer <requirepass>")
	expect(t, "check with requirepass", do(t, "POST", n.URL+"/v1/check", check, "pw"), 200)
	expect(t, "check with admin token", do(t, "POST", n.URL+"/v1/check", check, "adm"), 200)
	expect(t, "rules without", do(t, "GET", n.URL+"/rules", "", ""), 401)
	expect(t, "rules with requirepass", do(t, "GET", n.URL+"/rules", "", "pw"), 200)
	expect(t, "write with requirepass", do(t, "POST", n.URL+"/rules", freeRule, "pw"), 401, "admin-token")
}

// TestHTTPAndRESPAgree: a rule written through one API reads the same
// through the other.
func TestHTTPAndRESPAgree(t *testing.T) {
	n, _ := start(t, testserver.Options{})
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr})
	defer rdb.Close()
	ctx := context.Background()
	created := do(t, "POST", n.URL+"/rules", freeRule, "")
	expect(t, "create", created, http.StatusCreated)
	got, err := rdb.Do(ctx, "RL.RULE.GET", "free").Text()
	if err != nil || got+"\n" != created.body {
		t.Errorf("RESP GET %q, %v; HTTP POST returned %q", got, err, created.body)
	}
	viaRESP := `{"target":"/login","tier":"*","key_type":"ip","algo":"gcra","limit":5,"window":"1s","shadow":true}`
	if added, err := rdb.Do(ctx, "RL.RULE.SET", "login", viaRESP).Int(); err != nil || added != 1 {
		t.Fatalf("RL.RULE.SET: %v %v", added, err)
	}
	expect(t, "HTTP GET of a RESP rule", do(t, "GET", n.URL+"/rules/login", "", ""), 200,
		`{"id":"login","target":"/login","tier":"*","key_type":"ip","algo":"gcra","limit":5,"window":"1s","burst":0,"shadow":true}`)
	list, err := rdb.Do(ctx, "RL.RULE.LIST").StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	if want := "[" + strings.Join(list, ",") + "]\n"; do(t, "GET", n.URL+"/rules", "", "").body != want {
		t.Errorf("GET /rules differs from RL.RULE.LIST %q", want)
	}
	expect(t, "HTTP DELETE", do(t, "DELETE", n.URL+"/rules/login", "", ""), 204)
	if v, err := rdb.Do(ctx, "RL.RULE.GET", "login").Result(); err != redis.Nil {
		t.Errorf("RL.RULE.GET after HTTP DELETE: %v %v", v, err)
	}
}
