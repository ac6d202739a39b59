package raftlog

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rlserver/rlserver/internal/testseed"
)

// Version 1 fixtures, encoded by hand (with an independent CRC-32C) from
// the format in entry.go. They must keep decoding to the same entries
// after any change of format.
var goldenEntries = []struct {
	name string
	log  raft.Log
	hex  string
}{
	{"command", raft.Log{Index: 5, Term: 2, Type: raft.LogCommand, Data: []byte("hi"), Extensions: []byte("x"),
		AppendedAt: time.Unix(1700000000, 5)}, "010001050280c49fd50c050268690178873bcfb4"},
	{"bare configuration", raft.Log{Index: 1, Term: 1, Type: raft.LogConfiguration}, "01050001010000f6fc220d"},
	{"before 1970", raft.Log{Index: 300, Term: 70000, Type: raft.LogAddPeerDeprecated, Data: []byte{0, 0xff},
		AppendedAt: time.Unix(-1, 999999999)}, "010201ac02f0a20401ff93ebdc030200ff00900f8438"},
}

func TestGoldenEntries(t *testing.T) {
	for _, g := range goldenEntries {
		want, err := hex.DecodeString(g.hex)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendEntry(nil, &g.log); !bytes.Equal(got, want) {
			t.Errorf("%s: appendEntry = %x, want %s", g.name, got, g.hex)
		}
		var l raft.Log
		if err := decodeEntry(want, g.log.Index, &l); err != nil {
			t.Errorf("%s: decodeEntry: %v", g.name, err)
		} else if d := sameLog(&l, &g.log); d != "" {
			t.Errorf("%s: decoded %s", g.name, d)
		}
	}
}

func TestEntryRoundTrip(t *testing.T) {
	rng := testseed.Rand(t)
	prefix := []byte("key")
	for i := 0; i < 2000; i++ {
		l := raft.Log{Index: rng.Uint64() >> rng.IntN(64), Term: rng.Uint64() >> rng.IntN(64), Type: raft.LogType(rng.IntN(256))}
		if rng.IntN(2) == 0 {
			l.AppendedAt = time.Unix(rng.Int64N(1<<40)-1<<39, rng.Int64N(1e9))
		}
		l.Data = randBytes(rng.IntN(3)*rng.IntN(300), rng.Uint32)
		l.Extensions = randBytes(rng.IntN(2)*rng.IntN(20), rng.Uint32)
		b := appendEntry(bytes.Clone(prefix), &l)
		if !bytes.Equal(b[:len(prefix)], prefix) {
			t.Fatalf("appendEntry overwrote the prefix")
		}
		var got raft.Log
		if err := decodeEntry(b[len(prefix):], l.Index, &got); err != nil {
			t.Fatalf("decode %+v: %v", l, err)
		}
		if d := sameLog(&got, &l); d != "" {
			t.Fatalf("round trip of %+v: %s", l, d)
		}
	}
}

func randBytes(n int, next func() uint32) []byte {
	if n == 0 {
		return nil
	}
	b := make([]byte, n+3)
	for i := 0; i < n; i += 4 {
		binary.LittleEndian.PutUint32(b[i:], next())
	}
	return b[:n:n]
}

