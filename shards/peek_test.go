package shards

import (
	"bytes"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/rlserver/rlserver/engine"
)

// snapshotKey returns a copy of key's record and, for a spilled log, its
// ring's entries: everything the store holds for the key.
func snapshotKey(s *Store, key []byte) ([]byte, []engine.Entry) {
	sh := s.shardFor(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i := sh.tab.find(key, tagOf(xxhash.Sum64(key)))
	if i < 0 {
		return nil, nil
	}
	rec := sh.tab.record(uint32(sh.tab.slots[i]))
	var e entry
	sh.tab.decode(i, &e)
	return bytes.Clone(rec[:recordLen(rec)]), logEntries(e.st.Log)
}

// TestPeekLeavesEveryAlgorithmAlone: RL.PEEK (a check of cost 0) with the
// key's parameters or others (a shorter window, a lower limit, another
// burst), now or later, leaves the key's record exactly as it was for
// every algorithm, a spilled log included, and the key answers as a twin
// that was never peeked at; before, a peek whose window had passed erased
// the key (issue 10, item 8).
func TestPeekLeavesEveryAlgorithmAlone(t *testing.T) {
	own := engine.Params{Limit: 100, Window: 60e9}
	others := []engine.Params{own, {Limit: 5, Window: 1e9}, {Limit: 1000, Window: 1e6}, {Limit: 3, Window: 3600e9, Burst: 1}}
	cases := []struct {
		name  string
		algo  engine.Algo
		count int // admissions of cost 1, 100 ms apart
	}{
		{"fixed", engine.Fixed, 5}, {"sliding", engine.Sliding, 5}, {"log inline", engine.Log, 5},
		{"log spilled", engine.Log, spillAt + 8}, {"token", engine.Token, 5}, {"leaky", engine.Leaky, 5},
		{"gcra", engine.GCRA, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, twin := New(1), New(1)
			key := []byte("k")
			now := int64(1_700_000_000e9)
			for i := 0; i < c.count; i++ {
				twin.Check(key, c.algo, own, 1, now)
				if r, err := s.Check(key, c.algo, own, 1, now); err != nil || !r.Allowed {
					t.Fatalf("admission %d: %+v, %v", i, r, err)
				}
				now += 1e8
			}
			rec, ring := snapshotKey(s, key)
			for _, p := range others {
				if !c.algo.Bucket() {
					p.Burst = 0
				}
				for _, later := range []int64{0, 2e9, 30e9} {
					if _, err := s.Check(key, c.algo, p, 0, now+later); err != nil {
						t.Fatal(err)
					}
					gotRec, gotRing := snapshotKey(s, key)
					if !bytes.Equal(gotRec, rec) || len(gotRing) != len(ring) {
						t.Fatalf("a peek with %+v at +%ds changed the key: record %x -> %x, ring %d -> %d entries",
							p, later/1e9, rec, gotRec, len(ring), len(gotRing))
					}
				}
			}
			now += 30e9
			want, _ := twin.Check(key, c.algo, own, 1, now)
			if got, _ := s.Check(key, c.algo, own, 1, now); got != want {
				t.Fatalf("after the peeks the key answers %+v, before %+v", got, want)
			}
		})
	}
}
