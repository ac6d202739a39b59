package snapshot

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/hashicorp/raft"

	"github.com/rlserver/rlserver/internal/wire"
)

// The metadata record of a committed snapshot. It is stable: version 1 is
//
//	version byte (1) | uvarint raft snapshot version | uvarint len(ID) | ID
//	| uvarint index | uvarint term | uvarint configuration index
//	| uvarint size | uvarint chunks | CRC-32C of the data, 4 bytes BE
//	| uvarint servers, then per server:
//	  suffrage byte | uvarint len(ID) | ID | uvarint len(address) | address
//	| CRC-32C (Castagnoli) of everything before it, 4 bytes BE
//
// raft.SnapshotMeta.Peers, which only version 0 snapshots and pre-1.0
// servers read, is not kept. Decoding rejects a wrong checksum, an unknown
// version or suffrage, lengths that run past the end, and leftover bytes.
const metaVersion = 1

const recordCRCLen = 4

var storeCRC = crc32.MakeTable(crc32.Castagnoli)

// record is a decoded metadata record.
type record struct {
	meta   raft.SnapshotMeta
	chunks uint64 // how many chunks hold the data
	crc    uint32 // CRC-32C of the data
}

// appendRecord appends the encoding of r to dst.
func appendRecord(dst []byte, r *record) []byte {
	start := len(dst)
	m := &r.meta
	dst = append(dst, metaVersion)
	dst = binary.AppendUvarint(dst, uint64(m.Version))
	dst = appendRecordString(dst, m.ID)
	for _, v := range []uint64{m.Index, m.Term, m.ConfigurationIndex, uint64(m.Size), r.chunks} {
		dst = binary.AppendUvarint(dst, v)
	}
	dst = binary.BigEndian.AppendUint32(dst, r.crc)
	dst = binary.AppendUvarint(dst, uint64(len(m.Configuration.Servers)))
	for _, srv := range m.Configuration.Servers {
		dst = append(dst, byte(srv.Suffrage))
		dst = appendRecordString(dst, string(srv.ID))
		dst = appendRecordString(dst, string(srv.Address))
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], storeCRC))
}

func appendRecordString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// decodeRecord decodes a metadata record. The result does not refer to
// b. Errors wrap ErrCorruptSnapshot.
func decodeRecord(b []byte) (*record, error) {
	if len(b) < 1+recordCRCLen {
		return nil, fmt.Errorf("%w: metadata of %d bytes", ErrCorruptSnapshot, len(b))
	}
	body := b[:len(b)-recordCRCLen]
	if binary.BigEndian.Uint32(b[len(body):]) != crc32.Checksum(body, storeCRC) {
		return nil, fmt.Errorf("%w: metadata checksum mismatch", ErrCorruptSnapshot)
	}
	if body[0] != metaVersion {
		return nil, fmt.Errorf("%w: metadata version %d", ErrCorruptSnapshot, body[0])
	}
	d := wire.Decoder{B: body[1:]}
	r := &record{}
	m := &r.meta
	m.Version = raft.SnapshotVersion(d.Uvarint())
	m.ID = string(d.Bytes())
	m.Index, m.Term, m.ConfigurationIndex = d.Uvarint(), d.Uvarint(), d.Uvarint()
	size := d.Uvarint()
	m.Size, r.chunks, r.crc = int64(size), d.Uvarint(), d.Uint32()
	if size > 1<<62 {
		d.Fail()
	}
	m.Configuration.Servers = servers(&d)
	if d.Bad || len(d.B) != 0 {
		return nil, fmt.Errorf("%w: malformed metadata", ErrCorruptSnapshot)
	}
	return r, nil
}

// servers reads a configuration's servers; each takes at least 3 bytes,
// which bounds the count before anything is allocated.
func servers(d *wire.Decoder) []raft.Server {
	n := d.Uvarint()
	if d.Bad || n > uint64(len(d.B))/3 {
		d.Fail()
		return nil
	}
	var out []raft.Server
	for i := uint64(0); i < n && !d.Bad; i++ {
		suffrage := d.Byte()
		if suffrage > byte(raft.Staging) {
			d.Fail()
		}
		out = append(out, raft.Server{
			Suffrage: raft.ServerSuffrage(suffrage),
			ID:       raft.ServerID(string(d.Bytes())),
			Address:  raft.ServerAddress(string(d.Bytes())),
		})
	}
	return out
}
