// Package walcompare measures hashicorp/raft-wal against raftlog, our
// Pebble log. It is a module of its own, so that raft-wal and what it
// needs stay out of rlserver's module graph.
package walcompare

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/rlserver/rlserver/raftlog"
)

// The benchmarks of this file compare this package's log (one Pebble
// database per node, every group's log in it, one WAL and its fsyncs
// shared) with hashicorp/raft-wal (a directory of segment files and a
// bbolt meta store per log, so one fsync stream per group), on the real
// disk. ../../raftlog/DESIGN.md ("Why not raft-wal") has the figures and the
// commands.

// logStores is one kind of log store: open returns n logs (each with its
// stable store) of one node, kept in dir.
type logStores struct {
	name string
	open func(b *testing.B, dir string, n int) []logAndStable
}

// logAndStable is what raft needs of a store besides snapshots.
type logAndStable interface {
	raft.LogStore
	raft.StableStore
}

func comparedStores() []logStores {
	return []logStores{{"pebble", openPebbleLogs}, {"raftwal", openWALs}}
}

// openPebbleLogs opens one database in dir holding n groups' logs.
func openPebbleLogs(b *testing.B, dir string, n int) []logAndStable {
	db, err := raftlog.OpenDB(dir, raftlog.Options{FS: vfs.Default})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := db.Close(); err != nil {
			b.Error(err)
		}
	})
	logs := make([]logAndStable, n)
	for i := range logs {
		s, err := raftlog.New(db, uint32(i+1))
		if err != nil {
			b.Fatal(err)
		}
		logs[i] = s
	}
	return logs
}

// openWALs opens n raft-wal logs, each in a directory of its own under dir.
func openWALs(b *testing.B, dir string, n int) []logAndStable {
	logs := make([]logAndStable, n)
	for i := range logs {
		sub := filepath.Join(dir, fmt.Sprint(i))
		if err := os.Mkdir(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		w, err := wal.Open(sub)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { w.Close() })
		logs[i] = w
	}
	return logs
}

// appendLoad is how groups append: size bytes per entry, one entry per
// StoreLogs call, every interval (0: back to back).
type appendLoad struct {
	name     string
	groups   int
	size     int
	interval time.Duration
}

// BenchmarkWALCompareStoreLogs appends b.N entries to each of 1 or 17 logs
// at once, in strong mode's pattern (small entries back to back) and fast
// mode's (an entry of a few KB every 10 ms per group), and reports the
// entries per second and the latency of StoreLogs.
func BenchmarkWALCompareStoreLogs(b *testing.B) {
	loads := []appendLoad{
		{"strong/1", 1, 100, 0}, {"strong/17", 17, 100, 0},
		{"fast/1", 1, 4 << 10, 10 * time.Millisecond}, {"fast/17", 17, 4 << 10, 10 * time.Millisecond},
		{"fast-heavy/17", 17, 64 << 10, 10 * time.Millisecond},
	}
	for _, ld := range loads {
		for _, st := range comparedStores() {
			b.Run(ld.name+"/"+st.name, func(b *testing.B) {
				logs := st.open(b, b.TempDir(), ld.groups)
				b.ResetTimer()
				lat := appendAll(b, logs, ld)
				b.StopTimer()
				reportLatency(b, lat, float64(len(lat))/b.Elapsed().Seconds(), "entries/s")
			})
		}
	}
}

