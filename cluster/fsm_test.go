package cluster

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/shards"
)

// TestSnapshotOverlappingARebuildIsNotKept: a snapshot is taken (its
// index says every entry so far is in it), then the node stops leading
// and rebuilds its state while the snapshot is still to be written. The
// store that Persist reads was cleared and refilled under it, so the
// snapshot could miss keys that entries at or below its index set, and a
// later restart or rebuild from it would forget them: Persist fails and
// the sink is cancelled. A snapshot taken after the rebuild is kept.
func TestSnapshotOverlappingARebuildIsNotKept(t *testing.T) {
	store := shards.NewStore(shards.Options{Shards: 4})
	f := &fsm{store: store, fail: func(uint64, error) {}}
	now := int64(1_700_000_000e9)
	p := engine.Params{Limit: 10, Window: 60e9}
	for i := 0; i < 20; i++ {
		if _, err := store.Check(fmt.Appendf(nil, "k%d", i), engine.Fixed, p, 1, now); err != nil {
			t.Fatal(err)
		}
	}
	logs := raft.NewInmemStore()
	snaps, err := raft.NewFileSnapshotStore(t.TempDir(), 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	persist := func(s raft.FSMSnapshot) error {
		sink, err := snaps.Create(raft.SnapshotVersionMax, 1, 1, raft.Configuration{}, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s.Persist(sink)
	}

	taken, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.rebuild(logs, snaps); err != nil { // stops leading: the log holds nothing yet
		t.Fatal(err)
	}
	if err := persist(taken); !errors.Is(err, errStateReplaced) {
		t.Fatalf("Persist of a snapshot taken before a rebuild: %v, want errStateReplaced", err)
	}
	if metas, _ := snaps.List(); len(metas) != 0 {
		t.Fatalf("%d snapshots kept, want none", len(metas))
	}

	after, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := persist(after); err != nil {
		t.Fatalf("Persist of a snapshot taken after the rebuild: %v", err)
	}
	if metas, _ := snaps.List(); len(metas) != 1 {
		t.Fatalf("%d snapshots kept, want 1", len(metas))
	}
}
