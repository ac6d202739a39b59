package httpapi

import (
	"errors"
	"net/http"
	"net/netip"
	"strings"

	"github.com/rlserver/rlserver/internal/clientid"
	"github.com/rlserver/rlserver/internal/urlpath"
)

// The trust model of forward auth. What an auth request says about the
// request it describes comes from two places: its own URL (the path and
// query that the gateway's configuration fixes) and its headers, which a
// gateway sets or clears but otherwise passes on from its client. So:
//
//   - Headers are believed only from a peer in --trusted-proxies. From
//     any other peer the caller's ip is the peer's address, the target
//     can only be the path after /v1/forward-auth/ (Envoy's way, below: a
//     request that names it in a header is refused), and a header naming
//     the caller (X-User-Id, X-Api-Key, X-Tier, or those the auth URL
//     renames them to) is refused with a 400 rather than ignored, so that
//     a gateway left out of --trusted-proxies is noticed at once.
//     (X-Forwarded-For from it is ignored, as the Go middleware ignores
//     it: a chain of proxies adds to it.)
//   - A target header must be sent once, and where the gateway may send
//     either of two (X-Forwarded-Uri: Caddy, Traefik; X-Original-URI:
//     nginx), both present must name the same path: rlserver cannot tell
//     which one the gateway set and which its client did, so it refuses
//     (400) to guess. The README's configurations clear the other one;
//     ?uri_header=NAME reads NAME alone.
//   - The path after /v1/forward-auth/ is the target of Envoy's ext_authz
//     (path_prefix), which appends the request's path and query as the
//     client wrote them: there the query is the client's, so it is not
//     read as the route's parameters, and target headers are not read.
//   - The target is decoded once and cleaned (internal/urlpath); a target
//     that backends may read in two ways is refused with a 400.

// forwarded is one auth request as forward auth reads it.
type forwarded struct {
	r       *http.Request
	peer    netip.Addr // the gateway's address (canonical)
	trusted bool       // peer is in --trusted-proxies: its headers are read
	envoy   bool       // the target is envoyPath, and the query is the client's
	rawPath string     // with envoy: the path after /v1/forward-auth, as written
	route   forwardRoute
}

// forwardPrefix is the auth path, which Envoy's ext_authz (HTTP) prefixes
// to the request's path: /v1/forward-auth/users/42 asks about /users/42.
const forwardPrefix = "/v1/forward-auth"

// readForwarded reads who sent r and how its URL describes the route.
func (a *api) readForwarded(r *http.Request) (forwarded, error) {
	f := forwarded{r: r, route: defaultRoute()}
	peer, err := clientid.Peer(r.RemoteAddr)
	if err != nil {
		return f, badRequest("", err.Error())
	}
	f.peer, f.trusted = peer, clientid.Contains(a.cfg.TrustedProxies, peer)
	if strings.HasPrefix(r.URL.Path, forwardPrefix+"/") {
		f.envoy = true
		f.rawPath, err = envoyPath(r)
		return f, err
	}
	if f.route, err = parseForwardRoute(r.URL.Query()); err != nil {
		return f, err
	}
	if !f.trusted {
		return f, badRequest("", "the gateway "+peer.String()+" is not in --trusted-proxies, so rlserver does not read the target from its "+
			strings.Join(f.route.uriHeaders, " or ")+": trust it, or have it ask for "+forwardPrefix+
			"/<path> as Envoy's ext_authz does (see \"Behind a gateway\" in the README)")
	}
	return f, nil
}

// envoyPath returns the path after /v1/forward-auth in r's request target
// as the client wrote it (Go's server has decoded r.URL.Path).
func envoyPath(r *http.Request) (string, error) {
	raw := r.RequestURI
	if raw == "" { // a request made in a test, not read from a connection
		raw = r.URL.RequestURI()
	}
	p, err := urlpath.RawPath(raw)
	if rest, ok := strings.CutPrefix(p, forwardPrefix); err == nil && ok && strings.HasPrefix(rest, "/") {
		return rest, nil
	}
	return "", badRequest("", "the auth path must begin with "+forwardPrefix+"/ as written, got "+quote(raw))
}

