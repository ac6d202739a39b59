package shards_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/shards"
)

// Blocks travel like rules: in the journal (AppendChanges) and in
// snapshots (AppendRules), and a replica applying them at the time they
// were written holds the same blocks; an expired block does not come back.
func TestBlocksTravelInRecords(t *testing.T) {
	s := shards.New(4)
	s.EnableJournal()
	s.SetRule(rules.Rule{ID: "r", Target: "*", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 1, Window: "1s",
		Block: &rules.BlockSpec{After: 2, Within: "1m", For: "10m"}})
	s.SetBlock(rules.Block{Identifier: "user=u1", Until: now0 + 60e9, Reason: "by hand"}, now0)
	s.SetBlock(rules.Block{Identifier: "user=gone", Until: now0 + 5e9}, now0)
	s.SetBlock(rules.Block{Identifier: "user=lifted", Until: now0 + 60e9}, now0)
	if lifted, err := s.Unblock("user=lifted", now0); !lifted || err != nil {
		t.Fatalf("Unblock: %v %v", lifted, err)
	}
	q := &rules.Query{}
	for i := 0; i < 3; i++ { // one allowed, two denied: blocked
		q.Reset()
		q.Target, q.Tier, q.Cost = []byte("/x"), []byte("t"), 1
		q.AddID([]byte("ip"), []byte("1.2.3.4"))
		s.CheckRules(q, now0)
	}
	journal, _ := s.AppendChanges(nil)
	snap, _ := s.AppendRules(nil)
	want := []string{"ip=1.2.3.4", "user=gone", "user=u1"}
	if got := ids(s.ActiveBlocks(now0)); !reflect.DeepEqual(got, want) {
		t.Fatalf("ActiveBlocks = %v, want %v", got, want)
	}
	for name, recs := range map[string][]byte{"journal": journal, "snapshot": snap} {
		r := shards.New(8)
		if _, err := r.ApplyRecords(recs, now0); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := ids(r.ActiveBlocks(now0)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: ActiveBlocks = %v, want %v", name, got, want)
		}
		if name == "journal" && r.Digest(now0) != s.Digest(now0) {
			t.Errorf("%s: digests differ", name)
		}
		// Replayed later, after user=gone expired: it does not come back.
		late := shards.New(8)
		late.ApplyRecords(recs, now0+6e9)
		if got := ids(late.ActiveBlocks(now0 + 6e9)); !reflect.DeepEqual(got, []string{"ip=1.2.3.4", "user=u1"}) {
			t.Errorf("%s replayed late: ActiveBlocks = %v", name, got)
		}
	}
	b := s.ActiveBlocks(now0 + 1e9)[0]
	if b.Rule != "r" || b.TTL != 10*time.Minute-time.Second || b.Reason != "rule r denied it 2 times within 1m0s" {
		t.Errorf("the rule's block = %+v", b)
	}
	st := s.BlockStats(now0)
	if st.Made["r"] != 1 || st.Made["manual"] != 3 || st.Active != 3 {
		t.Errorf("BlockStats = %+v", st)
	}
	s.Sweep(now0+61e9, 100)
	if got := ids(s.ActiveBlocks(now0 + 61e9)); !reflect.DeepEqual(got, []string{"ip=1.2.3.4"}) {
		t.Errorf("after a sweep: %v", got)
	}
}

func ids(bs []rules.Block) []string {
	out := []string{}
	for _, b := range bs {
		out = append(out, b.Identifier)
	}
	return out
}

// The block records' encoding is part of the log and snapshot format:
// it must not change under existing logs.
func TestBlockRecordEncoding(t *testing.T) {
	s := shards.New(1)
	s.EnableJournal()
	s.SetBlock(rules.Block{Identifier: "ip=1.2.3.4", Until: 1_700_000_060_000_000_000, Reason: "r", Rule: "x"}, now0)
	s.Unblock("user=u1", now0) // not blocked: no record
	s.SetBlock(rules.Block{Identifier: "user=u1", Until: now0 + 1}, now0)
	s.Unblock("user=u1", now0)
	got, n := s.AppendChanges(nil)
	want := "\x08\x47" + `{"id":"ip=1.2.3.4","until":1700000060000000000,"reason":"r","rule":"x"}` +
		"\x08\x2c" + `{"id":"user=u1","until":1700000040000000001}` +
		"\x09\x07user=u1"
	if string(got) != want || n != 3 {
		t.Errorf("records (%d):\n%q\nwant\n%q", n, got, want)
	}
}
