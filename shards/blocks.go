package shards

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/rules"
)

// blockTable is the Store's blocked identifiers (rules.BlockTable) and
// their counts. Readers load the table without locks; a nil table (the
// usual case) costs the check path one atomic load. Writers serialise on
// the ruleTable's mu, and their changes join the rule changes in the
// journal, in the order made.
type blockTable struct {
	table atomic.Pointer[rules.BlockTable] // nil when no block is held
	max   int                              // Options.MaxBlocks

	made    map[string]uint64 // blocks made, by source: a rule id or "manual"; under ruleTable.mu
	denied  atomic.Uint64     // rules checks denied by a block
	dropped atomic.Uint64     // blocks dropped to stay within max
	bytes   atomic.Int64      // the table's Bytes, for the memory bound
}

// BlockStats is what a Store (or a cluster) counts of blocks, for
// metrics.
type BlockStats struct {
	// Made counts the blocks made, by source: the id of the rule that made
	// it, or "manual" for RL.BLOCK and PUT /v1/blocks.
	Made map[string]uint64
	// Denied counts the rules checks denied by a block.
	Denied uint64
	// Active is the number of blocks live now.
	Active int
	// Dropped counts the blocks dropped, nearest to their end first, to
	// keep within --max-blocks (in a cluster, also the blocks not proposed
	// because as many as the meta group takes were on their way).
	Dropped uint64
	// Bytes is the memory the blocks held take (rules.BlockBytes), which
	// counts against --maxmemory.
	Bytes int64
}

// ManualSource is BlockStats.Made's source for blocks made by hand.
const ManualSource = "manual"

// SetBlock blocks b.Identifier until b.Until (see rules.NewBlock),
// replacing any block it had, as of now. The error is Options.Refuse's, if
// it refuses.
func (s *Store) SetBlock(b rules.Block, now int64) error {
	if err := s.limits.refused(); err != nil {
		return err
	}
	s.putBlock(b, now, true)
	return nil
}

// Unblock lifts the block of identifier and reports whether one was live
// at now. The error is Options.Refuse's, if it refuses.
func (s *Store) Unblock(identifier string, now int64) (bool, error) {
	if err := s.limits.refused(); err != nil {
		return false, err
	}
	return s.dropBlock(identifier, now, true), nil
}

// ActiveBlocks returns the blocks live at now, sorted by identifier, each
// with its TTL.
func (s *Store) ActiveBlocks(now int64) []rules.Block {
	return s.rules.blocks.table.Load().Active(now)
}

// BlockStats returns the counts of blocks as of now.
func (s *Store) BlockStats(now int64) BlockStats {
	t := &s.rules
	t.mu.Lock()
	made := make(map[string]uint64, len(t.blocks.made))
	for k, v := range t.blocks.made {
		made[k] = v
	}
	t.mu.Unlock()
	return BlockStats{Made: made, Denied: t.blocks.denied.Load(), Active: t.blocks.table.Load().Live(now),
		Dropped: t.blocks.dropped.Load(), Bytes: t.blocks.bytes.Load()}
}

// NewestBlocks returns up to n of the blocks live at now, those made
// last first, with their TTLs (rules.BlockTable.Newest), and how many
// blocks are live: a summary that costs n blocks, not all of them.
func (s *Store) NewestBlocks(n int, now int64) ([]rules.Block, int) {
	t := s.rules.blocks.table.Load()
	return t.Newest(n, now), t.Live(now)
}

// putBlock stores b as of now, listing the change in the journal if note
// is set and the journal is on. A block already expired at now is not
// stored. Beyond Options.MaxBlocks, the blocks nearest to their end are
// dropped first (counted in BlockStats.Dropped); a replay drops the same
// ones, so the drops need no record.
func (s *Store) putBlock(b rules.Block, now int64, note bool) {
	t := &s.rules
	t.mu.Lock()
	defer t.mu.Unlock()
	b.TTL = 0
	if b.Until <= now {
		return // expired already (a record replayed late)
	}
	next, dropped := t.blocks.table.Load().WithCapped(b, t.blocks.max)
	t.blocks.dropped.Add(uint64(dropped))
	t.blocks.publish(next)
	if !note {
		return // replayed: counted when it was made
	}
	src := b.Rule
	if src == "" {
		src = ManualSource
	}
	if t.blocks.made == nil {
		t.blocks.made = map[string]uint64{}
	}
	t.blocks.made[src]++
	if t.journal {
		t.changes = appendBlockSet(t.changes, b)
		t.nchanges++
		t.note.changed()
	}
}

