package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Format constants. These are part of the on-disk and wire format (Kafka's
// DefaultRecordBatch, magic 2): changing any of them breaks compatibility.
const (
	// HeaderSize is the size in bytes of the batch header, records excluded.
	HeaderSize = 61
	// Magic is the message format version this package understands.
	Magic = 2

	// Byte offsets of the header fields from the start of the batch.
	OffBaseOffset      = 0  // int64
	OffLength          = 8  // int32, bytes after this field
	OffLeaderEpoch     = 12 // int32
	OffMagic           = 16 // int8
	OffCRC             = 17 // uint32, CRC-32C of [OffAttributes, end)
	OffAttributes      = 21 // int16
	OffLastOffsetDelta = 23 // int32
	OffBaseTimestamp   = 27 // int64, ms
	OffMaxTimestamp    = 35 // int64, ms
	OffProducerID      = 43 // int64
	OffProducerEpoch   = 51 // int16
	OffBaseSequence    = 53 // int32
	OffRecordCount     = 57 // int32

	// Attribute bits (Kafka DefaultRecordBatch; KIP-98, KIP-534).
	CompressionMask  = 0x07 // bits 0-2: the Codec
	TimestampTypeBit = 0x08 // set: LogAppendTime, clear: CreateTime
	TransactionalBit = 0x10
	ControlBit       = 0x20
	DeleteHorizonBit = 0x40 // baseTimestamp is the compaction delete horizon

	// LengthOverhead is the size of the baseOffset and batchLength fields,
	// which batchLength does not count: a batch is batchLength+12 bytes.
	LengthOverhead = 12
)

// minLength is the smallest valid batchLength: a header with no records.
const minLength = HeaderSize - LengthOverhead

// Codec is a batch's compression codec, attribute bits 0-2.
type Codec int8

// Codecs defined by Kafka. Values 5-7 are invalid.
const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

var codecNames = [...]string{"none", "gzip", "snappy", "lz4", "zstd"}

// String returns Kafka's name for the codec ("none", "gzip", ...).
func (c Codec) String() string {
	if c >= 0 && int(c) < len(codecNames) {
		return codecNames[c]
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// valid reports whether c is one of the five Kafka codecs.
func (c Codec) valid() bool { return c >= CodecNone && c <= CodecZstd }

var (
	// ErrCorrupt is the one corruption marker: every error reporting a
	// malformed batch wraps it, with the precise reason in the message.
	ErrCorrupt = errors.New("segment: corrupt batch")
	// ErrUnsupportedCodec reports a compression codec outside 0-4. A batch
	// carrying one is also corrupt: such errors wrap both.
	ErrUnsupportedCodec = errors.New("segment: unsupported compression codec")
)

// corruptf returns an error wrapping ErrCorrupt with a formatted reason.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// Header is the decoded fixed-size header of a batch. Field meanings and
// units are in the package doc.
type Header struct {
	BaseOffset           int64
	Length               int32 // batchLength: bytes after the Length field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64 // ms
	MaxTimestamp         int64 // ms
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// ParseHeader decodes the header at the start of b. It checks only that b
// holds at least HeaderSize bytes and that the magic byte is 2; both
// failures wrap ErrCorrupt. It does not allocate on success.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, corruptf("header needs %d bytes, have %d", HeaderSize, len(b))
	}
	b = b[:HeaderSize]
	be := binary.BigEndian
	h := Header{
		BaseOffset:           int64(be.Uint64(b[OffBaseOffset:])),
		Length:               int32(be.Uint32(b[OffLength:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[OffLeaderEpoch:])),
		Magic:                int8(b[OffMagic]),
		CRC:                  be.Uint32(b[OffCRC:]),
		Attributes:           int16(be.Uint16(b[OffAttributes:])),
		LastOffsetDelta:      int32(be.Uint32(b[OffLastOffsetDelta:])),
		BaseTimestamp:        int64(be.Uint64(b[OffBaseTimestamp:])),
		MaxTimestamp:         int64(be.Uint64(b[OffMaxTimestamp:])),
		ProducerID:           int64(be.Uint64(b[OffProducerID:])),
		ProducerEpoch:        int16(be.Uint16(b[OffProducerEpoch:])),
		BaseSequence:         int32(be.Uint32(b[OffBaseSequence:])),
		NumRecords:           int32(be.Uint32(b[OffRecordCount:])),
	}
	if h.Magic != Magic {
		return Header{}, corruptf("magic %d, want %d", h.Magic, Magic)
	}
	return h, nil
}

// Size returns the batch's total size in bytes, Length + LengthOverhead.
func (h Header) Size() int { return int(h.Length) + LengthOverhead }

// LastOffset returns the offset of the batch's last record (or, for a batch
// emptied by compaction, the last offset it once held).
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset returns the offset following the batch: LastOffset() + 1.
func (h Header) NextOffset() int64 { return h.LastOffset() + 1 }

// Codec returns the compression codec in attribute bits 0-2.
func (h Header) Codec() Codec { return Codec(h.Attributes & CompressionMask) }

// LogAppendTime reports whether the timestamp type bit is set: record
// timestamps are the broker's append time, MaxTimestamp.
func (h Header) LogAppendTime() bool { return h.Attributes&TimestampTypeBit != 0 }

// Transactional reports whether the batch is part of a transaction (KIP-98).
func (h Header) Transactional() bool { return h.Attributes&TransactionalBit != 0 }

// Control reports whether the batch holds a control record such as a
// transaction marker (KIP-98).
func (h Header) Control() bool { return h.Attributes&ControlBit != 0 }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C (Castagnoli) of b[OffAttributes:], which is
// what the crc field covers when b is exactly one whole batch. It returns 0
// when b is shorter than OffAttributes.
func Checksum(b []byte) uint32 {
	if len(b) < OffAttributes {
		return 0
	}
	return crc32.Checksum(b[OffAttributes:], castagnoli)
}

// CRCValid reports whether b, exactly one whole batch, holds a header and
// its stored crc matches Checksum(b).
func CRCValid(b []byte) bool {
	return len(b) >= HeaderSize && binary.BigEndian.Uint32(b[OffCRC:]) == Checksum(b)
}

// mustHeader panics with a clear message when b cannot hold a header: the
// setters below are for batches the caller has already validated.
func mustHeader(fn string, b []byte) {
	if len(b) < HeaderSize {
		panic(fmt.Sprintf("batch.%s: %d bytes cannot hold a %d-byte batch header", fn, len(b), HeaderSize))
	}
}

// SetBaseOffset overwrites the baseOffset field. The CRC does not cover it,
// so the batch stays valid. It panics if len(b) < HeaderSize.
func SetBaseOffset(b []byte, off int64) {
	mustHeader("SetBaseOffset", b)
	binary.BigEndian.PutUint64(b[OffBaseOffset:], uint64(off))
}

// SetPartitionLeaderEpoch overwrites the partitionLeaderEpoch field, which
// the CRC does not cover. It panics if len(b) < HeaderSize.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	mustHeader("SetPartitionLeaderEpoch", b)
	binary.BigEndian.PutUint32(b[OffLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime marks b, exactly one whole batch, as LogAppendTime with
// append time ts (ms): it sets maxTimestamp to ts and the timestamp type
// bit, then recomputes the crc. Records are untouched; their timestamps
// read as ts from then on. This is what a Kafka broker does for topics with
// message.timestamp.type=LogAppendTime. It panics if len(b) < HeaderSize.
func SetLogAppendTime(b []byte, ts int64) {
	mustHeader("SetLogAppendTime", b)
	be := binary.BigEndian
	be.PutUint64(b[OffMaxTimestamp:], uint64(ts))
	be.PutUint16(b[OffAttributes:], be.Uint16(b[OffAttributes:])|TimestampTypeBit)
	be.PutUint32(b[OffCRC:], Checksum(b))
}

// SetMaxTimestamp sets b's maxTimestamp field to ts (ms) and recomputes
// the crc; records are untouched. A broker corrects a CreateTime batch
// whose field disagrees with its records this way (Kafka's LogValidator).
// It panics if len(b) < HeaderSize.
func SetMaxTimestamp(b []byte, ts int64) {
	mustHeader("SetMaxTimestamp", b)
	binary.BigEndian.PutUint64(b[OffMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(b[OffCRC:], Checksum(b))
}
