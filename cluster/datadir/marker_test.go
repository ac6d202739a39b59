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
