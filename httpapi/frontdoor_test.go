package httpapi_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/scaling"
	"github.com/rlserver/rlserver/internal/testserver"
	"github.com/rlserver/rlserver/shards"
)

// Regression tests of issue 10 ("hold the front door") for the HTTP API,
// over a real socket.

// Item 6: POST /v1/checkrules was quadratic in the number of identifiers
// (60,000 took seconds). Identifiers are now found through an index once
// there are more than a few: 60,000 cost about 8 times what 7,500 do.
func TestCheckRulesWithManyIdentifiersIsAnsweredAtOnce(t *testing.T) {
	n, _ := start(t, testserver.Options{})
	r := do(t, "PUT", n.URL+"/rules/per-user", `{"target":"*","tier":"*","key_type":"user","algo":"fixed","limit":10,"window":"1m"}`, "")
	expect(t, "rule", r, 201)
	remaining := 10
	scaling.Linear(t, 60000, time.Second, func(ids int) {
		var body strings.Builder
		body.WriteString(`{"target":"/x","tier":"free","ids":{"user":"u1"`)
		for i := 0; i < ids; i++ {
			body.WriteString(`,"t` + strconv.Itoa(i) + `":"v"`)
		}
		body.WriteString(`}}`)
		r = do(t, "POST", n.URL+"/v1/checkrules", body.String(), "")
		remaining--
		expect(t, "checkrules", r, 200, `"remaining":`+strconv.Itoa(remaining)+`,`, `"rule":"per-user"`)
	})
}

// send posts body to url with the given Content-Type header ("" sends
// none).
func send(t *testing.T, method, url, contentType, body string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(data)}
}

// Item 9, HTTP side: the API took text/plain on POST and PUT, which any
// web page can send cross-site without asking, so a page could change
// rules or charge limits; it now answers 415 to any body not declared
// application/json, and changes nothing.
func TestBodiesMustBeDeclaredJSON(t *testing.T) {
	n, _ := start(t, testserver.Options{})
	check := `{"key":"k","algo":"fixed","limit":3,"window":"10s"}`
	rule := `{"target":"*","tier":"*","key_type":"user","algo":"fixed","limit":10,"window":"1m"}`
	for _, ct := range []string{"", "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
		expect(t, "check as "+ct, send(t, "POST", n.URL+"/v1/check", ct, check), 415, "Content-Type: application/json")
		expect(t, "checkrules as "+ct, send(t, "POST", n.URL+"/v1/checkrules", ct, `{"target":"/","tier":"t","ids":{"user":"u"}}`), 415)
		expect(t, "POST /rules as "+ct, send(t, "POST", n.URL+"/rules", ct, `{"id":"r1",`+rule[1:]), 415)
		expect(t, "PUT /rules/r2 as "+ct, send(t, "PUT", n.URL+"/rules/r2", ct, rule), 415)
	}
	expect(t, "no rule was made", send(t, "GET", n.URL+"/rules", "", ""), 200, "[]")
	expect(t, "nothing was charged", send(t, "POST", n.URL+"/v1/check", "application/json; charset=utf-8", check), 200, `"remaining":2`)
}

// Item 9: duplicate JSON keys were accepted, the last one winning
// ({"cost":0,"cost":5} charged 5); they are a 400 now, naming the key,
// in checks, rule checks and rules alike.
func TestDuplicateJSONKeysAreRefused(t *testing.T) {
	n, _ := start(t, testserver.Options{})
	for _, c := range []struct{ url, method, body, want string }{
		{"/v1/check", "POST", `{"key":"k","algo":"fixed","limit":10,"window":"10s","cost":0,"cost":5}`, "cost: is given twice"},
		{"/v1/check", "POST", `{"key":"k","algo":"fixed","limit":10,"window":"10s","cost":0,"Cost":5}`, "Cost: is given twice"},
		{"/v1/checkrules", "POST", `{"target":"/","tier":"t","ids":{"user":"a","user":"b"}}`, "user: is given twice"},
		{"/rules/r", "PUT", `{"target":"*","tier":"*","key_type":"user","algo":"fixed","limit":10,"limit":1000,"window":"1m"}`, "limit: is given twice"},
	} {
		expect(t, c.body, send(t, c.method, n.URL+c.url, "application/json", c.body), 400, c.want)
	}
	expect(t, "nothing was charged", send(t, "POST", n.URL+"/v1/check", "application/json",
		`{"key":"k","algo":"fixed","limit":10,"window":"10s","cost":0}`), 200, `"remaining":10`)
	expect(t, "no rule was made", send(t, "GET", n.URL+"/rules", "", ""), 200, "[]")
	// Keys in different objects, or repeated inside an array, are fine.
	expect(t, "nested", send(t, "POST", n.URL+"/v1/checkrules", "application/json",
		`{"target":"/","tier":"t","ids":{"target":"x","tier":"y"}}`), 200)
}

// --maxmemory-policy noeviction over HTTP: a check of a new key beyond
// the bound is 503 with Redis's OOM error; existing keys go on.
func TestNoEvictionIs503(t *testing.T) {
	n, _ := start(t, testserver.Options{Shards: 1, MaxMemory: 64 << 10, Policy: shards.NoEviction})
	expect(t, "first", send(t, "POST", n.URL+"/v1/check", "application/json", `{"key":"first","algo":"fixed","limit":5,"window":"1h"}`), 200)
	for i := 0; ; i++ {
		r := send(t, "POST", n.URL+"/v1/check", "application/json", `{"key":"k`+strconv.Itoa(i)+`","algo":"fixed","limit":5,"window":"1h"}`)
		if r.status == 503 {
			expect(t, "a new key beyond the bound", r, 503, "OOM command not allowed when used memory > 'maxmemory'.")
			break
		}
		if r.status != 200 || i > 100000 {
			t.Fatalf("key %d: %d %s", i, r.status, r.body)
		}
	}
	expect(t, "first again", send(t, "POST", n.URL+"/v1/check", "application/json", `{"key":"first","algo":"fixed","limit":5,"window":"1h"}`), 200, `"remaining":3`)
}
