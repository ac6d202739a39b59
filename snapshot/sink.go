package snapshot

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rlserver/rlserver/raftlog"
)

// chunkSink is the raft.SnapshotSink of one snapshot. Write stores the data in
// chunks of ChunkSize as it fills them (committed without sync); Close
// stores the last chunk and commits the metadata with pebble.Sync, which
// is when the snapshot begins to exist. It is used by one goroutine.
type chunkSink struct {
	store *Store
	num   uint64
	start time.Time
	rec   record // meta.Size, chunks and crc grow with the writes
	buf   []byte // the chunk being filled; cap ChunkSize
	done  bool   // Close or Cancel was called
	// unpaced counts the bytes written since the last raftlog.Pause.
	unpaced int
	err     error // a chunk that failed to commit: the sink cannot close
}

// ID returns the snapshot's ID: term-index-number, where the number is
// the Unix time of Create in milliseconds made unique within the group.
func (k *chunkSink) ID() string { return k.rec.meta.ID }

// Write adds p to the snapshot's data, committing each chunk it fills.
// After Close or Cancel it fails with ErrClosed; after a failed chunk
// commit it keeps failing, and Close fails too.
func (k *chunkSink) Write(p []byte) (int, error) {
	if k.done {
		return 0, ErrClosed
	}
	if k.err != nil {
		return 0, k.err
	}
	n := 0
	for len(p) > 0 {
		c := copy(k.buf[len(k.buf):cap(k.buf)], p)
		k.buf = k.buf[:len(k.buf)+c]
		k.rec.crc = crc32.Update(k.rec.crc, storeCRC, p[:c])
		k.rec.meta.Size += int64(c)
		p, n = p[c:], n+c
		if k.unpaced += c; k.unpaced >= raftlog.PaceBytes {
			// Persist encodes the state as fast as the CPU goes: let the
			// event loops in between (see raftlog.Pause).
			k.unpaced = 0
			raftlog.Pause()
		}
		if len(k.buf) == cap(k.buf) {
			if err := k.flush(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// flush commits the chunk in buf, without sync, and empties buf.
func (k *chunkSink) flush() error {
	if k.rec.chunks == math.MaxUint32 {
		k.err = fmt.Errorf("snapshot: %s: more than %d chunks", k.ID(), uint32(math.MaxUint32))
		return k.err
	}
	s := k.store
	if s.guard != nil {
		if err := s.guard.Allow(2 * int64(len(k.buf))); err != nil {
			k.err = fmt.Errorf("snapshot: group %d: %s: write chunk %d: %w", s.group, k.ID(), k.rec.chunks, err)
			return k.err
		}
	}
	if err := s.db.Set(s.keys.chunk(k.num, uint32(k.rec.chunks)), k.buf, pebble.NoSync); err != nil {
		k.err = fmt.Errorf("snapshot: group %d: %s: write chunk %d: %w", s.group, k.ID(), k.rec.chunks, err)
		return k.err
	}
	k.rec.chunks++
	k.buf = k.buf[:0]
	return nil
}

// Close stores the last chunk and commits the snapshot (see Store.commit):
// once it returns nil the snapshot survives a crash and is listed, unless
// it is older than the newest retain others, which prunes it at once. On
// error its chunks are removed and it never exists. Close after Close or
// Cancel does nothing.
func (k *chunkSink) Close() error {
	if k.done {
		return nil
	}
	k.done = true
	err := k.err
	if err == nil && len(k.buf) > 0 {
		err = k.flush()
	}
	k.buf = nil
	if err == nil {
		err = k.store.commit(k.num, &k.rec)
	}
	if err != nil {
		return errors.Join(err, k.store.dropChunks(k.num))
	}
	took := k.store.now().Sub(k.start)
	k.store.stats.written(took, k.rec.meta.Size)
	if k.store.onSave != nil {
		k.store.onSave()
	}
	k.store.logger.Info("snapshot committed", "id", k.ID(), "bytes", k.rec.meta.Size,
		"chunks", k.rec.chunks, "took", took)
	return nil
}

// Cancel abandons the snapshot and removes the chunks already written.
// Cancel after Close or Cancel does nothing.
func (k *chunkSink) Cancel() error {
	if k.done {
		return nil
	}
	k.done = true
	k.buf = nil
	return k.store.dropChunks(k.num)
}
