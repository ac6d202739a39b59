package wire

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func TestDecoderReadsWhatWasWritten(t *testing.T) {
	b := binary.AppendUvarint(nil, 300)
	b = binary.AppendVarint(b, -5)
	b = binary.AppendUvarint(b, 3)
	b = append(b, "abc"...)
	b = binary.BigEndian.AppendUint32(b, 0xdeadbeef)
	b = append(b, 7)
	d := Decoder{B: b}
	if u, v, s, w, x := d.Uvarint(), d.Varint(), d.Bytes(), d.Uint32(), d.Byte(); u != 300 || v != -5 || !bytes.Equal(s, []byte("abc")) || w != 0xdeadbeef || x != 7 {
		t.Fatalf("read %d %d %q %#x %d", u, v, s, w, x)
	}
	if d.Bad || len(d.B) != 0 {
		t.Fatalf("bad %v, %d bytes left", d.Bad, len(d.B))
	}
}

func TestDecoderFailsOnceAndStays(t *testing.T) {
	for name, b := range map[string][]byte{
		"cut varint":           {0x80},
		"length past the end":  {5, 'a', 'b'},
		"short uint32":         {1, 2, 3},
		"nothing for the byte": {},
	} {
		d := Decoder{B: b}
		switch name {
		case "cut varint":
			d.Uvarint()
		case "length past the end":
			if s := d.Bytes(); s != nil {
				t.Errorf("%s: got %q", name, s)
			}
		case "short uint32":
			d.Uint32()
		default:
			d.Byte()
		}
		if !d.Bad || d.B != nil {
			t.Errorf("%s: bad %v, left %v", name, d.Bad, d.B)
		}
		if d.Uvarint() != 0 || d.Varint() != 0 || d.Bytes() != nil || d.Uint32() != 0 || d.Byte() != 0 || !d.Bad {
			t.Errorf("%s: reads after a failure return values", name)
		}
	}
}
