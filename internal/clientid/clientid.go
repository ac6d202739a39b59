// Package clientid identifies the caller of an HTTP request the way the
// Go middleware (package client) and the forward-auth endpoint (package
// httpapi) both must, so that the same caller has the same counters
// whichever front end checks it: the client IP, honouring X-Forwarded-For
// only from trusted proxies, an IPv6 caller by its network (IPKey), and
// API keys as digests.
package clientid

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// HashAPIKey returns a 32-hex-digit digest of an API key (the first 16
// bytes of its SHA-256), so that rlserver's counter keys never hold the
// secret itself.
func HashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}

// Loopback is the default set of trusted proxies of rlserver's
// --trusted-proxies: 127.0.0.0/8 and ::1.
var Loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// ParsePrefixes parses a comma-separated list of CIDRs or single addresses
// ("10.0.0.0/8, 192.168.1.7"). An empty list gives nil.
func ParsePrefixes(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("%q is neither a CIDR nor an IP address", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Contains reports whether a is in one of prefixes.
func Contains(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Peer parses the address of a connection's peer (http.Request.RemoteAddr,
// "host:port" or a bare host), as Canonical returns it.
func Peer(remoteAddr string) (netip.Addr, error) {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("peer address %q is not an IP address", remoteAddr)
	}
	return Canonical(a), nil
}

// Canonical returns a as one caller is known by whatever way it reaches
// us: an IPv4-mapped IPv6 address (::ffff:1.2.3.4) is the IPv4 address,
// and the zone of a link-local address (fe80::1%eth0) is dropped, so
// that trusted proxies match it and fe80::1%eth0 and fe80::1%2 are one.
func Canonical(a netip.Addr) netip.Addr {
	return a.Unmap().WithZone("")
}

// DefaultIPv6Prefix is the network length by which IPv6 callers are
// grouped unless told otherwise (rlserver's --ipv6-prefix): a /64 is what
// one subscriber, host or LAN is given, so its 2^64 addresses are one
// caller.
const DefaultIPv6Prefix = 64

// IPKey returns the value of the "ip" identifier of the caller at a: an
// IPv4 address as itself ("203.0.113.7"), an IPv6 address as its network
// of v6prefix bits ("2001:db8:1:2::/64"), or as itself when v6prefix is
// 128 ("2001:db8::1"). v6prefix 0 (or out of 1..128) means
// DefaultIPv6Prefix. a is made Canonical first.
func IPKey(a netip.Addr, v6prefix int) string {
	a = Canonical(a)
	if !a.Is6() {
		return a.String()
	}
	if v6prefix < 1 || v6prefix > 128 {
		v6prefix = DefaultIPv6Prefix
	}
	if v6prefix == 128 {
		return a.String()
	}
	p, _ := a.Prefix(v6prefix) // cannot fail: a is IPv6 without a zone, 1 <= v6prefix < 128
	return p.String()
}

// ClientIP returns the caller's address, made Canonical: peer, unless
// peer is in trusted, in which case the X-Forwarded-For values xff (every
// line of the header, in order) are walked from the right, past trusted
// proxies, to the first address that is not one (or the leftmost, if all
// are). Entries may be bare addresses or host:port; empty entries are
// skipped. An entry that does not parse stops the walk: ClientIP returns
// the trusted hop that forwarded it and the bad entry (else "").
func ClientIP(peer netip.Addr, xff []string, trusted []netip.Prefix) (client netip.Addr, bad string) {
	client = Canonical(peer)
	if !Contains(trusted, client) {
		return client, ""
	}
	hops := strings.Split(strings.Join(xff, ","), ",")
	if len(xff) == 0 {
		hops = nil
	}
	for i := len(hops) - 1; i >= 0 && Contains(trusted, client); i-- {
		hop := strings.TrimSpace(hops[i])
		if hop == "" {
			continue // "a,,b" or a trailing comma
		}
		a, ok := parseHop(hop)
		if !ok {
			return client, hop
		}
		client = a
	}
	return client, ""
}

// parseHop parses one X-Forwarded-For entry: an address, or host:port
// ("203.0.113.7:4711", "[2001:db8::1]:4711") as some proxies write.
func parseHop(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return Canonical(a), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return Canonical(ap.Addr()), true
	}
	return netip.Addr{}, false
}
