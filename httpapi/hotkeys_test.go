package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/internal/testserver"
)

// hotKeysBody is GET /v1/hotkeys's JSON.
type hotKeysBody struct {
	HotKeys []struct {
		Key    string `json:"key"`
		Checks int64  `json:"checks"`
		Denied int64  `json:"denied"`
	} `json:"hotkeys"`
	WindowMs int64 `json:"window_ms"`
}

func getHotKeys(t *testing.T, url string) hotKeysBody {
	t.Helper()
	r := do(t, "GET", url, "", "")
	if r.status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, r.status, r.body)
	}
	var b hotKeysBody
	if err := json.Unmarshal([]byte(r.body), &b); err != nil {
		t.Fatalf("GET %s: %q: %v", url, r.body, err)
	}
	return b
}

// TestHotKeysEndpoint: one key checked 3,000 times (over RESP, with
// go-redis) among fifty checked 20 times each comes first from GET
// /v1/hotkeys?count=3, counted within 10%; the window passes with the
// fake clock; bad counts are 400 with a JSON error.
func TestHotKeysEndpoint(t *testing.T) {
	n, clk := start(t, testserver.Options{})
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr})
	defer rdb.Close()
	ctx := context.Background()
	p := rdb.Pipeline()
	for i := 0; i < 3000; i++ {
		p.Do(ctx, "RL.CHECK", "hot", "token", 1000, 60)
		if i%60 == 0 {
			for j := 0; j < 20; j++ {
				p.Do(ctx, "RL.CHECK", fmt.Sprintf("cold:%d", i/60), "token", 1000, 60)
			}
		}
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	b := getHotKeys(t, n.URL+"/v1/hotkeys?count=3")
	if len(b.HotKeys) != 3 || b.HotKeys[0].Key != "hot" || b.WindowMs != 60000 {
		t.Fatalf("hot keys %+v, want hot first of 3, window 60000 ms", b)
	}
	if h := b.HotKeys[0]; h.Checks < 2700 || h.Checks > 3300 || h.Denied < 1800 || h.Denied > 2200 {
		t.Errorf("hot: %+v, want about 3000 checks and 2000 denied", h)
	}
	for _, r := range b.HotKeys[1:] {
		if r.Checks > 22 || r.Denied != 0 {
			t.Errorf("row %+v: want a cold key of at most 20 checks", r)
		}
	}
	if b := getHotKeys(t, n.URL+"/v1/hotkeys"); len(b.HotKeys) != 10 {
		t.Errorf("default: %d rows, want 10", len(b.HotKeys))
	}
	for _, q := range []string{"count=0", "count=-1", "count=x", "count=", "count=1&count=2", "count=1e3"} {
		r := do(t, "GET", n.URL+"/v1/hotkeys?"+q, "", "")
		if e := r.json(t)["error"]; r.status != http.StatusBadRequest || e != "bad request: count: want one positive integer" {
			t.Errorf("?%s: %d %s, want 400 with an error", q, r.status, r.body)
		}
	}
	if r := do(t, "POST", n.URL+"/v1/hotkeys", "", ""); r.status != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", r.status)
	}
	clk.Advance(61 * time.Second)
	if b := getHotKeys(t, n.URL+"/v1/hotkeys"); len(b.HotKeys) != 0 || b.HotKeys == nil {
		t.Errorf("a minute later: %+v, want an empty list", b)
	}
}

// TestHotKeysEndpointAuth: with --requirepass, reading the hot keys needs
// the check token, as reading rules does.
func TestHotKeysEndpointAuth(t *testing.T) {
	n, _ := start(t, testserver.Options{RequirePass: "pw"})
	if r := do(t, "GET", n.URL+"/v1/hotkeys", "", ""); r.status != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", r.status)
	}
	if r := do(t, "GET", n.URL+"/v1/hotkeys", "", "pw"); r.status != http.StatusOK {
		t.Errorf("token: %d %s, want 200", r.status, r.body)
	}
}
