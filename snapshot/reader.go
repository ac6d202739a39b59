package snapshot

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/cockroachdb/pebble/v2"
)

// chunkReader streams the chunks of one snapshot from a Pebble iterator (a
// consistent view taken at Open) and checks them against the metadata:
// chunk numbers in sequence, the size, and at the end the CRC-32C.
type chunkReader struct {
	it      *pebble.Iterator
	keys    keys
	rec     *record
	cur     []byte // the unread part of the current chunk, in the iterator's memory
	next    uint64 // the chunk number expected next
	size    int64  // bytes in the chunks reached so far
	crc     uint32 // of the bytes returned so far
	started bool
	err     error // sticky: io.EOF, a failure, or ErrClosed
}

func newChunkReader(it *pebble.Iterator, k keys, num uint64, rec *record) *chunkReader {
	lo, hi := k.chunks(num)
	it.SetBounds(lo, hi)
	return &chunkReader{it: it, keys: k, rec: rec}
}

// Read returns the next bytes of the snapshot's data. At the end it
// returns io.EOF if the data matches the metadata, and an error wrapping
// ErrCorruptSnapshot if it does not.
func (r *chunkReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	for len(r.cur) == 0 {
		if err := r.advance(); err != nil {
			r.err = err
			return 0, err
		}
	}
	n := copy(p, r.cur)
	r.crc = crc32.Update(r.crc, storeCRC, r.cur[:n])
	r.cur = r.cur[n:]
	return n, nil
}

// advance moves to the next chunk, or returns the error that ends the
// stream.
func (r *chunkReader) advance() error {
	var ok bool
	if r.started {
		ok = r.it.Next()
	} else {
		ok, r.started = r.it.First(), true
	}
	id := r.rec.meta.ID
	if !ok {
		if err := r.it.Error(); err != nil {
			return fmt.Errorf("snapshot %s: read: %w", id, err)
		}
		return r.end()
	}
	if n, valid := r.keys.chunkNum(r.it.Key()); !valid || uint64(n) != r.next {
		return fmt.Errorf("%w: %s: chunk key %x where chunk %d belongs", ErrCorruptSnapshot, id, r.it.Key(), r.next)
	}
	v, err := r.it.ValueAndErr()
	if err != nil {
		return fmt.Errorf("snapshot %s: read chunk %d: %w", id, r.next, err)
	}
	if len(v) == 0 || int64(len(v)) > r.rec.meta.Size-r.size {
		return fmt.Errorf("%w: %s: chunk %d of %d bytes after %d of %d", ErrCorruptSnapshot, id, r.next, len(v),
			r.size, r.rec.meta.Size)
	}
	r.cur, r.next, r.size = v, r.next+1, r.size+int64(len(v))
	return nil
}

// end checks the whole stream against the metadata.
func (r *chunkReader) end() error {
	m := &r.rec.meta
	if r.next != r.rec.chunks || r.size != m.Size {
		return fmt.Errorf("%w: %s: %d chunks and %d bytes, want %d and %d", ErrCorruptSnapshot, m.ID,
			r.next, r.size, r.rec.chunks, m.Size)
	}
	if r.crc != r.rec.crc {
		return fmt.Errorf("%w: %s: CRC-32C %08x, want %08x", ErrCorruptSnapshot, m.ID, r.crc, r.rec.crc)
	}
	return io.EOF
}

// Close releases the reader's view of the database. Reading afterwards
// fails with ErrClosed; closing again does nothing.
func (r *chunkReader) Close() error {
	if errors.Is(r.err, ErrClosed) {
		return nil
	}
	r.err, r.cur = ErrClosed, nil
	if err := r.it.Close(); err != nil {
		return fmt.Errorf("snapshot %s: close: %w", r.rec.meta.ID, err)
	}
	return nil
}
