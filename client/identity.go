package client

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
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
}

// ParsePrefixes parses a comma-separated list of CIDRs or single addresses
// ("10.0.0.0/8, 192.168.1.7") for Identity.TrustedProxies.
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
				return nil, fmt.Errorf("client: %q is neither a CIDR nor an IP address", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Identify returns the identifiers of r's caller.
func (id *Identity) Identify(r *http.Request) map[string]string {
	ids := map[string]string{"ip": id.ClientIP(r)}
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
			ids["apikey"] = hashKey(key)
		}
	}
	return ids
}

// ClientIP returns the caller's IP address: the connection's peer, unless
// that is a trusted proxy, in which case X-Forwarded-For is walked from the
// right past trusted proxies to the first address that is not one. An
// unparsable entry stops the walk at the trusted hop that forwarded it.
func (id *Identity) ClientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	client := peer.Unmap()
	if !id.trusted(client) {
		return client.String()
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0 && id.trusted(client); i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		client = a.Unmap()
	}
	return client.String()
}

func (id *Identity) trusted(a netip.Addr) bool {
	for _, p := range id.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
