package rules

import (
	"fmt"
	"runtime"
	"sort"
	"testing"

	"github.com/rlserver/rlserver/internal/testseed"
)

// TestBlockTableCappedMatchesModel: random blocks put with WithCapped,
// lifted with Without and pruned give, at every step, the table a naive
// model gives: beyond the cap, the block nearest to its end (the first
// identifier among ties) is dropped; Len, Bytes, Live, Active and Newest
// agree with the model; the old tables are unchanged.
func TestBlockTableCappedMatchesModel(t *testing.T) {
	rng := testseed.Rand(t)
	const max = 50
	model := map[string]Block{}
	var tab *BlockTable
	dropped := 0
	for step := 0; step < 5000; step++ {
		now := int64(step)
		switch op := rng.IntN(10); {
		case op < 7:
			b := Block{Identifier: fmt.Sprintf("ip=%d", rng.IntN(120)), Until: now + 1 + int64(rng.IntN(300)),
				Rule: "r", Reason: "why", Since: now}
			if _, held := model[b.Identifier]; !held {
				for len(model) >= max {
					delete(model, earliest(model))
					dropped++
				}
			}
			model[b.Identifier] = b
			before := tab
			lenBefore := before.Len()
			var d int
			tab, d = tab.WithCapped(b, max)
			dropped -= d
			if before.Len() != lenBefore {
				t.Fatalf("step %d: WithCapped changed the old table", step)
			}
		case op < 9:
			id := fmt.Sprintf("ip=%d", rng.IntN(120))
			delete(model, id)
			tab, _ = tab.Without(id, now)
		default:
			for id, b := range model {
				if b.Until <= now {
					delete(model, id)
				}
			}
			tab = tab.Pruned(now)
		}
		if dropped != 0 {
			t.Fatalf("step %d: dropped %d more or fewer than the model", step, dropped)
		}
		assertModel(t, step, tab, model, now)
	}
}

// earliest returns the identifier of the model's block nearest to its
// end, the least identifier among ties... as the table orders ties: by
// bucket, then identifier.
func earliest(m map[string]Block) string {
	best := ""
	for id, b := range m {
		if best == "" {
			best = id
			continue
		}
		o := m[best]
		bi, oi := bucketOf(id), bucketOf(best)
		if b.Until < o.Until || b.Until == o.Until && (bi < oi || bi == oi && id < best) {
			best = id
		}
	}
	return best
}

func assertModel(t *testing.T, step int, tab *BlockTable, model map[string]Block, now int64) {
	t.Helper()
	var bytes int64
	live := 0
	var all []Block
	for _, b := range model {
		bytes += BlockBytes(b)
		if b.Until > now {
			live++
		}
		all = append(all, b)
	}
	if tab.Len() != len(model) || tab.Bytes() != bytes || tab.Live(now) != live || len(tab.Active(now)) != live {
		t.Fatalf("step %d: Len %d Bytes %d Live %d, want %d %d %d", step, tab.Len(), tab.Bytes(), tab.Live(now), len(model), bytes, live)
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.Since != b.Since {
			return a.Since > b.Since
		}
		if a.Until != b.Until {
			return a.Until > b.Until
		}
		return a.Identifier < b.Identifier
	})
	var want []string
	for _, b := range all {
		if b.Until > now && len(want) < 7 {
			want = append(want, b.Identifier)
		}
	}
	var got []string
	for _, b := range tab.Newest(7, now) {
		got = append(got, b.Identifier)
		if b.TTL <= 0 {
			t.Fatalf("step %d: Newest gives %s without its TTL", step, b.Identifier)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("step %d: Newest %v, want %v", step, got, want)
	}
}

// TestBlockBytesCoversTheHeap: BlockBytes, which --maxmemory counts, is
// at least what a table of 100,000 rule-made blocks takes on the heap.
func TestBlockBytesCoversTheHeap(t *testing.T) {
	const n = 100000
	c, err := Compile(Rule{ID: "login", Target: "/login", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 5, Window: "1m",
		Block: &BlockSpec{After: 3, Within: "1m", For: "15m"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	blocks := make([]Block, n)
	for i := range blocks {
		blocks[i] = Block{Identifier: fmt.Sprintf("ip=10.%d.%d.%d", i>>16, i>>8&255, i&255), Until: int64(i) + 1e18,
			Rule: c.Rule.ID, Reason: c.BlockReason(), Since: int64(i)}
	}
	tab := NewBlockTable(blocks...)
	blocks = nil
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if tab.Bytes() < heap {
		t.Fatalf("%d blocks take %d bytes of heap, BlockBytes counts %d", n, heap, tab.Bytes())
	}
	t.Logf("%d blocks: %d bytes of heap (%d a block), counted %d (%d a block)", n, heap, heap/n, tab.Bytes(), tab.Bytes()/n)
	runtime.KeepAlive(tab)
}
