package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// A log entry of the FSM is a header and the state records of package
// shards (see shards/records.go) collected from the journal:
//
//	version byte (1) | origin uint64 | epoch uint64 | now int64
//	| CRC-32C of the records uint32 | records
//
// integers little-endian. origin identifies the process that wrote the
// entry (a random number drawn at start): that process already holds the
// entry's state in memory and skips it when the entry comes back through
// the FSM. epoch is the applier's sequence number of the collection. now
// is the leader's clock when it collected the records, and the only time
// the records are applied with (a key whose state has expired by then is
// deleted), so every replica and every replay reaches the same state.
const (
	entryVersion = 1
	entryHeader  = 1 + 8 + 8 + 8 + 4
)

// errBadEntry is returned for a log entry that cannot be decoded.
var errBadEntry = errors.New("cluster: corrupt log entry")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entry is a decoded log entry; records aliases the entry's data.
type entry struct {
	origin, epoch uint64
	now           int64
	sum           uint32 // CRC-32C of records, as the header says
	records       []byte
}

// beginEntry returns dst with room for the header; the records follow.
func beginEntry(dst []byte) []byte {
	return append(dst[:0], make([]byte, entryHeader)...)
}

// sealEntry fills in the header of b, begun with beginEntry and followed
// by the records.
func sealEntry(b []byte, origin, epoch uint64, now int64) {
	b[0] = entryVersion
	binary.LittleEndian.PutUint64(b[1:], origin)
	binary.LittleEndian.PutUint64(b[9:], epoch)
	binary.LittleEndian.PutUint64(b[17:], uint64(now))
	binary.LittleEndian.PutUint32(b[25:], crc32.Checksum(b[entryHeader:], castagnoli))
}

// decodeEntry decodes b and verifies its checksum.
func decodeEntry(b []byte) (entry, error) {
	e, err := decodeHeader(b)
	if err == nil {
		err = e.verify()
	}
	return e, err
}

// decodeHeader decodes b's header; verify checks the records.
func decodeHeader(b []byte) (entry, error) {
	if len(b) < entryHeader {
		return entry{}, fmt.Errorf("%w: %d bytes", errBadEntry, len(b))
	}
	if b[0] != entryVersion {
		return entry{}, fmt.Errorf("%w: version %d", errBadEntry, b[0])
	}
	return entry{
		origin:  binary.LittleEndian.Uint64(b[1:]),
		epoch:   binary.LittleEndian.Uint64(b[9:]),
		now:     int64(binary.LittleEndian.Uint64(b[17:])),
		sum:     binary.LittleEndian.Uint32(b[25:]),
		records: b[entryHeader:],
	}, nil
}

// verify checks the records against the header's checksum.
func (e entry) verify() error {
	if crc32.Checksum(e.records, castagnoli) != e.sum {
		return fmt.Errorf("%w: checksum mismatch", errBadEntry)
	}
	return nil
}
