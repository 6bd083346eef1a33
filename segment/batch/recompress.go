package batch

import (
	"encoding/binary"
	"fmt"
)

// Recompress returns batch b (exactly one whole batch) with its records
// section compressed with codec instead: the records are decompressed and
// compressed again as one block, never decoded; the header keeps every
// field but the codec bits, batchLength and the CRC, which are recomputed.
// A batch already using codec is returned as is. This is what a broker
// does for a topic whose compression.type names a codec (Kafka's
// LogValidator). Errors wrap ErrCorrupt for an undecodable batch, or
// ErrUnsupportedCodec.
func Recompress(b []byte, codec Codec) ([]byte, error) {
	h, err := ValidateHeader(b)
	if err != nil {
		return nil, err
	}
	if h.Codec() == codec {
		return b, nil
	}
	if !codec.valid() {
		return nil, fmt.Errorf("%w: codec %d", ErrUnsupportedCodec, codec)
	}
	raw, buf, err := recordsOf(&h, b)
	if err != nil {
		return nil, err
	}
	defer buf.put(raw) // after out is built: body may be raw itself
	body, err := Compress(codec, raw)
	if err != nil {
		return nil, err
	}
	out := make([]byte, HeaderSize, HeaderSize+len(body))
	copy(out, b[:HeaderSize])
	out = append(out, body...)
	be := binary.BigEndian
	be.PutUint32(out[OffLength:], uint32(len(out)-LengthOverhead))
	attrs := be.Uint16(out[OffAttributes:])&^uint16(CompressionMask) | uint16(codec)
	be.PutUint16(out[OffAttributes:], attrs)
	be.PutUint32(out[OffCRC:], Checksum(out))
	return out, nil
}