// appendAll runs ld on logs, b.N entries per log, and returns the time
// each StoreLogs call took.
func appendAll(b *testing.B, logs []logAndStable, ld appendLoad) []time.Duration {
	lat := make([][]time.Duration, len(logs))
	var wg sync.WaitGroup
	for g, l := range logs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := make([]byte, ld.size)
			start := time.Now()
			for i := range b.N {
				if ld.interval > 0 {
					time.Sleep(time.Until(start.Add(time.Duration(i) * ld.interval)))
				}
				t0 := time.Now()
				err := l.StoreLogs([]*raft.Log{{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: data}})
				if err != nil {
					b.Error(err)
					return
				}
				lat[g] = append(lat[g], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	return slices.Concat(lat...)
}

// reportLatency reports rate (per second, named unit) and the 50th, 99th
// and 99.9th percentiles of lat in microseconds.
func reportLatency(b *testing.B, lat []time.Duration, rate float64, unit string) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds())
	}
	b.ReportMetric(rate, unit)
	b.ReportMetric(at(0.5), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
	b.ReportMetric(at(0.999), "p99.9-µs")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkWALCompareRaft runs real Raft groups (hashicorp/raft over
// InmemTransport, snapshots in memory) on each store, 1 and 3 nodes, 1 and
// 17 groups: every node keeps its groups' logs in one Pebble database, or
// in a raft-wal directory per group. Four clients per group apply 100-byte
// commands back to back on the leader, b.N per group; it reports commands
// per second and the latency of Apply until its future resolves.
func BenchmarkWALCompareRaft(b *testing.B) {
	for _, nodes := range []int{1, 3} {
		for _, groups := range []int{1, 17} {
			for _, st := range comparedStores() {
				b.Run(fmt.Sprintf("nodes=%d/groups=%d/%s", nodes, groups, st.name), func(b *testing.B) {
					groups := startGroups(b, st, nodes, groups)
					b.ResetTimer()
					lat, failed := applyAll(b, groups, 4)
					b.StopTimer()
					reportLatency(b, lat, float64(len(lat))/b.Elapsed().Seconds(), "cmds/s")
					b.ReportMetric(float64(failed), "failed")
				})
			}
		}
	}
}

// startGroups starts groups Raft groups of nodes voters each, every node
// with its own stores of kind st, and returns each group's voters once
// each group has a leader.
func startGroups(b *testing.B, st logStores, nodes, groups int) [][]*raft.Raft {
	stores := make([][]logAndStable, nodes) // by node, then group
	for n := range stores {
		stores[n] = st.open(b, b.TempDir(), groups)
	}
	all := make([][]*raft.Raft, groups)
	for g := range groups {
		rafts := make([]*raft.Raft, nodes)
		trans := make([]*raft.InmemTransport, nodes)
		var servers []raft.Server
		for n := range nodes {
			addr, t := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("g%d-n%d", g, n)))
			trans[n] = t
			servers = append(servers, raft.Server{ID: raft.ServerID(addr), Address: addr})
		}
		for i := range trans {
			for j := range trans {
				if i != j {
					trans[i].Connect(trans[j].LocalAddr(), trans[j])
				}
			}
		}
		for n := range nodes {
			rafts[n] = startRaft(b, stores[n][g], trans[n], servers)
		}
		waitLeader(b, rafts)
		all[g] = rafts
	}
	return all
}

// startRaft starts one voter of a new group on s.
func startRaft(b *testing.B, s logAndStable, t *raft.InmemTransport, servers []raft.Server) *raft.Raft {
	cfg := raft.DefaultConfig()
	cfg.LocalID = raft.ServerID(t.LocalAddr())
	// The cluster package's default timeouts.
	cfg.HeartbeatTimeout, cfg.ElectionTimeout = 300*time.Millisecond, 300*time.Millisecond
	cfg.LeaderLeaseTimeout, cfg.CommitTimeout = 250*time.Millisecond, 5*time.Millisecond
	cfg.LogOutput = io.Discard
	cfg.SnapshotThreshold = 1 << 40 // no snapshots: the logs are compared
	r, err := raft.NewRaft(cfg, nopFSM{}, s, s, raft.NewInmemSnapshotStore(), t)
	if err != nil {
		b.Fatal(err)
	}
	if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Shutdown().Error() })
	return r
}

// waitLeader returns the group's leader once one of rafts leads.
func waitLeader(b *testing.B, rafts []*raft.Raft) *raft.Raft {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, r := range rafts {
			if r.State() == raft.Leader {
				return r
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.Error("no leader within 10s")
	return rafts[0]
}

// applyAll applies b.N commands to each group from clients goroutines per
// group, and returns the latency of every Apply that succeeded and how many
// failed (a leader that lost its leadership; the client then finds the new
// leader and goes on).
func applyAll(b *testing.B, groups [][]*raft.Raft, clients int) ([]time.Duration, int64) {
	lat := make([][]time.Duration, len(groups)*clients)
	var failed atomic.Int64
	var wg sync.WaitGroup
	for i := range lat {
		rafts := groups[i/clients]
		n := b.N / clients
		if i%clients < b.N%clients {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := make([]byte, 100)
			r := waitLeader(b, rafts)
			for range n {
				t0 := time.Now()
				if err := r.Apply(cmd, 10*time.Second).Error(); err != nil {
					failed.Add(1)
					r = waitLeader(b, rafts)
					continue
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	return slices.Concat(lat...), failed.Load()
}

// nopFSM applies nothing: the benchmark measures the log.
type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                    { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error)    { return nopSnapshot{}, nil }
func (nopFSM) Restore(rc io.ReadCloser) error         { return rc.Close() }
func (nopSnapshot) Persist(s raft.SnapshotSink) error { return s.Close() }
func (nopSnapshot) Release()                          {}

type nopSnapshot struct{}