// header returns the value of the header name ("" if absent or if name
// is ""). A header sent more than once is refused: a gateway that adds
// its own to the client's would not be the one read. From a peer that is
// not trusted, a header present is refused (see the trust model above).
func (f *forwarded) header(name string) (string, error) {
	if name == "" {
		return "", nil
	}
	vals := f.r.Header.Values(name)
	switch {
	case len(vals) == 0:
		return "", nil
	case !f.trusted:
		return "", badRequest(name, "sent by "+f.peer.String()+", which is not in --trusted-proxies: rlserver reads who "+
			"the caller is only from a trusted gateway (see \"Behind a gateway\" in the README)")
	case len(vals) > 1:
		return "", badRequest(name, "sent more than once: the gateway must set it, not add to the client's")
	}
	return vals[0], nil
}

// method returns the method of the request the gateway describes: the
// method header's, else the auth request's own (nginx's subrequests keep
// it; Envoy's ext_authz sends it).
func (f *forwarded) method() (string, error) {
	if f.envoy {
		return f.r.Method, nil
	}
	m, err := f.header(f.route.methodHeader)
	if m == "" {
		m = f.r.Method
	}
	return m, err
}

// target returns the rules' target: the cleaned path of the URI in the
// route's target headers, or after /v1/forward-auth for Envoy.
func (f *forwarded) target() (string, error) {
	if f.envoy {
		return cleanTarget("the path after "+forwardPrefix, f.rawPath, urlpath.Path)
	}
	var from, target string
	for _, h := range f.route.uriHeaders {
		v, err := f.header(h)
		if err != nil {
			return "", err
		}
		if v == "" {
			continue
		}
		t, err := cleanTarget(h, v, urlpath.Target)
		if err != nil {
			return "", err
		}
		if from != "" && t != target {
			return "", badRequest("", from+" ("+quote(target)+") and "+h+" ("+quote(t)+") name different targets, "+
				"and rlserver cannot tell which one the gateway set: it must set one and clear the other "+
				"(see \"Behind a gateway\" in the README)")
		}
		from, target = h, t
	}
	if from == "" {
		return "", badRequest("", "missing target: the gateway must send the request's URI in "+
			strings.Join(f.route.uriHeaders, " or ")+" (see \"Behind a gateway\" in the README)")
	}
	return target, nil
}

// cleanTarget is clean(raw), the error naming where raw came from.
func cleanTarget(where, raw string, clean func(string) (string, error)) (string, error) {
	t, err := clean(raw)
	switch {
	case err == nil:
		return t, nil
	case errors.Is(err, urlpath.ErrNotPath):
		return "", badRequest(where, "want the request's URI, such as /users/42?page=2, got "+quote(raw))
	}
	return "", badRequest(where, quote(raw)+" holds "+err.Error()+": rlserver refuses a target that backends may read "+
		"as different paths (see \"Behind a gateway\" in the README)")
}

// describe reads the request the gateway describes into the body of an
// equivalent POST /v1/checkrules.
func (a *api) describe(f *forwarded) (checkRulesRequest, error) {
	rt := &f.route
	req := checkRulesRequest{Tier: rt.tier, IDs: map[string]string{}, Cost: &rt.cost}
	target, err := f.target()
	if err != nil {
		return req, err
	}
	req.Target = target
	if rt.ipHeader != "" {
		ip, bad := clientid.ClientIP(f.peer, f.r.Header.Values(rt.ipHeader), a.cfg.TrustedProxies)
		if bad != "" {
			return req, badRequest(rt.ipHeader, quote(bad)+" is not an IP address (sent by the trusted proxy "+ip.String()+")")
		}
		req.IDs["ip"] = clientid.IPKey(ip, a.cfg.IPv6Prefix)
	}
	for _, id := range []struct{ header, name string }{{rt.userHeader, "user"}, {rt.apiKeyHeader, "apikey"}, {rt.tierHeader, "tier"}} {
		v, err := f.header(id.header)
		switch {
		case err != nil:
			return req, err
		case v == "":
		case id.name == "apikey":
			req.IDs["apikey"] = clientid.HashAPIKey(v) // as the Go middleware: the secret never becomes a key
		case id.name == "tier":
			req.Tier = v
		default:
			req.IDs[id.name] = v
		}
	}
	return req, nil
}
