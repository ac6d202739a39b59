package slots

import "bytes"

// Count is the number of hash slots: slots are numbered 0 to Count-1.
const Count = 16384

// Of returns the hash slot of key, as Redis Cluster's CLUSTER KEYSLOT
// does: CRC16 of the key's hash tag if it has one, else of the whole key,
// modulo Count. Of neither allocates nor keeps key.
func Of(key []byte) int {
	return int(crc16(hashTag(key)) & (Count - 1))
}

// hashTag returns the part of key that is hashed: the bytes between the
// first '{' and the first '}' after it when there is at least one, else
// the whole key (Redis's keyHashSlot).
func hashTag(key []byte) []byte {
	s := bytes.IndexByte(key, '{')
	if s < 0 {
		return key
	}
	e := bytes.IndexByte(key[s+1:], '}')
	if e <= 0 { // no '}' after the '{', or "{}"
		return key
	}
	return key[s+1 : s+1+e]
}

// crc16 returns the CRC16/XMODEM of b, a byte at a time from crcTable.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^c]
	}
	return crc
}

// crcTable holds the CRC16/XMODEM (polynomial 0x1021) of every byte value.
var crcTable = makeTable(0x1021)

// makeTable returns the table of a most-significant-bit-first CRC16 with
// polynomial poly.
func makeTable(poly uint16) [256]uint16 {
	var t [256]uint16
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ poly
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}
