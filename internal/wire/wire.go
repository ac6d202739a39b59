// Package wire reads the fields of rlserver's on-disk metadata: varints,
// fixed-width integers and length-prefixed byte strings (raftlog's log
// entries, snapshot's metadata records).
package wire

import "encoding/binary"

// Decoder reads fields from the front of B. The first failure sets Bad and
// empties B; later reads return zero values, so a caller checks Bad (and
// that B is empty) once at the end.
type Decoder struct {
	B   []byte
	Bad bool
}

// Fail marks the input malformed.
func (d *Decoder) Fail() { d.B, d.Bad = nil, true }

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 {
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.Fail()
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Varint reads a signed (zig-zag) varint.
func (d *Decoder) Varint() int64 {
	v, n := binary.Varint(d.B)
	if n <= 0 {
		d.Fail()
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Bytes reads a uvarint length and that many bytes, returned as a
// sub-slice of the input.
func (d *Decoder) Bytes() []byte {
	n := d.Uvarint()
	if d.Bad || n > uint64(len(d.B)) {
		d.Fail()
		return nil
	}
	s := d.B[:n]
	d.B = d.B[n:]
	return s
}

// Uint32 reads a big-endian uint32.
func (d *Decoder) Uint32() uint32 {
	if len(d.B) < 4 {
		d.Fail()
		return 0
	}
	v := binary.BigEndian.Uint32(d.B)
	d.B = d.B[4:]
	return v
}

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if len(d.B) < 1 {
		d.Fail()
		return 0
	}
	v := d.B[0]
	d.B = d.B[1:]
	return v
}
