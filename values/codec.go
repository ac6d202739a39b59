package values

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/rlserver/rlserver/internal/wire"
)

// The encoding of a Value, for the store's journal and snapshots. It is
// stable: a value encoded by any version decodes in later ones (golden
// fixtures in testdata hold each format). It starts with a tag byte
// naming the format and kind; a new format gets new tags, and old tags
// keep their meaning. Format 1:
//
//	tag 0x01 string:  uvarint length, bytes
//	tag 0x02 integer: varint (a string holding its decimal form)
//	tag 0x03 list:    uvarint count, count × (uvarint length, bytes)
//	tag 0x04 hash:    flags (bit 0: listpack order), uvarint count,
//	                  count × (field, value), a value being 0x00 and
//	                  length-prefixed bytes or 0x01 and a varint
//	tag 0x05 zset:    flags (bit 0: listpack), uvarint count,
//	                  count × (uvarint length, member, 8-byte little-endian
//	                  IEEE 754 score) in (score, member) order
//
// Bit 0x80 of the tag marks an expiry too far for Entry.Expires (Redis
// ms, a varint right after the tag).

// ErrCorrupt is DecodeValue's error for bytes that are not a value's
// encoding.
var ErrCorrupt = errors.New("values: corrupt value encoding")

const (
	tagString = 0x01
	tagInt    = 0x02
	tagList   = 0x03
	tagHash   = 0x04
	tagZSet   = 0x05
	tagFar    = 0x80

	flagListpack = 0x01
)

// AppendValue appends v's encoding to dst and returns the extended
// buffer.
func AppendValue(dst []byte, v *Value) []byte {
	tag := byte(tagString)
	switch {
	case v.kind == KindString && v.str.isInt:
		tag = tagInt
	case v.kind == KindList:
		tag = tagList
	case v.kind == KindHash:
		tag = tagHash
	case v.kind == KindZSet:
		tag = tagZSet
	}
	if v.far != 0 {
		dst = append(dst, tag|tagFar)
		dst = binary.AppendVarint(dst, v.far)
	} else {
		dst = append(dst, tag)
	}
	switch tag {
	case tagInt:
		return binary.AppendVarint(dst, v.str.n)
	case tagString:
		return appendBytes(dst, v.str.b)
	case tagList:
		dst = binary.AppendUvarint(dst, uint64(v.list.len()))
		for i := 0; i < v.list.len(); i++ {
			dst = appendBytes(dst, v.list.at(i))
		}
		return dst
	case tagHash:
		return appendHash(dst, v.hash)
	}
	return appendZSet(dst, v.zset)
}

func appendBytes(dst, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

func appendHash(dst []byte, h *hashVal) []byte {
	dst = append(dst, boolFlag(h.ordered))
	dst = binary.AppendUvarint(dst, uint64(h.len()))
	for i := range h.ents {
		dst = binary.AppendUvarint(dst, uint64(len(h.ents[i].field)))
		dst = append(dst, h.ents[i].field...)
		if s := &h.ents[i].val; s.isInt {
			dst = binary.AppendVarint(append(dst, 1), s.n)
		} else {
			dst = appendBytes(append(dst, 0), s.b)
		}
	}
	return dst
}

func appendZSet(dst []byte, z *zset) []byte {
	dst = append(dst, boolFlag(z.lp))
	dst = binary.AppendUvarint(dst, uint64(z.len()))
	z.each(func(member string, score float64) {
		dst = binary.AppendUvarint(dst, uint64(len(member)))
		dst = append(dst, member...)
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(score))
	})
	return dst
}

func boolFlag(b bool) byte {
	if b {
		return flagListpack
	}
	return 0
}

