package client_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rlserver/rlserver/client"
)

func TestClientIP(t *testing.T) {
	trusted, err := client.ParsePrefixes("10.0.0.0/8, 192.168.1.7, fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	id := client.Identity{TrustedProxies: trusted}
	tests := []struct {
		name, remote string
		xff          []string
		want         string
	}{
		{"direct", "203.0.113.5:4000", nil, "203.0.113.5"},
		{"spoofed by an untrusted peer", "203.0.113.5:4000", []string{"1.1.1.1"}, "203.0.113.5"},
		{"via a trusted proxy", "10.1.2.3:4000", []string{"198.51.100.7"}, "198.51.100.7"},
		{"spoof behind a trusted proxy", "10.1.2.3:4000", []string{"6.6.6.6, 198.51.100.7"}, "198.51.100.7"},
		{"two trusted hops", "192.168.1.7:4000", []string{"198.51.100.7, 10.9.9.9"}, "198.51.100.7"},
		{"several header lines", "10.1.2.3:4000", []string{"6.6.6.6", "198.51.100.7, 10.0.0.2"}, "198.51.100.7"},
		{"all trusted", "10.1.2.3:4000", []string{"10.0.0.9"}, "10.0.0.9"},
		{"trusted proxy, no header", "10.1.2.3:4000", nil, "10.1.2.3"},
		{"garbage stops at the trusted hop", "10.1.2.3:4000", []string{"1.2.3.4, bogus"}, "10.1.2.3"},
		{"ipv6", "[2001:db8::1]:4000", nil, "2001:db8::1"},
		{"ipv6 proxy", "[fd00::1]:4000", []string{"2001:db8::9"}, "2001:db8::9"},
		{"mapped ipv4", "[::ffff:203.0.113.9]:4000", nil, "203.0.113.9"},
		{"zone", "[fe80::1%eth0]:4000", nil, "fe80::1"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tt.remote
		for _, v := range tt.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := id.ClientIP(r); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, got, tt.want)
		}
	}
	if _, err := client.ParsePrefixes("10.0.0.0/33"); err == nil {
		t.Error("bad CIDR accepted")
	}
}

func TestIdentify(t *testing.T) {
	id := client.Identity{UserHeader: "X-User-ID", APIKeyHeader: "X-API-Key"}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "203.0.113.5:1"
	r.Header.Set("X-User-ID", "u1")
	r.Header.Set("X-API-Key", "secret")
	got := id.Identify(r)
	if got["ip"] != "203.0.113.5" || got["user"] != "u1" || len(got["apikey"]) != 32 || got["apikey"] == "secret" {
		t.Fatalf("%v", got)
	}
	id.User = func(*http.Request) string { return "from-session" }
	if got := id.Identify(r); got["user"] != "from-session" {
		t.Fatalf("User func: %v", got)
	}
	r.Header.Del("X-API-Key")
	if _, ok := id.Identify(r)["apikey"]; ok {
		t.Fatal("apikey without the header")
	}
}

// TestIdentifyIPv6: the "ip" identifier of an IPv6 caller is its /64 (as
// rlserver's forward auth counts it), or IPv6Prefix bits of it.
func TestIdentifyIPv6(t *testing.T) {
	for _, tt := range []struct {
		prefix       int
		remote, want string
	}{
		{0, "[2001:db8:1:2::7]:1", "2001:db8:1:2::/64"},
		{0, "[2001:db8:1:2:ffff::1]:1", "2001:db8:1:2::/64"},
		{48, "[2001:db8:1:2::7]:1", "2001:db8:1::/48"},
		{128, "[2001:db8:1:2::7]:1", "2001:db8:1:2::7"},
		{128, "[fe80::1%eth0]:1", "fe80::1"},
		{0, "203.0.113.5:1", "203.0.113.5"},
		{0, "pipe", "pipe"},
	} {
		id := client.Identity{IPv6Prefix: tt.prefix}
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tt.remote
		if got := id.Identify(r)["ip"]; got != tt.want {
			t.Errorf("IPv6Prefix %d, %s: ip %s, want %s", tt.prefix, tt.remote, got, tt.want)
		}
	}
}
