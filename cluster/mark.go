package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rlserver/rlserver/internal/wire"
)

// markFile is the file, beside the database, that records what the
// database held when it was last written: see mark and DESIGN.md.
const markFile = "rlserver.mark"

// mark is what markFile records: the node's id, the WAL files of the
// database that Pebble has not removed, the last index of each group's log
// known to be durable, and a counter that the database itself holds too
// (markKey) at that value or more. Each claim is true when the file is
// written; a start that finds one false finds data that was synced lost.
//
// Version 1 is
//
//	magic "RLMK" | version byte (1) | uvarint len(node) | node
//	| uvarint counter | varint Unix nanoseconds written
//	| uvarint WALs | uvarint WAL number, each the difference from the one before
//	| uvarint groups | per group in increasing id: uvarint id | uvarint last index
//	| CRC-32C (Castagnoli) of everything before it, 4 bytes BE
type mark struct {
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

// errBadMark says that markFile does not decode.
var errBadMark = errors.New("not a whole mark")

// appendMark appends the encoding of m to dst.
func appendMark(dst []byte, m *mark) []byte {
	start := len(dst)
	dst = append(append(dst, markMagic...), markVersion)
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
	m := &mark{node: string(d.Bytes()), counter: d.Uvarint(), written: d.Varint(), groups: map[uint32]uint64{}}
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

// readMark reads markFile in dir: nil and no error if there is none.
func readMark(fs vfs.FS, dir string) (*mark, error) {
	f, err := fs.Open(filepath.Join(dir, markFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, f); err != nil {
		return nil, err
	}
	return decodeMark(buf.Bytes())
}

// writeMark replaces markFile in dir with m, atomically and durably: a
// temporary file, synced, renamed over it, and the directory synced.
func writeMark(fs vfs.FS, dir string, m *mark) error {
	path := filepath.Join(dir, markFile)
	f, err := fs.Create(path+".tmp", vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = f.Write(appendMark(nil, m))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(path+".tmp", path)
	}
	if err == nil {
		err = syncDir(fs, dir)
	}
	return err
}
