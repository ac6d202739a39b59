package datadir

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rlserver/rlserver/internal/durable"
	"github.com/rlserver/rlserver/internal/wire"
)

// castagnoli is the CRC-32C table of the mark's checksum (the same
// polynomial as the checksum of package cluster's log entries).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MarkFile is the name of the mark file, beside the database, that records
// what the database held when it was last written: see mark and
// cluster/DESIGN.md, "Damaged files". Exported for the tests of package
// cluster, which damage a directory on purpose.
const MarkFile = "rlserver.mark"

// mark is what MarkFile records: the node's id, the WAL files of the
// database that Pebble has not removed, the last index of each group's log
// known to be durable, and a counter that the database itself holds too
// (markKey) at that value or more. Each claim is true when the file is
// written; a start that finds one false finds data that was synced lost.
//
// Version 1 is
//
//	magic "RLMK" | version byte (1) | uvarint seq | uvarint len(node) | node
//	| uvarint counter | varint Unix nanoseconds written
//	| uvarint WALs | uvarint WAL number, each the difference from the one before
//	| uvarint groups | per group in increasing id: uvarint id | uvarint last index
//	| CRC-32C (Castagnoli) of everything before it, 4 bytes BE
type mark struct {
	seq     uint64 // of the write: the newer of the file's two slots holds the higher
	node    string
	counter uint64
	written int64
	wals    []uint64          // increasing
	groups  map[uint32]uint64 // group id -> last log index durable
}

const (
	markMagic   = "RLMK"
	markVersion = 1
)

// errBadMark says that MarkFile does not decode.
var errBadMark = errors.New("not a whole mark")

