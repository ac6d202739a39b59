package datadir

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/internal/logbuf"
	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/raftlog"
)

// The tests of a directory that need no node. Those that open a
// standalone node on a damaged directory, and count what its keys kept,
// are package cluster's (damage_test.go, storage_test.go there).

// rejectingReplayer is a Replayer that can read no entry, as package
// cluster's replay cannot read the raw bytes these tests store as
// entries; it holds no state, so it serves directories without snapshots.
type rejectingReplayer struct{}

func (rejectingReplayer) RestoreLatest(snaps raft.SnapshotStore, index uint64) (uint64, error) {
	metas, err := snaps.List()
	if err != nil || len(metas) > 0 {
		return 0, errors.Join(err, errors.New("rejectingReplayer restores no snapshot"))
	}
	return 0, nil
}

func (rejectingReplayer) ApplyCommand([]byte) error { return errors.New("not an entry") }

func (rejectingReplayer) WriteSnapshot(io.Writer) error {
	return errors.New("rejectingReplayer writes no snapshot")
}

func rejecting() Replayer { return rejectingReplayer{} }

// TestDamagedClusterDirectory: a cluster node's directory is checked group
// by group, the meta group (0) and each data group; with AcceptDataLoss a
// data group's log is cut back to what raft can start on, a data group
// left with nothing is dropped (its leader sends it the state again), and
// a meta group left with nothing cannot be repaired.
func TestDamagedClusterDirectory(t *testing.T) {
	seed := t.TempDir()
	st, err := OpenStorage(seed, StorageOptions{NodeID: "n1", Replay: rejecting})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SaveLayout(Layout{Version: 1, Groups: 2, Hosted: []uint32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	for g := uint32(0); g <= 2; g++ {
		logs, _, err := st.GroupStorage(g, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		var ls []*raft.Log
		for i := uint64(1); i <= 20; i++ {
			ls = append(ls, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: fmt.Appendf(nil, "g%d-%d", g, i)})
		}
		if err := logs.StoreLogs(ls); err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(st.MarkInitialised(), st.Close()); err != nil {
		t.Fatal(err)
	}
	deleteLog := func(dir string, g uint32, from, to uint64) {
		t.Helper()
		db, err := raftlog.OpenDB(filepath.Join(dir, DBDir), raftlog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.DeleteRange(raftlog.LogKey(g, from), raftlog.LogKey(g, to+1), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name     string
		group    uint32
		from, to uint64
		refusal  string
		accepted bool
		last     uint64 // the group's last index after the accepted start
	}{
		{"a hole in a data group", 2, 5, 9, "group 2: log entries 5-9 are missing", true, 4},
		{"a data group's whole log", 1, 1, 20, "group 1: log entries 1-20 are missing", true, 0},
		{"the meta group's whole log", 0, 1, 20, "group 0: log entries 1-20 are missing", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testutil.CopyDir(t, seed)
			deleteLog(dir, tc.group, tc.from, tc.to)
			if _, err := OpenStorage(dir, StorageOptions{Replay: rejecting}); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), tc.refusal) {
				t.Fatalf("OpenStorage: %v, want ErrDamaged with %q", err, tc.refusal)
			}
			var logs logbuf.Buffer
			st, err := OpenStorage(dir, StorageOptions{AcceptDataLoss: true, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Replay: rejecting})
			if !tc.accepted {
				if !errors.Is(err, ErrUnrepairable) {
					t.Fatalf("with AcceptDataLoss: %v, want ErrUnrepairable", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("with AcceptDataLoss: %v", err)
			}
			defer st.Close()
			l, _, err := st.GroupStorage(tc.group, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			if last, _ := l.LastIndex(); last != tc.last {
				t.Errorf("group %d's last index %d, want %d", tc.group, last, tc.last)
			}
			if len(logs.Lines("level=ERROR")) == 0 {
				t.Errorf("nothing logged at ERROR")
			}
			for _, g := range []uint32{0, 1, 2} {
				if g == tc.group {
					continue
				}
				if l, _, _ := st.GroupStorage(g, 1, nil); l != nil {
					if last, _ := l.LastIndex(); last != 20 {
						t.Errorf("group %d, undamaged, lost entries: last %d", g, last)
					}
				}
			}
		})
	}
}