// dropBlock removes the block of identifier, listing the change in the
// journal if note is set, and reports whether it was live at now.
func (s *Store) dropBlock(identifier string, now int64, note bool) bool {
	t := &s.rules
	t.mu.Lock()
	defer t.mu.Unlock()
	next, ok := t.blocks.table.Load().Without(identifier, now)
	t.blocks.publish(next)
	if ok && note && t.journal {
		t.changes = appendBlockDel(t.changes, identifier)
		t.nchanges++
		t.note.changed()
	}
	return ok
}

// publish makes next the table readers see; an empty one is stored as nil.
func (b *blockTable) publish(next *rules.BlockTable) {
	if next.Len() == 0 {
		next = nil
	}
	b.table.Store(next)
	b.bytes.Store(next.Bytes())
}

// PruneBlocks drops the blocks expired at now (the background sweep
// calls it). It records nothing: every replica drops them at the same
// times, and an expired block never denies anyway.
func (s *Store) PruneBlocks(now int64) {
	t := &s.rules
	if t.blocks.table.Load() == nil {
		return
	}
	t.mu.Lock()
	t.blocks.publish(t.blocks.table.Load().Pruned(now))
	t.mu.Unlock()
}

// countDenial counts one denial of q's identifier by e's rule, which has a
// block, in the counter "!id:value" (a sliding log of the rule's
// block.after over block.within), and blocks the identifier on the
// block.after-th. Denials made while it is blocked are not counted: a
// blocked identifier charges nothing.
func (s *Store) countDenial(q *rules.Query, e *rules.Eval, now int64) {
	after, within, dur, _ := e.Rule.BlockAfter()
	r, err := s.Check(q.DenialKey(e), engine.Log, engine.Params{Limit: after, Window: within}, 1, now)
	if err != nil || !r.Allowed || r.Remaining != 0 {
		return
	}
	s.putBlock(DenialBlock(e, now, dur), now, true)
}

// DenialBlock returns the block that e's rule makes at now on its
// identifier, for dur ns.
func DenialBlock(e *rules.Eval, now, dur int64) rules.Block {
	c := e.Rule
	value := e.Key[len(c.Rule.ID)+1:]
	return rules.Block{Identifier: c.Rule.KeyType + "=" + string(value), Until: now + dur, Rule: c.Rule.ID,
		Reason: c.BlockReason(), Since: now}
}

// DenialsToCount calls count for every enforcing rule of q (evaluated,
// not allowed) that has a block and denied q.
func DenialsToCount(q *rules.Query, count func(e *rules.Eval)) {
	if q.Allowed || q.Blocked {
		return
	}
	for i := range q.Evals {
		e := &q.Evals[i]
		r := &e.Result
		if _, _, _, ok := e.Rule.BlockAfter(); ok && !e.Rule.Rule.Shadow && !r.Allowed && r.Limit > 0 {
			count(e)
		}
	}
}

// blockedBy reports whether one of q's identifiers is blocked in t at now,
// and if so marks q as denied by it.
func blockedBy(t *rules.BlockTable, q *rules.Query, now int64) bool {
	if t == nil {
		return false
	}
	b, ok := t.Find(q, now)
	if ok {
		q.SetBlocked(b, b.Until-now)
	}
	return ok
}

// appendBlocks appends a block record for every block held.
func (s *Store) appendBlocks(dst []byte) ([]byte, int) {
	all := s.rules.blocks.table.Load().All()
	for _, b := range all {
		dst = appendBlockSet(dst, b)
	}
	return dst, len(all)
}

func appendBlockSet(dst []byte, b rules.Block) []byte {
	js := rules.EncodeBlock(b)
	dst = binary.AppendUvarint(append(dst, recBlockSet), uint64(len(js)))
	return append(dst, js...)
}

func appendBlockDel(dst []byte, identifier string) []byte {
	dst = binary.AppendUvarint(append(dst, recBlockDel), uint64(len(identifier)))
	return append(dst, identifier...)
}

// applyBlock applies a block record's value v as of now.
func (s *Store) applyBlock(kind byte, v []byte, now int64) error {
	if kind == recBlockDel {
		s.dropBlock(string(v), now, false)
		return nil
	}
	b, err := rules.DecodeBlock(v)
	if err != nil {
		return err
	}
	s.putBlock(b, now, false)
	return nil
}
