package snapshot

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// recover runs in NewStore: it sets last to the highest snapshot number in
// the database and removes, in one synced commit, the chunks of every
// snapshot that has no metadata (a sink that never closed: a crash, or a
// Cancel whose unsynced deletion the crash undid) and the snapshots
// beyond retain.
func (s *Store) recover() error {
	recs, err := s.records()
	if err != nil {
		return err
	}
	committed := make(map[uint64]bool, len(recs))
	for _, r := range recs {
		committed[r.num] = true
		s.last = max(s.last, r.num)
	}
	orphans, err := s.orphans(committed)
	if err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, num := range orphans {
		lo, hi := s.keys.chunks(num)
		if err := b.DeleteRange(lo, hi, nil); err != nil {
			return fmt.Errorf("snapshot: group %d: remove unfinished snapshot %d: %w", s.group, num, err)
		}
		s.logger.Info("removing the chunks of an unfinished snapshot", "number", num)
	}
	if err := s.prune(b, recs); err != nil {
		return err
	}
	if b.Empty() {
		return nil
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("snapshot: group %d: clean up: %w", s.group, err)
	}
	return nil
}

// orphans returns the numbers of the snapshots that have chunks but are
// not committed, and raises last to the highest number among the chunks.
// It seeks from one snapshot's chunks to the next, so it reads one key per
// snapshot.
func (s *Store) orphans(committed map[uint64]bool) (nums []uint64, err error) {
	lo, hi := s.keys.allChunks()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("snapshot: group %d: find unfinished snapshots: %w", s.group, err)
	}
	for ok := it.First(); ok; {
		num, valid := s.keys.num(it.Key())
		if !valid {
			err = fmt.Errorf("%w: group %d: chunk key %x", ErrCorruptSnapshot, s.group, it.Key())
			break
		}
		s.last = max(s.last, num)
		if !committed[num] {
			nums = append(nums, num)
		}
		_, next := s.keys.chunks(num)
		ok = string(next) < string(hi) && it.SeekGE(next)
	}
	if ierr := errors.Join(it.Error(), it.Close()); err == nil && ierr != nil {
		err = fmt.Errorf("snapshot: group %d: find unfinished snapshots: %w", s.group, ierr)
	}
	return nums, err
}

// prune adds to b the deletion of every snapshot after the newest retain
// in recs (sorted newest first): its metadata and its chunks.
func (s *Store) prune(b *pebble.Batch, recs []numbered) error {
	for _, r := range recs[min(len(recs), s.retain):] {
		lo, hi := s.keys.chunks(r.num)
		if err := errors.Join(b.Delete(s.keys.meta(r.num), nil), b.DeleteRange(lo, hi, nil)); err != nil {
			return fmt.Errorf("snapshot: group %d: prune %s: %w", s.group, r.meta.ID, err)
		}
		s.logger.Info("pruning snapshot", "id", r.meta.ID, "retain", s.retain)
	}
	return nil
}

// commit makes a sink's snapshot exist: it writes its metadata and prunes
// the snapshots beyond retain, in one batch committed with pebble.Sync.
// The chunks, committed before without sync, are in the WAL ahead of this
// batch, so its sync makes them durable too.
func (s *Store) commit(num uint64, rec *record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs, err := s.records()
	if err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.Set(s.keys.meta(num), appendRecord(nil, rec), nil); err != nil {
		return fmt.Errorf("snapshot: group %d: commit %s: %w", s.group, rec.meta.ID, err)
	}
	recs = append(recs, numbered{rec, num})
	slices.SortFunc(recs, newestFirst)
	if err := s.prune(b, recs); err != nil {
		return err
	}
	if err := b.Commit(s.sync); err != nil {
		return fmt.Errorf("snapshot: group %d: commit %s: %w", s.group, rec.meta.ID, err)
	}
	return nil
}

// dropChunks range-deletes the chunks of snapshot num, without sync: if a
// crash undoes it, the next NewStore finds them unfinished and removes
// them.
func (s *Store) dropChunks(num uint64) error {
	lo, hi := s.keys.chunks(num)
	if err := s.db.DeleteRange(lo, hi, pebble.NoSync); err != nil {
		return fmt.Errorf("snapshot: group %d: remove the chunks of %d: %w", s.group, num, err)
	}
	return nil
}

// Delete removes snapshot id — its metadata record and its chunks — in one
// batch committed with pebble.Sync, for a node that gives up a snapshot it
// cannot read. An id that is not a snapshot ID gives ErrNoSnapshot; one
// whose snapshot is gone already deletes nothing.
func (s *Store) Delete(id string) error {
	num, ok := numOf(id)
	if !ok {
		return fmt.Errorf("%w: %q", ErrNoSnapshot, id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	lo, hi := s.keys.chunks(num)
	if err := errors.Join(b.Delete(s.keys.meta(num), nil), b.DeleteRange(lo, hi, nil)); err != nil {
		return fmt.Errorf("snapshot: group %d: delete %s: %w", s.group, id, err)
	}
	if err := b.Commit(s.sync); err != nil {
		return fmt.Errorf("snapshot: group %d: delete %s: %w", s.group, id, err)
	}
	s.logger.Info("snapshot deleted", "id", id)
	return nil
}
