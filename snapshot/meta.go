package snapshot

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/hashicorp/raft"
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
	d := recordDecoder{b: body[1:]}
	r := &record{}
	m := &r.meta
	m.Version = raft.SnapshotVersion(d.uvarint())
	m.ID = d.string()
	m.Index, m.Term, m.ConfigurationIndex = d.uvarint(), d.uvarint(), d.uvarint()
	size := d.uvarint()
	m.Size, r.chunks, r.crc = int64(size), d.uvarint(), d.uint32()
	if size > 1<<62 {
		d.fail()
	}
	m.Configuration.Servers = d.servers()
	if d.bad || len(d.b) != 0 {
		return nil, fmt.Errorf("%w: malformed metadata", ErrCorruptSnapshot)
	}
	return r, nil
}

// recordDecoder reads the fields of a record from b. The first failure sets
// bad; later reads return zero values, so a caller checks bad at the end.
type recordDecoder struct {
	b   []byte
	bad bool
}

func (d *recordDecoder) fail() { d.bad, d.b = true, nil }

func (d *recordDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *recordDecoder) uint32() uint32 {
	if len(d.b) < 4 {
		d.fail()
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *recordDecoder) byte() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *recordDecoder) string() string {
	n := d.uvarint()
	if d.bad || n > uint64(len(d.b)) {
		d.fail()
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// servers reads a configuration's servers; each takes at least 3 bytes,
// which bounds the count before anything is allocated.
func (d *recordDecoder) servers() []raft.Server {
	n := d.uvarint()
	if d.bad || n > uint64(len(d.b))/3 {
		d.fail()
		return nil
	}
	var out []raft.Server
	for i := uint64(0); i < n && !d.bad; i++ {
		suffrage := d.byte()
		if suffrage > byte(raft.Staging) {
			d.fail()
		}
		out = append(out, raft.Server{
			Suffrage: raft.ServerSuffrage(suffrage),
			ID:       raft.ServerID(d.string()),
			Address:  raft.ServerAddress(d.string()),
		})
	}
	return out
}
