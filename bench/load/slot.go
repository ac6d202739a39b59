package load

// Slots is the number of Redis Cluster hash slots.
const Slots = 16384

// crcTable is CRC16/XMODEM (polynomial 0x1021, initial value 0, no
// reflection), the checksum Redis Cluster hashes keys with, one byte at a
// time.
var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// crc16 returns the CRC16/XMODEM of b.
func crc16(b []byte) uint16 {
	var c uint16
	for _, x := range b {
		c = c<<8 ^ crcTable[byte(c>>8)^x]
	}
	return c
}

// Slot returns key's Redis Cluster slot: CRC16/XMODEM mod 16384 of the
// key, or of its hash tag, the bytes between the first '{' and the first
// '}' after it, if there are any ("{user1000}.following" and
// "{user1000}.followers" share a slot; "foo{}{bar}" hashes whole).
func Slot(key []byte) int {
	for i, c := range key {
		if c != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j > i+1 {
					key = key[i+1 : j]
				}
				return int(crc16(key) % Slots)
			}
		}
		break
	}
	return int(crc16(key) % Slots)
}
