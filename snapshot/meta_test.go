package snapshot

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/hashicorp/raft"
)

// Version 1 fixtures, encoded by hand (with an independent CRC-32C) from
// the format in meta.go. They must keep decoding to the same records
// after any change of format.
var goldenRecords = []struct {
	name string
	rec  record
	hex  string
}{
	{"two servers", record{meta: raft.SnapshotMeta{Version: 1, ID: "3-10-1800000000000", Index: 10, Term: 3,
		ConfigurationIndex: 9, Size: 5, Configuration: testConfig}, chunks: 1, crc: 0x9a71bb4c},
		"010112332d31302d313830303030303030303030300a030905019a71bb4c0200026e310e3132372e302e302e313a3730303101026e320a5b3a3a315d3a373030320dafa9db"},
	{"empty", record{meta: raft.SnapshotMeta{Version: 1, ID: "1-1-1", Index: 1, Term: 1}},
		"010105312d312d31010100000000000000005a24c759"},
}

func TestGoldenRecords(t *testing.T) {
	for _, g := range goldenRecords {
		want, _ := hex.DecodeString(g.hex)
		if got := appendRecord(nil, &g.rec); !bytes.Equal(got, want) {
			t.Errorf("%s: appendRecord = %x, want %s", g.name, got, g.hex)
		}
		r, err := decodeRecord(want)
		if err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
		if diff := recordDiff(r, &g.rec); diff != "" {
			t.Errorf("%s: decoded %s", g.name, diff)
		}
	}
}

func recordDiff(a, b *record) string {
	if fmt.Sprintf("%+v", *a) != fmt.Sprintf("%+v", *b) {
		return fmt.Sprintf("%+v, want %+v", *a, *b)
	}
	return ""
}

func TestDecodeRecordRejectsCorruption(t *testing.T) {
	good, _ := hex.DecodeString(goldenRecords[0].hex)
	for i := 0; i < len(good)*8; i++ {
		b := bytes.Clone(good)
		b[i/8] ^= 1 << (i % 8)
		if _, err := decodeRecord(b); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("bit %d flipped: %v", i, err)
		}
	}
	for n := 0; n < len(good); n++ {
		if _, err := decodeRecord(good[:n]); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("cut to %d bytes: %v", n, err)
		}
	}
	body := good[:len(good)-recordCRCLen]
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"version 2", append([]byte{2}, body[1:]...)},
		{"leftover byte", append(bytes.Clone(body), 0)},
		{"suffrage 3", bytes.Replace(body, []byte{0, 2, 'n', '1'}, []byte{3, 2, 'n', '1'}, 1)},
		{"server count past the end", append(bytes.Clone(body[:len(body)-35]), 0x7f)},
	} {
		b := binary.BigEndian.AppendUint32(bytes.Clone(c.b), crc32.Checksum(c.b, storeCRC))
		if _, err := decodeRecord(b); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
}

// FuzzDecodeRecord decodes the input as it is and with a valid checksum
// appended: an error wrapping ErrCorruptSnapshot, or a record that
// re-encodes to the same bytes.
func FuzzDecodeRecord(f *testing.F) {
	for _, g := range goldenRecords {
		b, _ := hex.DecodeString(g.hex)
		f.Add(b)
		f.Add(b[:len(b)-recordCRCLen])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, in := range [][]byte{b, binary.BigEndian.AppendUint32(bytes.Clone(b), crc32.Checksum(b, storeCRC))} {
			r, err := decodeRecord(in)
			if err != nil {
				if !errors.Is(err, ErrCorruptSnapshot) {
					t.Fatalf("error %v does not wrap ErrCorruptSnapshot", err)
				}
				continue
			}
			again, err := decodeRecord(appendRecord(nil, r))
			if err != nil {
				t.Fatalf("re-encoding of %+v: %v", *r, err)
			}
			if d := recordDiff(again, r); d != "" {
				t.Fatalf("re-encoding changed the record: %s", d)
			}
		}
	})
}
