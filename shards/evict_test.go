package shards

import (
	"errors"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/rules"
)

// TestMaxMemoryStaysFlat: a flood of new keys into a Store bounded to
// 4 MB keeps its memory at the bound (never above it by more than a few
// pages a shard), evicts, and keeps the keys whose state lasts longest:
// volatile-ttl evicts the state nearest to fresh first.
func TestMaxMemoryStaysFlat(t *testing.T) {
	const max = 4 << 20
	s := NewStore(Options{Shards: 16, MaxMemory: max})
	now := int64(1_700_000_000e9)
	long, short := engine.Params{Limit: 10, Window: 3600e9}, engine.Params{Limit: 10, Window: 10e9}
	peak, low := int64(0), int64(max)
	for i := 0; i < 400_000; i++ {
		p, key := short, "s:"+strconv.Itoa(i)
		if i%2 == 0 {
			p, key = long, "l:"+strconv.Itoa(i)
		}
		if _, err := s.Check([]byte(key), engine.Fixed, p, 1, now); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 {
			m := s.MemoryBytes()
			peak = max64(peak, m)
			if i > 200_000 {
				low = min(low, m)
			}
		}
	}
	if peak > max+max/20 || low < max*3/4 {
		t.Fatalf("memory ranged from %d to %d under a bound of %d", low, peak, max)
	}
	if s.Evicted() == 0 {
		t.Fatal("nothing was evicted")
	}
	longLeft, shortLeft := 0, 0
	for i := 0; i < 400_000; i++ {
		p, key, left := short, "s:"+strconv.Itoa(i), &shortLeft
		if i%2 == 0 {
			p, key, left = long, "l:"+strconv.Itoa(i), &longLeft
		}
		if r, _ := s.Check([]byte(key), engine.Fixed, p, 0, now); r.Remaining == 9 {
			*left++
		}
	}
	if longLeft < 5*shortLeft {
		t.Fatalf("%d keys of 1 h windows kept, %d of 10 s windows: want the longer-lasting state kept", longLeft, shortLeft)
	}
}

func max64(a, b int64) int64 { return max(a, b) }

// TestNoEvictionRefusesNewKeys: under noeviction a full Store answers
// ErrOOM for new keys, nothing else, and goes on checking the keys it has.
func TestNoEvictionRefusesNewKeys(t *testing.T) {
	s := NewStore(Options{Shards: 4, MaxMemory: 1 << 20, Policy: NoEviction})
	now := int64(1_700_000_000e9)
	p := engine.Params{Limit: 10, Window: 3600e9}
	var kept []string
	refused := 0
	for i := 0; i < 100_000; i++ {
		key := "k:" + strconv.Itoa(i)
		_, err := s.Check([]byte(key), engine.Token, p, 1, now)
		switch {
		case errors.Is(err, ErrOOM):
			refused++
		case err != nil:
			t.Fatal(err)
		default:
			kept = append(kept, key)
		}
	}
	if refused == 0 || s.Evicted() != 0 || s.MemoryBytes() > 1<<20+1<<16 {
		t.Fatalf("refused %d, evicted %d, memory %d", refused, s.Evicted(), s.MemoryBytes())
	}
	for _, key := range kept[:100] {
		if r, err := s.Check([]byte(key), engine.Token, p, 1, now); err != nil || r.Remaining != 8 {
			t.Fatalf("an existing key: %+v, %v", r, err)
		}
	}
	// A peek of a new key needs no room; CL.THROTTLE and multi-key checks
	// of new keys are refused too, charging nothing.
	if _, err := s.Check([]byte("new"), engine.Token, p, 0, now); err != nil {
		t.Fatalf("a peek: %v", err)
	}
	if _, err := s.Throttle([]byte("new"), 10, 10, 60, 1, now); !errors.Is(err, ErrOOM) {
		t.Fatalf("CL.THROTTLE of a new key: %v", err)
	}
	ops := []Op{{Key: []byte(kept[0]), Algo: engine.Token, Params: p}, {Key: []byte("new"), Algo: engine.Token, Params: p}}
	if _, err := s.CheckAll(ops, 1, now); !errors.Is(err, ErrOOM) {
		t.Fatalf("CheckAll with a new key: %v", err)
	}
	if r, _ := s.Check([]byte(kept[0]), engine.Token, p, 0, now); r.Remaining != 8 {
		t.Fatalf("the refused CheckAll charged its existing key: %+v", r)
	}
}

