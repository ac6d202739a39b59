package cluster

import (
	"testing"
	"time"
)

// TestTimeoutsByMode: strong mode keeps the configured raft timeouts and
// ticks every fifth of the heartbeat timeout; fast mode ticks every two
// thirds of it, doubles the lease, raises the heartbeat and election
// timeouts to it (raft's ValidateConfig wants the lease no longer than
// either), and gives leaders and heard followers three leases.
func TestTimeoutsByMode(t *testing.T) {
	cfg := ClusterConfig{HeartbeatTimeout: DefaultHeartbeatTimeout, ElectionTimeout: DefaultElectionTimeout,
		LeaderLeaseTimeout: DefaultLeaderLeaseTimeout}
	ms := time.Millisecond
	for _, tt := range []struct {
		name    string
		cfg     ClusterConfig
		relaxed bool
		tick    time.Duration
		want    raftTimeouts
	}{
		{"strong, defaults", cfg, false, 60 * ms, raftTimeouts{heartbeat: 300 * ms, election: 300 * ms, lease: 250 * ms, long: 300 * ms}},
		{"fast, defaults", cfg, true, 200 * ms, raftTimeouts{heartbeat: 500 * ms, election: 500 * ms, lease: 500 * ms, long: 1500 * ms}},
		{"fast, a long election timeout kept", ClusterConfig{HeartbeatTimeout: 300 * ms, ElectionTimeout: 2 * time.Second,
			LeaderLeaseTimeout: 100 * ms}, true, 200 * ms, raftTimeouts{heartbeat: 300 * ms, election: 2 * time.Second, lease: 200 * ms, long: 600 * ms}},
	} {
		tick, got := timeouts(tt.cfg, tt.relaxed)
		if tick != tt.tick || got != tt.want {
			t.Errorf("%s: tick %v, %+v; want %v, %+v", tt.name, tick, got, tt.tick, tt.want)
		}
		if got.lease > got.heartbeat || got.heartbeat > got.election || got.lease > got.long {
			t.Errorf("%s: %+v breaks raft's lease ≤ heartbeat timeout ≤ election timeout", tt.name, got)
		}
	}
}