// DecodeValue decodes a value that AppendValue encoded at the start of b
// and returns it with the number of bytes it took. The value owns its
// memory (it does not keep b). Bytes that are no value's encoding, or a
// value that breaks its kind's rules (a sorted set out of order, a field
// twice), give ErrCorrupt.
func DecodeValue(b []byte) (*Value, int, error) {
	d := wire.Decoder{B: b}
	tag := d.Byte()
	v := &Value{}
	if tag&tagFar != 0 {
		if v.far = d.Varint(); v.far <= 0 {
			d.Fail()
		}
		tag &^= tagFar
	}
	var err error
	switch tag {
	case tagString:
		v.kind = KindString
		v.str.setBytes(d.Bytes())
	case tagInt:
		v.kind = KindString
		v.str.setInt(d.Varint())
	case tagList:
		v.kind, v.list = KindList, &deque{}
		err = decodeList(&d, v.list)
	case tagHash:
		v.kind = KindHash
		v.hash, err = decodeHash(&d)
	case tagZSet:
		v.kind = KindZSet
		v.zset, err = decodeZSet(&d)
	default:
		return nil, 0, fmt.Errorf("%w: tag %#x", ErrCorrupt, tag)
	}
	if err != nil {
		return nil, 0, err
	}
	if d.Bad {
		return nil, 0, fmt.Errorf("%w: %s cut short", ErrCorrupt, v.kind)
	}
	if v.kind != KindString && v.Len() == 0 {
		return nil, 0, fmt.Errorf("%w: empty %s", ErrCorrupt, v.kind)
	}
	return v, len(b) - len(d.B), nil
}

// count reads an element count, refusing one larger than the bytes left
// could hold (every element takes at least min bytes).
func count(d *wire.Decoder, min int) (int, error) {
	n := d.Uvarint()
	if d.Bad || n > uint64(len(d.B)/min) {
		return 0, fmt.Errorf("%w: count %d for %d bytes", ErrCorrupt, n, len(d.B))
	}
	return int(n), nil
}

func decodeList(d *wire.Decoder, l *deque) error {
	n, err := count(d, 1)
	if err != nil {
		return err
	}
	for range n {
		b := d.Bytes()
		if d.Bad {
			break
		}
		l.pushBack(b)
	}
	return nil
}

func decodeHash(d *wire.Decoder) (*hashVal, error) {
	ordered, err := listpackFlag(d)
	if err != nil {
		return nil, err
	}
	h := &hashVal{ordered: ordered}
	n, err := count(d, 3)
	if err != nil {
		return nil, err
	}
	for range n {
		field, kind := d.Bytes(), d.Byte()
		if d.Bad || h.find(field) >= 0 {
			return nil, fmt.Errorf("%w: hash field %q", ErrCorrupt, field)
		}
		switch kind {
		case 0:
			h.set(field, d.Bytes())
		case 1:
			h.setInt(field, d.Varint())
		default:
			return nil, fmt.Errorf("%w: hash value kind %d", ErrCorrupt, kind)
		}
	}
	if h.ordered != ordered {
		return nil, fmt.Errorf("%w: hash marked listpack is too large", ErrCorrupt)
	}
	return h, nil
}

func decodeZSet(d *wire.Decoder) (*zset, error) {
	z := newZSetVal()
	lp, err := listpackFlag(d)
	if err != nil {
		return nil, err
	}
	if !lp {
		z.toSkiplist()
	}
	n, err := count(d, 9)
	if err != nil {
		return nil, err
	}
	var last zent // the member before, which m must follow
	for i := range n {
		m := d.Bytes()
		if len(d.B) < 8 {
			d.Fail()
		}
		if d.Bad {
			return nil, fmt.Errorf("%w: zset cut short", ErrCorrupt)
		}
		score := math.Float64frombits(binary.LittleEndian.Uint64(d.B))
		d.B = d.B[8:]
		_, twice := z.score(m)
		switch {
		case math.IsNaN(score) || (i > 0 && !zless(last.score, last.member, score, string(m))):
			return nil, fmt.Errorf("%w: zset member %q out of order", ErrCorrupt, m)
		case twice:
			return nil, fmt.Errorf("%w: zset member %q twice", ErrCorrupt, m)
		case lp && score == 0 && math.Signbit(score):
			return nil, fmt.Errorf("%w: listpack zset holds -0", ErrCorrupt)
		}
		z.add(m, score)
		last = zent{string(m), score}
	}
	if lp != z.lp {
		return nil, fmt.Errorf("%w: zset marked listpack is too large", ErrCorrupt)
	}
	return z, nil
}

// listpackFlag reads a hash's or sorted set's flags byte.
func listpackFlag(d *wire.Decoder) (bool, error) {
	switch f := d.Byte(); {
	case d.Bad:
		return false, fmt.Errorf("%w: cut short", ErrCorrupt)
	case f&^flagListpack != 0:
		return false, fmt.Errorf("%w: flags %#x", ErrCorrupt, f)
	default:
		return f == flagListpack, nil
	}
}
