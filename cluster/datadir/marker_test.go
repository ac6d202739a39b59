package datadir

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/rlserver/rlserver/internal/testutil"
)

// TestMarkFollowsASuffixDeletion: raft deletes the end of a follower's log
// when it conflicts with its leader's; the mark's last index for the
// group goes down before the entries go, so a crash right after the
// deletion is not taken for a loss; DropGroup takes the group off the
// mark. (The directory is never initialised, as on a first start that
// stops before its group is bootstrapped: that is not damage either.)
func TestMarkFollowsASuffixDeletion(t *testing.T) {
	fs := vfs.NewCrashableMem()
	st, err := OpenStorage("/data", StorageOptions{FS: fs, MarkInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logs, _, err := st.GroupStorage(3, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ls []*raft.Log
	for i := uint64(1); i <= 20; i++ {
		ls = append(ls, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte("x")})
	}
	if err := logs.StoreLogs(ls); err != nil {
		t.Fatal(err)
	}
	testutil.WaitForErr(t, 10*time.Second, "the mark to record index 20 of group 3", func() error {
		if m, err := readMark(fs, "/data"); m == nil || m.groups[3] != 20 {
			return fmt.Errorf("the mark: %+v %v", m, err)
		}
		return nil
	})
	if err := logs.DeleteRange(15, 20); err != nil {
		t.Fatal(err)
	}
	img := fs.CrashClone(vfs.CrashCloneCfg{})
	if m, _ := readMark(img, "/data"); m == nil || m.groups[3] != 14 {
		t.Fatalf("the mark after the deletion: %+v, want group 3 at 14", m)
	}
	again, err := OpenStorage("/data", StorageOptions{FS: img})
	if err != nil {
		t.Fatalf("a crash right after the deletion: %v", err)
	}
	again.Close()
	if err := st.DropGroup(3); err != nil {
		t.Fatal(err)
	}
	if m, _ := readMark(fs, "/data"); m == nil || m.groups[3] != 0 {
		t.Fatalf("the mark after DropGroup: %+v, want no group 3", m)
	}
}

// TestMarkerSleepsWhileNothingChanges: once every synced write is marked
// the marker stops its ticker (an idle cluster node's CPU is its
// wake-ups), and a log append or a snapshot saved after that wakes it: the
// file then records the append, and a new counter, within the interval.
func TestMarkerSleepsWhileNothingChanges(t *testing.T) {
	fs := vfs.NewMem()
	st, err := OpenStorage("/data", StorageOptions{FS: fs, MarkInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logs, snaps, err := st.GroupStorage(3, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	k := st.marks
	counter := func() uint64 {
		m, err := readMark(fs, "/data")
		if err != nil || m == nil {
			t.Fatalf("the mark: %+v %v", m, err)
		}
		return m.counter
	}
	for i := uint64(1); i <= 3; i++ {
		testutil.WaitFor(t, 10*time.Second, "the marker to sleep", k.asleep.Load)
		before := counter()
		if err := logs.StoreLogs([]*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte("x")}}); err != nil {
			t.Fatal(err)
		}
		testutil.WaitForErr(t, 10*time.Second, "the append marked", func() error {
			if m, err := readMark(fs, "/data"); m == nil || m.groups[3] != i || m.counter <= before {
				return fmt.Errorf("the mark: %+v %v, want group 3 at %d and a counter over %d", m, err, i, before)
			}
			return nil
		})
	}
	testutil.WaitFor(t, 10*time.Second, "the marker to sleep", k.asleep.Load)
	before := counter()
	sink, err := snaps.Create(raft.SnapshotVersionMax, 3, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink.Write([]byte("state"))
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "a new counter after the snapshot", func() bool { return counter() > before })
}
