package client

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"

	"github.com/rlserver/rlserver/internal/clientid"
)

// Identity says how the middleware identifies a caller. The identifiers
// are the key types that rules name: "ip" always, "user" and "apikey" when
// present.
type Identity struct {
	// TrustedProxies are the networks of the reverse proxies in front of
	// the service. X-Forwarded-For is honoured only on requests from them,
	// and only as far back as the chain stays within them; otherwise the
	// client IP is the connection's peer. Empty: X-Forwarded-For is ignored.
	TrustedProxies []netip.Prefix
	// UserHeader names a header holding the user id ("X-User-ID"); User,
	// if set, is used instead (for example to read a verified session).
	UserHeader string
	User       func(*http.Request) string
	// APIKeyHeader names a header holding an API key ("X-API-Key"). The
	// identifier is a SHA-256 digest of the key, not the key.
	APIKeyHeader string
	// IPv6Prefix is the network length, 1 to 128, by which IPv6 callers
	// are counted: the "ip" identifier of every address of a /64 is
	// "2001:db8:1:2::/64", as rlserver's forward auth counts them (its
	// --ipv6-prefix); 128 counts each address apart. 0 means 64.
	IPv6Prefix int
}

// ParsePrefixes parses a comma-separated list of CIDRs or single addresses
// ("10.0.0.0/8, 192.168.1.7") for Identity.TrustedProxies.
func ParsePrefixes(list string) ([]netip.Prefix, error) {
	p, err := clientid.ParsePrefixes(list)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return p, nil
}

// Identify returns the identifiers of r's caller.
func (id *Identity) Identify(r *http.Request) map[string]string {
	ids := map[string]string{"ip": id.ipKey(r)}
	user := ""
	if id.User != nil {
		user = id.User(r)
	} else if id.UserHeader != "" {
		user = r.Header.Get(id.UserHeader)
	}
	if user != "" {
		ids["user"] = user
	}
	if id.APIKeyHeader != "" {
		if key := r.Header.Get(id.APIKeyHeader); key != "" {
			ids["apikey"] = clientid.HashAPIKey(key)
		}
	}
	return ids
}

// ClientIP returns the caller's IP address: the connection's peer, unless
// that is a trusted proxy, in which case X-Forwarded-For is walked from the
// right past trusted proxies to the first address that is not one. An
// unparsable entry stops the walk at the trusted hop that forwarded it.
// An IPv4-mapped address is the IPv4 one, and a zone (fe80::1%eth0) is
// dropped. rlserver's /v1/forward-auth finds the caller the same way
// (internal/clientid).
func (id *Identity) ClientIP(r *http.Request) string {
	a, ok := id.clientAddr(r)
	if !ok { // not an IP peer (a test, a unix socket): its name
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			return host
		}
		return r.RemoteAddr
	}
	return a.String()
}

// ipKey returns the "ip" identifier of r's caller: ClientIP, with an
// IPv6 address as its network of IPv6Prefix bits.
func (id *Identity) ipKey(r *http.Request) string {
	if a, ok := id.clientAddr(r); ok {
		return clientid.IPKey(a, id.IPv6Prefix)
	}
	return id.ClientIP(r)
}

// clientAddr returns the caller's address, if the peer has one.
func (id *Identity) clientAddr(r *http.Request) (netip.Addr, bool) {
	peer, err := clientid.Peer(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	client, _ := clientid.ClientIP(peer, r.Header.Values("X-Forwarded-For"), id.TrustedProxies)
	return client, true
}
