package batch

// Kafka's varint and varlong: zigzag-encoded, little-endian base-128, as in
// protobuf's sint32 and sint64 (Kafka ByteUtils). A varint takes at most 5
// bytes, a varlong at most 10; like franz-go's kbin, a final byte with bits
// beyond the type's width is rejected rather than silently truncated.

// uvarint32 decodes an unsigned 32-bit varint from the start of b. It
// returns the value and the number of bytes read, or n == 0 when b is
// truncated or the encoding overflows 32 bits.
func uvarint32(b []byte) (v uint32, n int) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint32(b[0]), 1
	}
	return uvarint32Slow(b)
}

func uvarint32Slow(b []byte) (uint32, int) {
	var x uint32
	for i := 0; i < 5 && i < len(b); i++ {
		c := b[i]
		if i == 4 {
			if c > 0x0f {
				return 0, 0
			}
			return x | uint32(c)<<28, 5
		}
		x |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			return x, i + 1
		}
	}
	return 0, 0
}

// uvarint64 decodes an unsigned 64-bit varint like uvarint32, at most 10
// bytes.
func uvarint64(b []byte) (uint64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	var x uint64
	for i := 0; i < 10 && i < len(b); i++ {
		c := b[i]
		if i == 9 {
			if c > 0x01 {
				return 0, 0
			}
			return x | uint64(c)<<63, 10
		}
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return x, i + 1
		}
	}
	return 0, 0
}

// varint decodes a zigzag varint (int32); n == 0 on failure.
func varint(b []byte) (int32, int) {
	x, n := uvarint32(b)
	return int32(x>>1) ^ -int32(x&1), n
}

// varlong decodes a zigzag varlong (int64); n == 0 on failure.
func varlong(b []byte) (int64, int) {
	x, n := uvarint64(b)
	return int64(x>>1) ^ -int64(x&1), n
}

// appendVarint appends v as a zigzag varint.
func appendVarint(dst []byte, v int32) []byte {
	return appendUvarint(dst, uint64(uint32(v<<1)^uint32(v>>31)))
}

// appendVarlong appends v as a zigzag varlong.
func appendVarlong(dst []byte, v int64) []byte {
	return appendUvarint(dst, uint64(v<<1)^uint64(v>>63))
}

func appendUvarint(dst []byte, u uint64) []byte {
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}

// sizeVarint returns the encoded size of v as a zigzag varint.
func sizeVarint(v int32) int { return sizeUvarint(uint64(uint32(v<<1) ^ uint32(v>>31))) }

// sizeVarlong returns the encoded size of v as a zigzag varlong.
func sizeVarlong(v int64) int { return sizeUvarint(uint64(v<<1) ^ uint64(v>>63)) }

func sizeUvarint(u uint64) int {
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
