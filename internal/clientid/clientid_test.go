package clientid

import (
	"net/netip"
	"testing"
)

func TestClientIP(t *testing.T) {
	trusted, err := ParsePrefixes("10.0.0.0/8, 192.168.1.7, fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, peer string
		xff        []string
		want, bad  string
	}{
		{"direct", "203.0.113.5", nil, "203.0.113.5", ""},
		{"spoofed by an untrusted peer", "203.0.113.5", []string{"bogus, 1.1.1.1"}, "203.0.113.5", ""},
		{"via a trusted proxy", "10.1.2.3", []string{"198.51.100.7"}, "198.51.100.7", ""},
		{"spoof behind a trusted proxy", "10.1.2.3", []string{"6.6.6.6, 198.51.100.7"}, "198.51.100.7", ""},
		{"garbage left of the client is never read", "10.1.2.3", []string{"bogus, 198.51.100.7"}, "198.51.100.7", ""},
		{"two trusted hops", "192.168.1.7", []string{"198.51.100.7, 10.9.9.9"}, "198.51.100.7", ""},
		{"all trusted", "10.1.2.3", []string{"10.0.0.9"}, "10.0.0.9", ""},
		{"no header", "10.1.2.3", nil, "10.1.2.3", ""},
		{"with ports", "10.1.2.3", []string{"198.51.100.7:4711, [fd00::2]:80"}, "198.51.100.7", ""},
		{"garbage at a trusted hop", "10.1.2.3", []string{"1.2.3.4, bogus"}, "10.1.2.3", "bogus"},
		{"empty entries", "10.1.2.3", []string{"1.2.3.4,, "}, "1.2.3.4", ""},
		{"mapped", "10.1.2.3", []string{"::ffff:203.0.113.9"}, "203.0.113.9", ""},
		{"zone dropped", "10.1.2.3", []string{"fe80::1%eth0"}, "fe80::1", ""},
		{"zone dropped, with a port", "10.1.2.3", []string{"[fe80::1%2]:80"}, "fe80::1", ""},
		{"a trusted proxy with a zone", "fd00::1%eth0", []string{"2001:db8::7"}, "2001:db8::7", ""},
		{"a mapped trusted proxy", "::ffff:10.1.2.3", []string{"198.51.100.7"}, "198.51.100.7", ""},
	} {
		got, bad := ClientIP(netip.MustParseAddr(tt.peer), tt.xff, trusted)
		if got.String() != tt.want || bad != tt.bad {
			t.Errorf("%s: got %s %q, want %s %q", tt.name, got, bad, tt.want, tt.bad)
		}
	}
}

func TestParsePrefixesAndPeer(t *testing.T) {
	if p, err := ParsePrefixes(" 127.0.0.0/8 ,::1"); err != nil || len(p) != 2 || p[1].Bits() != 128 {
		t.Fatalf("%v %v", p, err)
	}
	if p, err := ParsePrefixes(""); err != nil || p != nil {
		t.Fatalf("empty: %v %v", p, err)
	}
	if _, err := ParsePrefixes("10.0.0.0/33"); err == nil {
		t.Fatal("bad CIDR accepted")
	}
	if a, err := Peer("[::ffff:1.2.3.4]:80"); err != nil || a.String() != "1.2.3.4" {
		t.Fatalf("%v %v", a, err)
	}
	if _, err := Peer("pipe"); err == nil {
		t.Fatal("non-IP peer accepted")
	}
	if got := HashAPIKey("secret"); len(got) != 32 || got != "2bb80d537b1da3e38bd30361aa855686" {
		t.Fatalf("digest %s", got)
	}
}

func TestIPKey(t *testing.T) {
	for _, tt := range []struct {
		addr   string
		prefix int
		want   string
	}{
		{"203.0.113.7", 64, "203.0.113.7"},
		{"::ffff:203.0.113.7", 64, "203.0.113.7"},
		{"2001:db8:1:2:aaaa::1", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", 64, "2001:db8:1:3::/64"},
		{"2001:db8:1:2:aaaa::1", 0, "2001:db8:1:2::/64"}, // 0: the default
		{"2001:db8:1:2:aaaa::1", 48, "2001:db8:1::/48"},
		{"2001:db8:1:2:aaaa::1", 56, "2001:db8:1::/56"},
		{"2001:db8:1:2:aaaa::1", 128, "2001:db8:1:2:aaaa::1"},
		{"2001:db8:1:2:aaaa::1", 1, "::/1"},
		{"fe80::1%eth0", 128, "fe80::1"},
		{"fe80::1%eth0", 64, "fe80::/64"},
		{"::1", 64, "::/64"},
	} {
		if got := IPKey(netip.MustParseAddr(tt.addr), tt.prefix); got != tt.want {
			t.Errorf("IPKey(%s, %d) = %s, want %s", tt.addr, tt.prefix, got, tt.want)
		}
	}
	// Peer drops the zone too.
	if a, err := Peer("[fe80::1%eth0]:443"); err != nil || a.String() != "fe80::1" {
		t.Errorf("Peer with a zone: %v %v", a, err)
	}
}
