package meta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/rules"
)

// metaEntry is a meta log entry of cmd appended at t.
func metaEntry(t *testing.T, index uint64, at time.Time, cmd Cmd) *raft.Log {
	t.Helper()
	b, err := json.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: b, AppendedAt: at}
}

// bufSink is a raft.SnapshotSink in memory.
type bufSink struct{ bytes.Buffer }

func (s *bufSink) ID() string    { return "test" }
func (s *bufSink) Cancel() error { return nil }
func (s *bufSink) Close() error  { return nil }

// The meta group applies blocks at the time in their entries, the same on
// every replica: an expired block is dropped at the next block change,
// and blocks travel in the meta snapshot.
func TestMetaBlocks(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	f := New(nil)
	u1 := rules.Block{Identifier: "user=u1", Until: t0.Add(time.Minute).UnixNano(), Reason: "abuse"}
	ip := rules.Block{Identifier: "ip=1.2.3.4", Until: t0.Add(time.Hour).UnixNano(), Rule: "per-ip"}
	stale := rules.Block{Identifier: "ip=9.9.9.9", Until: t0.Add(-time.Second).UnixNano()}
	for i, b := range []rules.Block{u1, ip, stale} {
		if res := f.Apply(metaEntry(t, uint64(i+1), t0, Cmd{Op: "block.set", Block: &b})).(Result); res.Err != "" {
			t.Fatalf("block.set %s: %s", b.Identifier, res.Err)
		}
	}
	if got := f.Blocks().Active(t0.UnixNano()); len(got) != 2 || got[0].Identifier != "ip=1.2.3.4" || got[1].TTL != time.Minute {
		t.Fatalf("Active = %+v", got)
	}
	bad := rules.Block{Identifier: "nope", Until: u1.Until}
	if res := f.Apply(metaEntry(t, 4, t0, Cmd{Op: "block.set", Block: &bad})).(Result); res.Err == "" {
		t.Errorf("a bad identifier was applied")
	}
	// Two minutes on, user=u1 has expired: unblocking it lifts nothing.
	later := t0.Add(2 * time.Minute)
	if res := f.Apply(metaEntry(t, 5, later, Cmd{Op: "block.del", ID: "user=u1"})).(Result); res.Added {
		t.Errorf("block.del of an expired block reports it lifted")
	}
	if got := f.Blocks().Len(); got != 1 {
		t.Errorf("%d blocks held after the expired one was dropped, want 1", got)
	}
	snap, _ := f.Snapshot()
	var sink bufSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	g := New(nil)
	if err := g.Restore(io.NopCloser(&sink)); err != nil {
		t.Fatal(err)
	}
	if got := g.Blocks().Active(later.UnixNano()); len(got) != 1 || got[0] != (rules.Block{Identifier: "ip=1.2.3.4",
		Until: ip.Until, Rule: "per-ip", TTL: time.Hour - 2*time.Minute}) {
		t.Errorf("restored blocks: %+v", got)
	}
	if res := g.Apply(metaEntry(t, 6, later, Cmd{Op: "block.del", ID: "ip=1.2.3.4"})).(Result); !res.Added || g.Blocks() != nil {
		t.Errorf("block.del: %+v, table %v", res, g.Blocks())
	}
	if made := f.BlocksMade(); made["manual"] != 1 || made["per-ip"] != 1 {
		t.Errorf("blocks made: %v", made)
	}
}

// TestMetaBlocksCapped: a block.set beyond its Max (the proposer's
// --max-blocks) drops the blocks nearest to their end on every replica
// alike, and counts them; the blocks' memory is published for the stores'
// bound (ClusterConfig.BlockBytes).
func TestMetaBlocksCapped(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	var fs []*FSM
	var bytes [2]atomic.Int64
	for i := range 2 {
		fs = append(fs, New(&bytes[i]))
	}
	for i := 0; i < 300; i++ {
		b := rules.Block{Identifier: fmt.Sprintf("ip=%d", i), Until: t0.Add(time.Duration(300-i) * time.Minute).UnixNano()}
		e := metaEntry(t, uint64(i+1), t0, Cmd{Op: "block.set", Block: &b, Max: 100})
		for _, f := range fs {
			f.Apply(e)
		}
	}
	a, b := fs[0].Blocks().All(), fs[1].Blocks().All()
	if len(a) != 100 || !reflect.DeepEqual(a, b) || fs[0].BlocksDropped() != 200 {
		t.Fatalf("replicas hold %d and %d blocks, %d dropped", len(a), len(b), fs[0].BlocksDropped())
	}
	for _, x := range a { // those made first end last: they stay, with the new one
		if n, _ := strconv.Atoi(strings.TrimPrefix(x.Identifier, "ip=")); n >= 99 && n != 299 {
			t.Fatalf("%s stayed, a block nearer to its end than those dropped", x.Identifier)
		}
	}
	if got := bytes[0].Load(); got != fs[0].Blocks().Bytes() || got < 100*100 {
		t.Fatalf("BlockBytes %d, the table's %d", got, fs[0].Blocks().Bytes())
	}
}

// A block command carries its proposer's clock (Cmd.At), and blocks
// expire by it, not by the meta leader's wall clock (raft's AppendedAt):
// a meta leader whose wall clock stepped a day ahead drops nothing
// (before: every block expiring within the day, for good). An entry
// without At (an earlier version's) keeps AppendedAt.
func TestMetaBlocksExpireByTheProposersClock(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	ahead := t0.Add(24 * time.Hour)
	f := New(nil)
	held := rules.Block{Identifier: "ip=1.2.3.4", Until: t0.Add(15 * time.Minute).UnixNano()}
	f.Apply(metaEntry(t, 1, t0, Cmd{Op: "block.set", Block: &held, At: t0.UnixNano()}))
	other := rules.Block{Identifier: "ip=5.6.7.8", Until: t0.Add(time.Hour).UnixNano()}
	f.Apply(metaEntry(t, 2, ahead, Cmd{Op: "block.set", Block: &other, At: t0.Add(2 * time.Second).UnixNano()}))
	if got := f.Blocks().Active(t0.Add(3 * time.Second).UnixNano()); len(got) != 2 {
		t.Fatalf("after a block.set appended by a leader a day ahead: %+v, want both blocks", got)
	}
	f.Apply(metaEntry(t, 3, ahead, Cmd{Op: "block.del", ID: "ip=9.9.9.9"}))
	if got := f.Blocks().Len(); got != 0 {
		t.Fatalf("an entry without At, appended a day ahead: %d blocks left, want them expired by AppendedAt", got)
	}
}
