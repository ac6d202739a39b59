package testserver

import (
	"io"
	"net/http"
	"testing"
)

// Get sends GET url with the given header name/value pairs and returns the
// response (its body already read and closed) and the body. It fails the
// test if the request cannot be sent.
func Get(t testing.TB, url string, header ...string) (*http.Response, string) {
	t.Helper()
	return Do(t, "GET", url, header...)
}

// Do is Get with another method (and no body).
func Do(t testing.TB, method, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}