// TestOtherMemoryCounts: memory used outside the Store (connection
// buffers) counts against the bound.
func TestOtherMemoryCounts(t *testing.T) {
	var other atomic.Int64
	s := NewStore(Options{Shards: 4, MaxMemory: 2 << 20, Other: &other})
	now := int64(1_700_000_000e9)
	p := engine.Params{Limit: 10, Window: 3600e9}
	fill := func(from int) {
		for i := from; i < from+100_000; i++ {
			s.Check([]byte("k:"+strconv.Itoa(i)), engine.Fixed, p, 1, now)
		}
	}
	fill(0)
	if m := s.MemoryBytes(); m < 3<<19 {
		t.Fatalf("with nothing else the store holds %d bytes of 2 MB", m)
	}
	other.Store(1 << 20)
	fill(100_000)
	if m := s.MemoryBytes(); m > 1<<20+1<<17 {
		t.Fatalf("with 1 MB held elsewhere the store holds %d bytes", m)
	}
}

// TestBlocksCappedAndCounted: beyond Options.MaxBlocks a new block drops
// the blocks nearest to their end first (counted in BlockStats.Dropped),
// and a replay of the journal drops the same ones; the blocks' memory is
// in MemoryBytes and BlockStats.Bytes, and under MaxMemory the keys made
// next make room for it. Before, blocks were neither bounded nor counted.
func TestBlocksCappedAndCounted(t *testing.T) {
	now := int64(1_700_000_000e9)
	s := NewStore(Options{Shards: 4, MaxMemory: 1 << 20, MaxBlocks: 1000})
	s.EnableJournal()
	p := engine.Params{Limit: 10, Window: 3600e9}
	for i := 0; i < 40_000; i++ {
		s.Check([]byte("k:"+strconv.Itoa(i)), engine.Fixed, p, 1, now)
	}
	keysOnly := s.MemoryBytes()
	for i := 0; i < 5000; i++ { // each lasts longer than the one before: the first ones go
		b := rules.Block{Identifier: "ip=" + strconv.Itoa(i), Until: now + int64(i+1)*1e9, Reason: "r", Since: now}
		if err := s.SetBlock(b, now); err != nil {
			t.Fatal(err)
		}
	}
	st := s.BlockStats(now)
	if st.Active != 1000 || st.Dropped != 4000 || s.ActiveBlocks(now)[0].Identifier != "ip=4000" {
		t.Fatalf("after 5000 blocks at a bound of 1000: %d live, %d dropped, first %s", st.Active, st.Dropped, s.ActiveBlocks(now)[0].Identifier)
	}
	if _, held := s.NewestBlocks(1, now); held != 1000 {
		t.Fatalf("NewestBlocks counts %d", held)
	}
	if st.Bytes < 1000*100 || s.MemoryBytes() < keysOnly+st.Bytes {
		t.Fatalf("blocks take %d bytes; the store counts %d, its keys %d", st.Bytes, s.MemoryBytes(), keysOnly)
	}
	for i := 40_000; i < 80_000; i++ {
		s.Check([]byte("k:"+strconv.Itoa(i)), engine.Fixed, p, 1, now)
	}
	if m := s.MemoryBytes(); m > 1<<20 || m-st.Bytes > keysOnly {
		t.Fatalf("keys and blocks take %d bytes (blocks %d, keys alone before %d) of a 1 MB bound", m, st.Bytes, keysOnly)
	}
	journal, _ := s.AppendChanges(nil)
	r := NewStore(Options{Shards: 4, MaxBlocks: 1000})
	if _, err := r.ApplyRecords(journal, now); err != nil {
		t.Fatal(err)
	}
	if got, want := r.ActiveBlocks(now), s.ActiveBlocks(now); len(got) != 1000 || got[0] != want[0] || got[999] != want[999] {
		t.Fatalf("the replay holds %d blocks, first %+v, want %+v", len(got), got[0], want[0])
	}
}