// appendMark appends the encoding of m to dst.
func appendMark(dst []byte, m *mark) []byte {
	start := len(dst)
	dst = append(append(dst, markMagic...), markVersion)
	dst = binary.AppendUvarint(dst, m.seq)
	dst = binary.AppendUvarint(dst, uint64(len(m.node)))
	dst = append(dst, m.node...)
	dst = binary.AppendUvarint(dst, m.counter)
	dst = binary.AppendVarint(dst, m.written)
	dst = binary.AppendUvarint(dst, uint64(len(m.wals)))
	var prev uint64
	for _, w := range m.wals {
		dst = binary.AppendUvarint(dst, w-prev)
		prev = w
	}
	ids := make([]uint32, 0, len(m.groups))
	for g := range m.groups {
		ids = append(ids, g)
	}
	slices.Sort(ids)
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	for _, g := range ids {
		dst = binary.AppendUvarint(dst, uint64(g))
		dst = binary.AppendUvarint(dst, m.groups[g])
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// decodeMark decodes a mark; anything but a whole, checksummed version 1
// record is errBadMark.
func decodeMark(b []byte) (*mark, error) {
	if len(b) < len(markMagic)+1+4 || string(b[:len(markMagic)]) != markMagic {
		return nil, fmt.Errorf("%w: not a mark", errBadMark)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", errBadMark)
	}
	if v := body[len(markMagic)]; v != markVersion {
		return nil, fmt.Errorf("%w: version %d", errBadMark, v)
	}
	d := wire.Decoder{B: body[len(markMagic)+1:]}
	m := &mark{seq: d.Uvarint(), node: string(d.Bytes()), counter: d.Uvarint(), written: d.Varint(), groups: map[uint32]uint64{}}
	n := d.Uvarint()
	for i := uint64(0); i < n && !d.Bad; i++ {
		w := d.Uvarint()
		if len(m.wals) > 0 {
			w += m.wals[len(m.wals)-1]
		}
		m.wals = append(m.wals, w)
	}
	n = d.Uvarint()
	for i := uint64(0); i < n && !d.Bad; i++ {
		g := d.Uvarint()
		if g > 1<<32-1 {
			d.Fail()
		}
		m.groups[uint32(g)] = d.Uvarint()
	}
	if d.Bad || len(d.B) != 0 {
		return nil, fmt.Errorf("%w: malformed", errBadMark)
	}
	return m, nil
}

// The file holds two slots of equal size, written in turn: each holds a
// 4-byte big-endian length, a mark record of that length, and zeros. A
// write overwrites the slot that does not hold the newest record and
// syncs its data (one fdatasync, no metadata: the file's blocks are
// allocated when it is made), so a write torn by a crash leaves the other
// slot, the previous mark, whole. The newest valid record (highest seq)
// is the mark. A record too large for its slot makes a new file, twice as
// large, written aside and renamed over the old one.
const minMarkSlot = 4 << 10

// readMark reads MarkFile in dir: the newest whole mark, and which slot
// holds it; nil and no error if there is no file.
func readMark(fs vfs.FS, dir string) (*mark, error) {
	m, _, _, err := readMarkSlots(fs, dir)
	return m, err
}

// readMarkSlots is readMark, also returning the slot of the mark and the
// slot size.
func readMarkSlots(fs vfs.FS, dir string) (m *mark, slot, size int, err error) {
	f, err := fs.Open(filepath.Join(dir, MarkFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, 0, nil
	}
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, f); err != nil {
		return nil, 0, 0, err
	}
	b := buf.Bytes()
	if len(b) < 2*minMarkSlot || len(b)%2 != 0 {
		return nil, 0, 0, fmt.Errorf("%w: %d bytes, not two slots", errBadMark, len(b))
	}
	size = len(b) / 2
	var firstErr error
	for i := 0; i < 2; i++ {
		s := b[i*size : (i+1)*size]
		n := int(binary.BigEndian.Uint32(s))
		if n > size-4 {
			firstErr = cmp.Or(firstErr, fmt.Errorf("%w: slot %d holds %d bytes", errBadMark, i, n))
			continue
		}
		got, err := decodeMark(s[4 : 4+n])
		if err != nil {
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		if m == nil || got.seq > m.seq {
			m, slot = got, i
		}
	}
	if m == nil {
		return nil, 0, 0, firstErr
	}
	return m, slot, size, nil
}

// markWriter writes MarkFile in dir, a slot at a time.
type markWriter struct {
	fs   vfs.FS
	dir  string
	f    vfs.File // open for writing; nil until the first write
	size int      // of a slot
	next int      // the slot the next write goes to
	seq  uint64   // of the last mark written or found
}

// newMarkWriter returns the writer of the mark file in dir; m, at slot of
// slots of size, is what the file holds (nil if none).
func newMarkWriter(fs vfs.FS, dir string, m *mark, slot, size int) *markWriter {
	w := &markWriter{fs: fs, dir: dir, size: size}
	if m != nil {
		w.seq, w.next = m.seq, 1-slot
	}
	return w
}

// write makes m, with the next seq, the file's mark, durably.
func (w *markWriter) write(m *mark) error {
	m.seq = w.seq + 1
	rec := appendMark(binary.BigEndian.AppendUint32(nil, 0), m)
	binary.BigEndian.PutUint32(rec, uint32(len(rec)-4))
	if w.f == nil && len(rec) <= w.size {
		if f, err := w.fs.OpenReadWrite(filepath.Join(w.dir, MarkFile), vfs.WriteCategoryUnspecified); err == nil {
			w.f = f
		}
	}
	if w.f == nil || len(rec) > w.size {
		if err := w.replace(rec); err != nil {
			return err
		}
		w.seq = m.seq
		return nil
	}
	slot := make([]byte, w.size)
	copy(slot, rec)
	if _, err := w.f.WriteAt(slot, int64(w.next*w.size)); err != nil {
		return err
	}
	if err := w.f.SyncData(); err != nil {
		return err
	}
	w.seq, w.next = m.seq, 1-w.next
	return nil
}

// replace writes a new file aside, rec in its first slot and the second
// empty, with slots large enough for twice rec, and renames it over the
// file, durably; it then keeps the new file open for the next writes.
func (w *markWriter) replace(rec []byte) error {
	size := max(minMarkSlot, w.size)
	for size < 2*len(rec) {
		size *= 2
	}
	buf := make([]byte, 2*size)
	copy(buf, rec)
	if err := durable.WriteFile(w.fs, filepath.Join(w.dir, MarkFile), buf); err != nil {
		return err
	}
	w.close()
	var err error
	if w.f, err = w.fs.OpenReadWrite(filepath.Join(w.dir, MarkFile), vfs.WriteCategoryUnspecified); err != nil {
		return err
	}
	w.size, w.next = size, 1
	return nil
}

// close closes the file.
func (w *markWriter) close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}
