package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rlserver/rlserver/httpapi"
	"github.com/rlserver/rlserver/shards"
)

// TestOnCheckSeesEachCheck: Config.OnCheck runs once for each check (POST
// /v1/check, forward auth, also under Envoy's ext_authz prefix), and not
// for probes or metrics.
func TestOnCheckSeesEachCheck(t *testing.T) {
	var calls atomic.Int64
	store := shards.NewStore(shards.Options{})
	h := httpapi.New(httpapi.Config{Checker: store, OnCheck: func() { calls.Add(1) }})
	do := func(method, path, body string) int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := do("POST", "/v1/check", `{"key":"k","algo":"token","limit":10,"window":"1m"}`); code != http.StatusOK {
		t.Fatalf("POST /v1/check: %d", code)
	}
	do("GET", "/v1/forward-auth?limit=10&window=1m", "")
	do("GET", "/v1/forward-auth/login?limit=10&window=1m", "")
	do("GET", "/healthz", "")
	do("GET", "/readyz", "")
	if n := calls.Load(); n != 3 {
		t.Fatalf("OnCheck ran %d times for three checks and two probes, want 3", n)
	}
}