// TestDecodeRejectsCorruption flips every bit and cuts every length of a
// valid encoding: each must be refused, never decoded to something else.
func TestDecodeRejectsCorruption(t *testing.T) {
	good := appendEntry(nil, entry(1, 1234))
	keep := raft.Log{Index: 77}
	check := func(what string, b []byte) {
		t.Helper()
		l := keep
		if err := decodeEntry(b, 1234, &l); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: decodeEntry = %v, want ErrCorrupt", what, err)
		}
		if l.Index != 77 {
			t.Fatalf("%s: a failed decode changed the entry", what)
		}
	}
	for i := 0; i < len(good)*8; i++ {
		b := bytes.Clone(good)
		b[i/8] ^= 1 << (i % 8)
		check("bit flip", b)
	}
	for n := 0; n < len(good); n++ {
		check("truncation", good[:n])
	}
	check("trailing byte", append(bytes.Clone(good), 0))
	// Well-checksummed bodies that are still wrong.
	body := good[:len(good)-crcLen]
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"version 2", append([]byte{2}, body[1:]...)},
		{"unknown flag", append([]byte{1, body[1], body[2] | 2}, body[3:]...)},
		{"extra byte before the checksum", append(bytes.Clone(body), 0)},
		{"data length past the end", []byte{1, 0, 0, 0xd2, 0x09, 1, 0x7f, 0}},
		{"nanoseconds of 1e9", append(append([]byte{1, 0, 1, 0xd2, 0x09, 1, 0}, binary.AppendUvarint(nil, 1e9)...), 0, 0)},
		{"varint too long", append([]byte{1, 0, 0}, bytes.Repeat([]byte{0xff}, 11)...)},
	} {
		check(c.name, binary.BigEndian.AppendUint32(bytes.Clone(c.b), crc32.Checksum(c.b, castagnoli)))
	}
	// The control: the last case with a valid time decodes.
	ok := append(append([]byte{1, 0, 1, 0xd2, 0x09, 1, 0}, binary.AppendUvarint(nil, 1e9-1)...), 0, 0)
	var l raft.Log
	if err := decodeEntry(binary.BigEndian.AppendUint32(ok, crc32.Checksum(ok, castagnoli)), 1234, &l); err != nil {
		t.Fatalf("control: %v", err)
	}
	if err := decodeEntry(good, 1235, &l); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("an entry under another index's key: %v", err)
	}
}

// FuzzDecodeEntry decodes the input as it is, and with a valid checksum
// appended so that the parser behind the checksum is reached too.
func FuzzDecodeEntry(f *testing.F) {
	for _, g := range goldenEntries {
		b, _ := hex.DecodeString(g.hex)
		f.Add(b, g.log.Index)
		f.Add(b[:len(b)-crcLen], g.log.Index)
	}
	f.Fuzz(func(t *testing.T, b []byte, index uint64) {
		checkDecode(t, b, index)
		checkDecode(t, binary.BigEndian.AppendUint32(bytes.Clone(b), crc32.Checksum(b, castagnoli)), index)
	})
}

// checkDecode decodes b: either an error wrapping ErrCorrupt, or an entry
// that re-encodes to one that decodes the same.
func checkDecode(t *testing.T, b []byte, index uint64) {
	var l raft.Log
	if err := decodeEntry(b, index, &l); err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error %v does not wrap ErrCorrupt", err)
		}
		return
	}
	if l.Index != index {
		t.Fatalf("decoded index %d under key %d", l.Index, index)
	}
	var again raft.Log
	if err := decodeEntry(appendEntry(nil, &l), index, &again); err != nil {
		t.Fatalf("re-encoding of a decoded entry: %v", err)
	}
	if d := sameLog(&again, &l); d != "" {
		t.Fatalf("re-encoding changed the entry: %s", d)
	}
}

// TestEntryLen: entryLen is the length appendEntry writes, which StoreLogs
// relies on to encode straight into the batch.
func TestEntryLen(t *testing.T) {
	for _, l := range []*raft.Log{
		{}, {Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("x")},
		{Index: 1 << 62, Term: 1 << 40, Data: make([]byte, 300), Extensions: []byte("ext"), AppendedAt: time.Unix(1_750_000_000, 123456789)},
		{Index: 200, AppendedAt: time.Unix(-5, 999_999_999), Data: make([]byte, 1<<17)},
	} {
		if got, want := entryLen(l), len(appendEntry(nil, l)); got != want {
			t.Errorf("entryLen = %d, appendEntry wrote %d (%+v)", got, want, l.Index)
		}
	}
}
