package httpapi_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rlserver/rlserver/internal/testserver"
)

// fakeCluster serves GET /cluster and records the nodes asked to leave.
type fakeCluster struct {
	mu   sync.Mutex
	left []string
}

func (f *fakeCluster) ClusterReport(ctx context.Context, digestAt int64) any {
	return map[string]any{"nodes": []string{"n1", "n2"}, "raft_addr": "10.0.0.1:7379"}
}

func (f *fakeCluster) LeaveNode(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.left = append(f.left, id)
	return nil
}

func (f *fakeCluster) leaves() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.left)
}

// TestEndpointsAskForTheRightToken (issue 18): GET /cluster, which names
// every node's addresses (the Raft ones included), answered without a
// token on a server with --requirepass; the 401 of DELETE
// /cluster/nodes/{id} said "changing rules needs". Now every endpoint asks
// for the token its kind needs and its 401 names what was refused and the
// token that opens it:
//   - reading rules and checking: the password (--requirepass) or the
//     admin token, when a password is set;
//   - changing rules, removing a node and GET /cluster: the admin token
//     when one is set; with only --requirepass, the password stands for it;
//   - /metrics: open, as Prometheus expects, unless --metrics-auth, then
//     either token; /healthz and /readyz: always open.
func TestEndpointsAskForTheRightToken(t *testing.T) {
	const (
		needPass      = `needs the password (--requirepass, taken as the admin token since none is set): send \"Authorization: Bearer <requirepass>\"`
		needAdmin     = `needs the admin token: send \"Authorization: Bearer <admin-token>\"`
		needPassOrAdm = `needs the password (or the admin token): send \"Authorization: Bearer <requirepass>\"`
		needOnlyPass  = `needs the password: send \"Authorization: Bearer <requirepass>\"`
	)
	type call struct {
		method, path, token string
		status              int
		body                string // in the body; for a 401, after "missing or wrong bearer token: "
	}
	check := `{"key":"k","algo":"fixed","limit":5,"window":"1m"}`
	cases := []struct {
		name  string
		opt   testserver.Options
		calls []call
	}{
		{"requirepass alone", testserver.Options{RequirePass: "pw"}, []call{
			{"GET", "/cluster", "", 401, "reading the cluster's state " + needPass},
			{"GET", "/cluster", "nope", 401, "reading the cluster's state " + needPass},
			{"GET", "/cluster", "pw", 200, `"raft_addr":"10.0.0.1:7379"`},
			{"DELETE", "/cluster/nodes/n2", "", 401, "removing a cluster node " + needPass},
			{"DELETE", "/cluster/nodes/n2", "pw", 202, `"status":"leaving"`},
			{"DELETE", "/rules/r1", "", 401, "deleting a rule " + needPass},
			{"PUT", "/rules/r1", "", 401, "writing a rule " + needPass},
			{"GET", "/rules", "", 401, "reading rules " + needOnlyPass},
			{"POST", "/v1/check", "", 401, "checking " + needOnlyPass},
			{"POST", "/v1/check", "pw", 200, `"allowed":true`},
			{"GET", "/metrics", "", 200, "# HELP"},
			{"GET", "/healthz", "", 200, `"ok"`},
			{"GET", "/readyz", "", 200, `"ready"`},
		}},
		{"both tokens", testserver.Options{RequirePass: "pw", AdminToken: "adm"}, []call{
			{"GET", "/cluster", "", 401, "reading the cluster's state " + needAdmin},
			{"GET", "/cluster", "pw", 401, "reading the cluster's state " + needAdmin},
			{"GET", "/cluster", "adm", 200, `"nodes":["n1","n2"]`},
			{"DELETE", "/cluster/nodes/n2", "pw", 401, "removing a cluster node " + needAdmin},
			{"DELETE", "/cluster/nodes/n2", "adm", 202, `"node":"n2"`},
			{"POST", "/rules", "pw", 401, "creating a rule " + needAdmin},
			{"DELETE", "/rules/r1", "pw", 401, "deleting a rule " + needAdmin},
			{"GET", "/rules/r1", "", 401, "reading a rule " + needPassOrAdm},
			{"POST", "/v1/checkrules", "", 401, "checking against the rules " + needPassOrAdm},
			{"GET", "/rules", "adm", 200, "[]"},
			{"GET", "/metrics", "", 200, "# HELP"},
		}},
		{"admin token alone", testserver.Options{AdminToken: "adm"}, []call{
			{"GET", "/cluster", "", 401, "reading the cluster's state " + needAdmin},
			{"GET", "/cluster", "adm", 200, `"nodes"`},
			{"DELETE", "/cluster/nodes/n2", "", 401, "removing a cluster node " + needAdmin},
			{"GET", "/rules", "", 200, "[]"},
			{"POST", "/v1/check", "", 200, `"allowed":true`},
		}},
		{"no token", testserver.Options{}, []call{
			{"GET", "/cluster", "", 200, `"nodes"`},
			{"DELETE", "/cluster/nodes/n2", "", 202, `"leaving"`},
		}},
		{"metrics-auth with both tokens", testserver.Options{RequirePass: "pw", AdminToken: "adm", MetricsAuth: true}, []call{
			{"GET", "/metrics", "", 401, "reading metrics " + needPassOrAdm},
			{"GET", "/metrics", "nope", 401, "reading metrics " + needPassOrAdm},
			{"GET", "/metrics", "pw", 200, "# HELP"},
			{"GET", "/metrics", "adm", 200, "# HELP"},
			{"GET", "/healthz", "", 200, `"ok"`},
			{"GET", "/readyz", "", 200, `"ready"`},
		}},
		{"metrics-auth with the admin token alone", testserver.Options{AdminToken: "adm", MetricsAuth: true}, []call{
			{"GET", "/metrics", "", 401, "reading metrics " + needAdmin},
			{"GET", "/metrics", "adm", 200, "# HELP"},
		}},
		{"metrics-auth with requirepass alone", testserver.Options{RequirePass: "pw", MetricsAuth: true}, []call{
			{"GET", "/metrics", "", 401, "reading metrics " + needOnlyPass},
			{"GET", "/metrics", "pw", 200, "# HELP"},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fc := &fakeCluster{}
			c.opt.Cluster = fc
			n, _ := start(t, c.opt)
			allowedLeaves := 0
			for _, k := range c.calls {
				body := ""
				switch k.path {
				case "/v1/check":
					body = check
				case "/v1/checkrules":
					body = `{"target":"/x","tier":"free","ids":{"user":"u1"}}`
				case "/rules", "/rules/r1":
					if k.method == "POST" || k.method == "PUT" {
						body = freeRule
					}
				}
				r := do(t, k.method, n.URL+k.path, body, k.token)
				what := k.method + " " + k.path + " with token " + strings.Repeat("*", len(k.token))
				if k.status == 401 {
					expect(t, what, r, 401, `{"error":"missing or wrong bearer token: `+k.body+`"}`)
					if r.header.Get("WWW-Authenticate") == "" {
						t.Errorf("%s: 401 without WWW-Authenticate", what)
					}
					continue
				}
				if k.method == "DELETE" && strings.HasPrefix(k.path, "/cluster/nodes/") {
					allowedLeaves++
				}
				if k.path == "/metrics" { // Prometheus's text, not JSON
					if r.status != k.status || !strings.Contains(r.body, k.body) {
						t.Errorf("%s: status %d, body %.100q; want %d with %q", what, r.status, r.body, k.status, k.body)
					}
					continue
				}
				expect(t, what, r, k.status, k.body)
			}
			// A refused leave changes nothing.
			if got := fc.leaves(); len(got) != allowedLeaves {
				t.Errorf("the cluster was asked to remove %q; %d leaves were allowed", got, allowedLeaves)
			}
		})
	}
}
