package envoyrls_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/envoyrls"
)

// TestJSONErrorsReadable: /json's error bodies are JSON a person reads
// as written: the 401 says Bearer <--requirepass>, not \u003c...\u003e.
func TestJSONErrorsReadable(t *testing.T) {
	srv := httptest.NewServer(envoyrls.JSONHandler(nil, []string{"secret"}))
	defer srv.Close()
	res, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"domain":"d"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	want := `{"error":"authentication required: send Authorization: Bearer <--requirepass>"}` + "\n"
	if res.StatusCode != http.StatusUnauthorized || string(body) != want {
		t.Fatalf("got %d %q, want 401 %q", res.StatusCode, body, want)
	}
}
