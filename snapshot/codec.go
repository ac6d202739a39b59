package snapshot

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// The codec is what an FSM snapshot holds: every rule and the state of
// every live key, as the state records of package shards. Version 1 is
//
//	magic "RLSNAP" | version uint16 | now int64 (ns, the time the
//	records are live at)
//	then frames: uint32 length n > 0 | uint32 CRC-32C of the payload |
//	  payload: n bytes of records
//	then the end: uint32 0 | uint64 number of records | uint64 number of
//	  frames | uint32 CRC-32C of the header and every frame's CRC
//
// all integers big-endian. The rules come in the first frame, then one
// frame per shard that holds live keys, so the writer holds one shard's
// lock at a time and one shard's records in memory. The end makes a cut
// stream an error rather than a smaller snapshot; the CRCs catch changed
// bytes. Reading rejects other magics and versions, frames longer than
// maxFrame, and any mismatch; a reader of a later version keeps reading
// version 1 (testdata/v1.snap is a fixture that must keep loading).
const (
	magic    = "RLSNAP"
	version  = 1
	maxFrame = 1 << 30
)

// Errors returned by Read.
var (
	ErrFormat  = errors.New("snapshot: not an rlserver snapshot")
	ErrVersion = errors.New("snapshot: unsupported version")
	ErrCorrupt = errors.New("snapshot: corrupt")
)

var codecCRC = crc32.MakeTable(crc32.Castagnoli)

// Source is the state a snapshot is written from (shards.Store).
type Source interface {
	// Shards returns the number of shards.
	Shards() int
	// AppendRules appends a record per rule to dst.
	AppendRules(dst []byte) ([]byte, int)
	// AppendShard appends a record per key of shard i live at now.
	AppendShard(i int, dst []byte, now int64) ([]byte, int)
}

// Sink is the state a snapshot is read into (shards.Store).
type Sink interface {
	// Clear forgets all state.
	Clear()
	// ApplyRecords applies records as of now.
	ApplyRecords(b []byte, now int64) (int, error)
}

// Write writes the state of src live at now to w, shard by shard, and
// returns the number of records written.
func Write(w io.Writer, src Source, now int64) (int64, error) {
	bw := bufio.NewWriterSize(w, 256<<10)
	hdr := make([]byte, 0, 16)
	hdr = append(hdr, magic...)
	hdr = binary.BigEndian.AppendUint16(hdr, version)
	hdr = binary.BigEndian.AppendUint64(hdr, uint64(now))
	sum := crc32.Update(0, codecCRC, hdr)
	bw.Write(hdr)
	var records, frames int64
	var buf []byte
	for i := -1; i < src.Shards(); i++ {
		var n int
		if i < 0 {
			buf, n = src.AppendRules(buf[:0])
		} else {
			buf, n = src.AppendShard(i, buf[:0], now)
		}
		if n == 0 {
			continue
		}
		c := crc32.Checksum(buf, codecCRC)
		var fh [8]byte
		binary.BigEndian.PutUint32(fh[:4], uint32(len(buf)))
		binary.BigEndian.PutUint32(fh[4:], c)
		sum = crc32.Update(sum, codecCRC, fh[4:])
		bw.Write(fh[:])
		if _, err := bw.Write(buf); err != nil {
			return records, err
		}
		records += int64(n)
		frames++
	}
	var end [24]byte
	binary.BigEndian.PutUint64(end[4:], uint64(records))
	binary.BigEndian.PutUint64(end[12:], uint64(frames))
	binary.BigEndian.PutUint32(end[20:], sum)
	bw.Write(end[:])
	return records, bw.Flush()
}

// Read replaces the state of dst with the snapshot read from r: it clears
// dst, then applies the records frame by frame. It returns the time the
// snapshot's records are live at and their number. An error means the
// snapshot is not fully applied; dst must then be cleared or discarded.
func Read(r io.Reader, dst Sink) (now int64, records int64, err error) {
	br := bufio.NewReaderSize(r, 256<<10)
	var hdr [16]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return 0, 0, fmt.Errorf("%w: header: %v", ErrFormat, err)
	}
	if string(hdr[:6]) != magic {
		return 0, 0, ErrFormat
	}
	if v := binary.BigEndian.Uint16(hdr[6:]); v != version {
		return 0, 0, fmt.Errorf("%w: %d (this build reads %d)", ErrVersion, v, version)
	}
	now = int64(binary.BigEndian.Uint64(hdr[8:]))
	sum := crc32.Update(0, codecCRC, hdr[:])
	dst.Clear()
	var frames int64
	var buf []byte
	for {
		var fh [8]byte
		if _, err := io.ReadFull(br, fh[:4]); err != nil {
			return now, records, fmt.Errorf("%w: frame %d: %v", ErrCorrupt, frames, err)
		}
		size := binary.BigEndian.Uint32(fh[:4])
		if size == 0 {
			return now, records, readEnd(br, sum, records, frames)
		}
		if size > maxFrame {
			return now, records, fmt.Errorf("%w: frame %d of %d bytes", ErrCorrupt, frames, size)
		}
		if _, err := io.ReadFull(br, fh[4:]); err != nil {
			return now, records, fmt.Errorf("%w: frame %d: %v", ErrCorrupt, frames, err)
		}
		if cap(buf) < int(size) {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		if _, err := io.ReadFull(br, buf); err != nil {
			return now, records, fmt.Errorf("%w: frame %d: %v", ErrCorrupt, frames, err)
		}
		if c := binary.BigEndian.Uint32(fh[4:]); crc32.Checksum(buf, codecCRC) != c {
			return now, records, fmt.Errorf("%w: frame %d fails its checksum", ErrCorrupt, frames)
		}
		sum = crc32.Update(sum, codecCRC, fh[4:])
		n, err := dst.ApplyRecords(buf, now)
		records += int64(n)
		if err != nil {
			return now, records, fmt.Errorf("%w: frame %d: %v", ErrCorrupt, frames, err)
		}
		frames++
	}
}

// readEnd reads the end of a snapshot (after its zero length) and checks
// it against what was read.
func readEnd(br *bufio.Reader, sum uint32, records, frames int64) error {
	var end [20]byte
	if _, err := io.ReadFull(br, end[:]); err != nil {
		return fmt.Errorf("%w: end: %v", ErrCorrupt, err)
	}
	switch {
	case int64(binary.BigEndian.Uint64(end[:8])) != records || int64(binary.BigEndian.Uint64(end[8:16])) != frames:
		return fmt.Errorf("%w: the end counts %d records in %d frames, read %d in %d", ErrCorrupt,
			binary.BigEndian.Uint64(end[:8]), binary.BigEndian.Uint64(end[8:16]), records, frames)
	case binary.BigEndian.Uint32(end[16:]) != sum:
		return fmt.Errorf("%w: the end's checksum does not match", ErrCorrupt)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return fmt.Errorf("%w: data after the end", ErrCorrupt)
	}
	return nil
}
