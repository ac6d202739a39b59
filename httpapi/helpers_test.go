package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testserver"
)

// t0 is the fake clock's start: 5.3 s into a 10 s window.
var t0 = time.Unix(1_700_000_005, 300_000_000)

func start(t *testing.T, opt testserver.Options) (*testserver.Node, *testserver.Clock) {
	clk := testserver.NewClock(t0)
	if opt.Clock == nil {
		opt.Clock = clk.Now
	}
	return testserver.Start(t, opt), clk
}

// reply is an HTTP response with its body read.
type reply struct {
	status int
	header http.Header
	body   string
}

// json decodes the body into a generic value.
func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(r.body), &v); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return v
}

// do sends method url with body (if not "") and the bearer token (if not "").
func do(t *testing.T, method, url, body, token string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(data)}
}

// expect checks the status and that the body contains every want.
func expect(t *testing.T, what string, r reply, status int, want ...string) {
	t.Helper()
	if r.status != status {
		t.Errorf("%s: status %d, want %d (body %q)", what, r.status, status, r.body)
	}
	for _, w := range want {
		if !strings.Contains(r.body, w) {
			t.Errorf("%s: body %q does not contain %q", what, r.body, w)
		}
	}
	if ct := r.header.Get("Content-Type"); r.body != "" && ct != "application/json" {
		t.Errorf("%s: Content-Type %q", what, ct)
	}
}
