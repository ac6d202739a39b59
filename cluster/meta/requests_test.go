package meta

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/rules"
)

// TestMetaRequestAppliedOnce: a meta request applied again (its proposer
// retried it) changes nothing and is answered as the first time; a
// request's answer survives a snapshot; a request that was never applied
// is applied.
func TestMetaRequestAppliedOnce(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	f := New(nil)
	r := rules.Rule{ID: "a", Target: "/x", Tier: "*", KeyType: "user", Algo: "fixed", Limit: 5, Window: "1m"}
	create := Cmd{Op: "rule.create", Rule: &r, Req: "n1:x:1"}
	if res := f.Apply(metaEntry(t, 1, t0, create)).(Result); res.Err != "" {
		t.Fatalf("create: %+v", res)
	}
	if res := f.Apply(metaEntry(t, 2, t0, create)).(Result); res.Err != "" || res.Exists {
		t.Fatalf("the same create again: %+v, want the first answer (created)", res)
	}
	del := Cmd{Op: "rule.del", ID: "a", Req: "n1:x:2"}
	if res := f.Apply(metaEntry(t, 3, t0, del)).(Result); !res.Added {
		t.Fatalf("delete: %+v", res)
	}
	snap, _ := f.Snapshot()
	var sink bufSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	g := New(nil)
	if err := g.Restore(readCloser{strings.NewReader(sink.String())}); err != nil {
		t.Fatal(err)
	}
	if res := g.Apply(metaEntry(t, 4, t0, del)).(Result); !res.Added {
		t.Fatalf("the delete again after a snapshot: %+v, want the first answer (it existed)", res)
	}
	if res := g.Apply(metaEntry(t, 5, t0, create)).(Result); res.Err != "" || g.Current().Rules["a"].ID == "a" {
		t.Fatalf("the create again after a snapshot: %+v; it must not be made again", res)
	}
	again := create
	again.Req = "n1:x:3"
	if res := g.Apply(metaEntry(t, 6, t0, again)).(Result); res.Err != "" || g.Current().Rules["a"].ID != "a" {
		t.Fatalf("a new create: %+v", res)
	}
}

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }

// TestMetaRequestsRemembered: the meta group remembers the last MaxDone
// requests, oldest forgotten first, and a snapshot keeps them in order.
func TestMetaRequestsRemembered(t *testing.T) {
	f := New(nil)
	for i := 0; i < MaxDone+10; i++ {
		f.remember(fmt.Sprintf("r%d", i), Result{Added: i%2 == 0})
	}
	if len(f.done) != MaxDone {
		t.Fatalf("%d remembered", len(f.done))
	}
	order := f.doneOrder()
	if order[0] != "r10" || order[MaxDone-1] != fmt.Sprintf("r%d", MaxDone+9) {
		t.Fatalf("oldest %s, newest %s", order[0], order[MaxDone-1])
	}
	if _, ok := f.done["r9"]; ok {
		t.Fatal("r9, beyond the bound, is remembered")
	}
	snap, _ := f.Snapshot()
	var sink bufSink
	snap.Persist(&sink)
	g := New(nil)
	if err := g.Restore(readCloser{strings.NewReader(sink.String())}); err != nil {
		t.Fatal(err)
	}
	if got := g.doneOrder(); len(got) != MaxDone || got[0] != "r10" || !g.done["r10"].Added {
		t.Fatalf("restored: %d, first %s", len(got), got[0])
	}
}
