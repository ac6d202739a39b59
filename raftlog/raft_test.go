package raftlog_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/raftlog"
	"github.com/rlserver/rlserver/snapshot"
)

// counter is a tiny FSM: it sums the uint64 in each command.
type counter struct {
	mu       sync.Mutex
	total    uint64
	applied  int // commands applied since this FSM was made
	restored int // snapshots restored into it
}

func (c *counter) Apply(l *raft.Log) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(l.Data) != 8 {
		return fmt.Errorf("command of %d bytes", len(l.Data))
	}
	c.total += binary.BigEndian.Uint64(l.Data)
	c.applied++
	return c.total
}

func (c *counter) Snapshot() (raft.FSMSnapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return counterSnapshot(c.total), nil
}

func (c *counter) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	if len(b) != 8 {
		return fmt.Errorf("snapshot of %d bytes", len(b))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total, c.restored = binary.BigEndian.Uint64(b), c.restored+1
	return nil
}

func (c *counter) state() (total uint64, applied, restored int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total, c.applied, c.restored
}

type counterSnapshot uint64

func (s counterSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(binary.BigEndian.AppendUint64(nil, uint64(s))); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (counterSnapshot) Release() {}

const trailingLogs = 10

// node is one single-voter Raft group on a Store and a snapshot Store.
type node struct {
	raft  *raft.Raft
	fsm   *counter
	logs  *raftlog.Store
	snaps *snapshot.Store
}

func startNode(t *testing.T, db *pebble.DB, bootstrap bool) *node {
	t.Helper()
	logs, err := raftlog.New(db, 1)
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := snapshot.NewStore(db, 1, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, trans := raft.NewInmemTransport("n1")
	conf := raft.DefaultConfig()
	conf.LocalID = "n1"
	conf.HeartbeatTimeout = 50 * time.Millisecond
	conf.ElectionTimeout = 50 * time.Millisecond
	conf.LeaderLeaseTimeout = 50 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.SnapshotThreshold = 1 << 40 // snapshots only when the test asks
	conf.TrailingLogs = trailingLogs
	conf.LogOutput, conf.LogLevel = io.Discard, "ERROR"
	if bootstrap {
		cfg := raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: addr}}}
		if err := raft.BootstrapCluster(conf, logs, logs, snaps, trans, cfg); err != nil {
			t.Fatalf("bootstrap: %v", err)
		}
	}
	fsm := &counter{}
	r, err := raft.NewRaft(conf, fsm, logs, logs, snaps, trans)
	if err != nil {
		t.Fatalf("NewRaft: %v", err)
	}
	return &node{r, fsm, logs, snaps}
}

func (n *node) apply(t *testing.T, from, to uint64) (sum uint64) {
	t.Helper()
	for v := from; v <= to; v++ {
		if err := n.raft.Apply(binary.BigEndian.AppendUint64(nil, v), 5*time.Second).Error(); err != nil {
			t.Fatalf("apply %d: %v", v, err)
		}
		sum += v
	}
	return sum
}

// TestRaftRestart runs a real single-voter Raft on a Store and a snapshot
// Store: entries, a snapshot (which truncates the log), more entries, a
// shutdown and a reopen of the database. The FSM comes back from the
// snapshot plus the log's tail, and the truncated entries stay gone.
func TestRaftRestart(t *testing.T) {
	fs := vfs.NewMem()
	db, err := raftlog.OpenDB("db", raftlog.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, db, true)
	testutil.WaitFor(t, 10*time.Second, "leadership", func() bool { return n.raft.State() == raft.Leader })
	before := n.apply(t, 1, 100)

	fut := n.raft.Snapshot()
	if err := fut.Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	meta, rc, err := fut.Open()
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	first, _ := n.logs.FirstIndex()
	if want := meta.Index - trailingLogs + 1; first != want {
		t.Fatalf("after a snapshot at %d, FirstIndex = %d, want %d (%d trailing logs)", meta.Index, first, want, trailingLogs)
	}
	after := n.apply(t, 1000, 1029)
	last, _ := n.logs.LastIndex()
	if err := n.raft.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = raftlog.OpenDB("db", raftlog.Options{FS: fs, MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n = startNode(t, db, false)
	defer func() {
		if err := n.raft.Shutdown().Error(); err != nil {
			t.Error(err)
		}
	}()
	if total, applied, restored := n.fsm.state(); total != before || applied != 0 || restored != 1 {
		t.Fatalf("after NewRaft: total %d, %d applied, %d restored; want %d from the snapshot", total, applied, restored, before)
	}
	testutil.WaitFor(t, 10*time.Second, "leadership after the restart", func() bool { return n.raft.State() == raft.Leader })
	testutil.WaitFor(t, 10*time.Second, "the log's tail to be applied", func() bool { total, _, _ := n.fsm.state(); return total == before+after })
	if _, applied, restored := n.fsm.state(); applied != 30 || restored != 1 {
		t.Fatalf("replayed %d commands and restored %d snapshots, want the 30 after the snapshot and 1", applied, restored)
	}
	if f, _ := n.logs.FirstIndex(); f != first {
		t.Fatalf("FirstIndex after the restart = %d, want %d", f, first)
	}
	if l, _ := n.logs.LastIndex(); l <= last {
		t.Fatalf("LastIndex after the restart = %d, want past %d (the new leader's entry)", l, last)
	}
	var l raft.Log
	if err := n.logs.GetLog(first-1, &l); err != raft.ErrLogNotFound {
		t.Fatalf("GetLog of a truncated entry = %v", err)
	}
	if metas, err := n.snaps.List(); err != nil || len(metas) != 1 || metas[0].ID != meta.ID {
		t.Fatalf("snapshots after the restart: %v, %v", metas, err)
	}
	if st := n.logs.Stats(); st.Appends == 0 || st.Syncs < st.Appends {
		t.Fatalf("Stats after the restart: %+v", st)
	}
	// Raft still works on the reopened stores.
	if got := n.apply(t, 5, 5); got != 5 {
		t.Fatal("apply after the restart")
	}
	if total, _, _ := n.fsm.state(); total != before+after+5 {
		t.Fatalf("total %d after one more command", total)
	}
}
