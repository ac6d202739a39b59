// Package clientid identifies the caller of an HTTP request the way the
// Go middleware (package client) and the forward-auth endpoint (package
// httpapi) both must, so that the same caller has the same counters
// whichever front end checks it: the client IP, honouring X-Forwarded-For
// only from trusted proxies, and API keys as digests.
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
// "host:port" or a bare host), IPv4-mapped IPv6 addresses unmapped.
func Peer(remoteAddr string) (netip.Addr, error) {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("peer address %q is not an IP address", remoteAddr)
	}
	return a.Unmap(), nil
}

// ClientIP returns the caller's address: peer, unless peer is in trusted,
// in which case the X-Forwarded-For values xff (every line of the header,
// in order) are walked from the right, past trusted proxies, to the first
// address that is not one (or the leftmost, if all are). Entries may be
// bare addresses or host:port; empty entries are skipped. An entry that
// does not parse stops the walk: ClientIP returns the trusted hop that
// forwarded it and the bad entry (else "").
func ClientIP(peer netip.Addr, xff []string, trusted []netip.Prefix) (client netip.Addr, bad string) {
	client = peer
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
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}
