package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testutil"
)

// Issue 18: a cluster node started with --requirepass answered GET
// /cluster (every node's RESP and Raft addresses, key counts) to anyone,
// and DELETE /cluster/nodes/{id}'s 401 said "changing rules needs". The
// binary, as a cluster of one node with --requirepass and --metrics-auth:
// GET /cluster and DELETE /cluster/nodes need the password (no
// --admin-token is set), /metrics needs it too, /healthz and /readyz stay
// open, and each 401 names what it refused.
func TestClusterAndMetricsNeedTheToken(t *testing.T) {
	parallel(t)
	bin := buildBinary(t)
	raft := testutil.FreeAddr(t)
	p := startProc(t, bin, t.TempDir(), "--node-id", "n1", "--raft-addr", raft, "--peers", "n1="+raft,
		"--groups", "1", "--requirepass", "pw", "--metrics-auth")
	waitBalanced(t, []*proc{p}, 20*time.Second) // reads GET /cluster with the password
	for _, c := range []struct {
		method, path, token string
		status              int
		body                string
	}{
		{"GET", "/cluster", "", 401, `{"error":"missing or wrong bearer token: reading the cluster's state needs the password ` +
			`(--requirepass, taken as the admin token since none is set): send \"Authorization: Bearer <requirepass>\""}`},
		{"GET", "/cluster", "nope", 401, "reading the cluster's state needs the password"},
		{"GET", "/cluster", "pw", 200, `"raft":"` + raft + `"`},
		{"DELETE", "/cluster/nodes/n9", "", 401, "removing a cluster node needs the password"},
		{"DELETE", "/cluster/nodes/n9", "pw", 404, "n9"},
		{"GET", "/metrics", "", 401, "reading metrics needs the password"},
		{"GET", "/metrics", "pw", 200, "rlserver_connected_clients"},
		{"GET", "/healthz", "", 200, `"ok"`},
		{"GET", "/readyz", "", 200, `"ready"`},
	} {
		req, err := http.NewRequest(c.method, "http://"+p.http+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.body) {
			t.Errorf("%s %s with %q: %d %.300s\nwant %d with %s", c.method, c.path, c.token, resp.StatusCode, body, c.status, c.body)
		}
	}
}
