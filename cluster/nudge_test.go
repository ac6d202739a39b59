package cluster

import (
	"testing"
	"time"
)

// TestProxyNodeNeverNudges: after a takeover a node answers each
// connection's first keyed command MOVED to itself (server.Nudger), so
// that cluster clients reload their slot maps; a node with Proxy must not,
// since its clients do not follow MOVED (TestClusterProxyPlainClients saw
// redis-cli without -c get "MOVED 12513" to the very node it asked, after
// an election under load).
func TestProxyNodeNeverNudges(t *testing.T) {
	for _, proxy := range []bool{false, true} {
		c := &Cluster{cfg: ClusterConfig{Proxy: proxy}}
		if _, recent := c.Takeover(); recent {
			t.Fatalf("proxy %v: a recent takeover before any", proxy)
		}
		c.takeoverAt.Store(time.Now().UnixNano())
		c.takeovers.Add(1)
		n, recent := c.Takeover()
		if n != 1 || recent == proxy {
			t.Errorf("proxy %v: Takeover() = %d, %v after one just now; want 1, %v", proxy, n, recent, !proxy)
		}
	}
}
