package raftlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rlserver/rlserver/internal/wire"
)

// The value stored for one log entry. It is stable: version 1 is
//
//	version byte (1) | type byte | flags byte (bit 0: AppendedAt is set)
//	| uvarint index | uvarint term
//	| if bit 0: varint Unix seconds, uvarint nanoseconds (< 1e9)
//	| uvarint len(data) | data | uvarint len(extensions) | extensions
//	| CRC-32C (Castagnoli) of everything before it, 4 bytes big-endian
//
// Decoding rejects a wrong checksum, an unknown version or flag, lengths
// that run past the end, and bytes left over before the checksum.
const entryVersion = 1

const (
	flagAppendedAt = 1 << 0
	entryMinLen    = 3 + 1 + 1 + 1 + 1 + crcLen // header, index, term, two lengths, CRC
	crcLen         = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendEntry appends the encoding of l to dst and returns the extended
// slice.
func appendEntry(dst []byte, l *raft.Log) []byte {
	start := len(dst)
	var flags byte
	if !l.AppendedAt.IsZero() {
		flags |= flagAppendedAt
	}
	dst = append(dst, entryVersion, byte(l.Type), flags)
	dst = binary.AppendUvarint(dst, l.Index)
	dst = binary.AppendUvarint(dst, l.Term)
	if flags&flagAppendedAt != 0 {
		dst = binary.AppendVarint(dst, l.AppendedAt.Unix())
		dst = binary.AppendUvarint(dst, uint64(l.AppendedAt.Nanosecond()))
	}
	dst = binary.AppendUvarint(dst, uint64(len(l.Data)))
	dst = append(dst, l.Data...)
	dst = binary.AppendUvarint(dst, uint64(len(l.Extensions)))
	dst = append(dst, l.Extensions...)
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// entryLen returns the length of appendEntry's encoding of l.
func entryLen(l *raft.Log) int {
	n := 3 + uvarintLen(l.Index) + uvarintLen(l.Term)
	if !l.AppendedAt.IsZero() {
		n += varintLen(l.AppendedAt.Unix()) + uvarintLen(uint64(l.AppendedAt.Nanosecond()))
	}
	n += uvarintLen(uint64(len(l.Data))) + len(l.Data)
	n += uvarintLen(uint64(len(l.Extensions))) + len(l.Extensions)
	return n + crcLen
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func varintLen(v int64) int {
	u := uint64(v) << 1
	if v < 0 {
		u = ^u
	}
	return uvarintLen(u)
}

// decodeEntry decodes b, the value stored under the key of index, into l.
// l owns its memory afterwards: Data and Extensions are copied out of b
// (into one new allocation), so b may be released. On error l is left
// unchanged and the error wraps ErrCorrupt.
func decodeEntry(b []byte, index uint64, l *raft.Log) error {
	if len(b) < entryMinLen {
		return fmt.Errorf("%w: log entry %d: %d bytes", ErrCorrupt, index, len(b))
	}
	body := b[:len(b)-crcLen]
	if sum := binary.BigEndian.Uint32(b[len(body):]); sum != crc32.Checksum(body, castagnoli) {
		return fmt.Errorf("%w: log entry %d: checksum mismatch", ErrCorrupt, index)
	}
	if body[0] != entryVersion || body[2]&^flagAppendedAt != 0 {
		return fmt.Errorf("%w: log entry %d: version %d, flags %#x", ErrCorrupt, index, body[0], body[2])
	}
	d := wire.Decoder{B: body[3:]}
	var e raft.Log
	e.Type = raft.LogType(body[1])
	e.Index, e.Term = d.Uvarint(), d.Uvarint()
	if body[2]&flagAppendedAt != 0 {
		sec, nsec := d.Varint(), d.Uvarint()
		if nsec >= uint64(time.Second) {
			d.Fail()
		}
		e.AppendedAt = time.Unix(sec, int64(nsec))
	}
	data, ext := d.Bytes(), d.Bytes()
	if d.Bad || len(d.B) != 0 {
		return fmt.Errorf("%w: log entry %d: malformed", ErrCorrupt, index)
	}
	if e.Index != index {
		return fmt.Errorf("%w: log entry under index %d holds index %d", ErrCorrupt, index, e.Index)
	}
	e.Data, e.Extensions = copyTwo(data, ext)
	*l = e
	return nil
}

// copyTwo copies a and b into one new allocation and returns the copies,
// each capped at its length so that appending to one never overwrites the
// other. Empty inputs give nil.
func copyTwo(a, b []byte) ([]byte, []byte) {
	if len(a)+len(b) == 0 {
		return nil, nil
	}
	buf := make([]byte, len(a)+len(b))
	copy(buf, a)
	copy(buf[len(a):], b)
	var ca, cb []byte
	if len(a) > 0 {
		ca = buf[:len(a):len(a)]
	}
	if len(b) > 0 {
		cb = buf[len(a):]
	}
	return ca, cb
}
