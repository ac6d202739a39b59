package forwardauth

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"
)

// Attacks on the README's gateway configurations (issue 27): a client of
// the gateway forges the headers that carry the target or the caller, or
// spells the target so that a backend serves it as /login while a rule
// for /login does not see it. Each count is of the requests that reached
// the backend after /login's limit was used up; every one must be 0.

// rawGet sends "GET target" to the gateway at gatewayURL from the loopback
// address ip, exactly as written (no client-side cleaning of the path),
// with the header name/value pairs, and returns the status and body.
func rawGet(t *testing.T, gatewayURL, ip, target string, header ...string) (int, string) {
	t.Helper()
	u, err := url.Parse(gatewayURL)
	if err != nil {
		t.Fatal(err)
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var req strings.Builder
	fmt.Fprintf(&req, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", target, u.Host)
	for i := 0; i+1 < len(header); i += 2 {
		fmt.Fprintf(&req, "%s: %s\r\n", header[i], header[i+1])
	}
	req.WriteString("\r\n")
	if _, err := io.WriteString(c, req.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// useUp spends ip's allowance on /login (3), checking each got through.
func useUp(t *testing.T, r rig, ip string) {
	t.Helper()
	for i := 0; i < 3; i++ {
		if status, body := rawGet(t, r.url, ip, "/login"); status != 200 {
			t.Fatalf("/login from %s, request %d: %d %q", ip, i+1, status, body)
		}
	}
}

// tally sends n requests and counts those that reached the backend, and
// the statuses the client saw.
type tally struct {
	through, sent int
	statuses      map[int]int
}

func (ty *tally) String() string {
	codes := make([]int, 0, len(ty.statuses))
	for c := range ty.statuses {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var s []string
	for _, c := range codes {
		s = append(s, fmt.Sprintf("%d×%d", ty.statuses[c], c))
	}
	return fmt.Sprintf("%d of %d reached the backend (statuses %s)", ty.through, ty.sent, strings.Join(s, ", "))
}

// send sends target from ip with header (a "%d" in a value becomes the
// request's number) and records whether the backend saw it.
func (ty *tally) send(t *testing.T, r rig, ip, target string, i int, header ...string) int {
	t.Helper()
	h := append([]string(nil), header...)
	for j := 1; j < len(h); j += 2 {
		if strings.Contains(h[j], "%d") {
			h[j] = fmt.Sprintf(h[j], i)
		}
	}
	before := r.b.hits.Load()
	status, _ := rawGet(t, r.url, ip, target, h...)
	if ty.statuses == nil {
		ty.statuses = map[int]int{}
	}
	ty.sent++
	ty.statuses[status]++
	if r.b.hits.Load() != before {
		ty.through++
	}
	return status
}

// forgedHeaders: once /login's limit is used up, a client that sends the
// headers rlserver reads the target or the caller from is still checked
// as /login from its own address: every request is denied (429).
func forgedHeaders(t *testing.T, r rig) {
	const n = 20
	forgeries := []struct {
		name   string
		header []string
	}{
		{"X-Forwarded-Uri", []string{"X-Forwarded-Uri", "/elsewhere-%d"}},
		{"X-Original-URI", []string{"X-Original-URI", "/elsewhere-%d"}},
		{"both", []string{"X-Forwarded-Uri", "/elsewhere-%d", "X-Original-URI", "/elsewhere-%d"}},
		{"X-Forwarded-For", []string{"X-Forwarded-For", "203.0.113.%d"}},
		{"X-Forwarded-Method", []string{"X-Forwarded-Method", "OPTIONS"}},
	}
	ip := "127.0.0.10"
	useUp(t, r, ip)
	for _, f := range forgeries {
		var ty tally
		for i := 0; i < n; i++ {
			ty.send(t, r, ip, "/login", i, f.header...)
		}
		t.Logf("forged %s on /login over the limit: %v", f.name, &ty)
		if ty.through != 0 || ty.statuses[http.StatusTooManyRequests] != n {
			t.Errorf("forged %s: %v; want all %d denied with 429", f.name, &ty, n)
		}
	}
	// X-Tier: the route's tier is free (users-free, 2 per API key); a
	// client that names another tier escapes every rule of the free tier.
	var ty tally
	for i := 0; i < 2+n; i++ {
		status := ty.send(t, r, "127.0.0.12", "/users/1", i, "X-Api-Key", "key-t", "X-Tier", "paid")
		if i < 2 && status != 200 {
			t.Fatalf("/users/1 with key-t, request %d: %d", i+1, status)
		}
	}
	ty.through -= 2
	t.Logf("forged X-Tier on /users/1 over the key's limit: %v", &ty)
	if ty.through != 0 {
		t.Errorf("forged X-Tier: %v; want none through", &ty)
	}
	// X-User-Id: a client that names another user must not spend that
	// user's allowance (account-per-user: 1 an hour).
	for i := 0; i < 5; i++ {
		rawGet(t, r.url, "127.0.0.13", "/account", "X-User-Id", "victim")
	}
	if r.n.Store.CountKeys(time.Now().UnixNano(), func(k []byte) bool { return string(k) == "account-per-user:victim" }) != 0 {
		t.Errorf("a client's X-User-Id: victim spent the user victim's allowance on /account")
	}
}

// loginSpellings are targets that backends serve as /login (the test's
// backend, Go's net/http without a ServeMux, sees them as they are
// written; nginx and Caddy pass them on unchanged).
var loginSpellings = []string{
	"//login", "/./login", "/x/../login", "/%2e%2e/login", "/login/.",
	"/login/", "/%2E/login", "/x/%2e%2E/login", "///login//", "/a/b/../../login?next=/",
}

// ambiguous are targets that a backend may read as /login or as another
// path: rlserver refuses them (400), so they never reach the backend.
var ambiguous = []string{
	"/login%2f", "/x%2f..%2flogin", "/%252e%252e/login", "/log%00in", "/login%5c", "/x\\..\\login", "/login%0a",
}

// pathSpellings: once /login's limit is used up, every spelling of /login
// is denied, and an ambiguous one never reaches the backend.
func pathSpellings(t *testing.T, r rig) {
	const each = 5
	ip := "127.0.0.11"
	useUp(t, r, ip)
	var all tally
	for _, s := range loginSpellings {
		var ty tally
		wrong := 0
		for i := 0; i < each; i++ {
			if status := ty.send(t, r, ip, s, i); status != http.StatusTooManyRequests && !refusedByGateway(r, s, status) {
				wrong++
			}
		}
		all.sent += ty.sent
		all.through += ty.through
		t.Logf("%-24s %v", s, &ty)
		if wrong > 0 {
			t.Errorf("%s over /login's limit: %v, want 429", s, &ty)
		}
	}
	t.Logf("spellings of /login over its limit: %d of %d reached the backend", all.through, all.sent)
	if all.through != 0 {
		t.Errorf("%d of %d spellings of /login reached the backend over its limit", all.through, all.sent)
	}
	var amb tally
	for _, s := range ambiguous {
		amb.send(t, r, "127.0.0.14", s, 0)
	}
	t.Logf("ambiguous paths, under no limit: %v", &amb)
	if amb.through != 0 {
		t.Errorf("ambiguous paths: %v; want none through", &amb)
	}
}

// refusedByGateway reports the requests that the gateway itself refuses
// before it asks rlserver: nginx answers 400 to a path that climbs above
// the root once decoded.
func refusedByGateway(r rig, target string, status int) bool {
	return r.gw.headersOn200 && status == http.StatusBadRequest && strings.HasPrefix(target, "/%2e%2e")
}
