package batch

import (
	"encoding/binary"
	"fmt"
	"math"
)

// BuildOptions describes the batch Build makes. The zero value is used as
// is; NewBuildOptions gives what a plain (non-idempotent) Kafka producer
// sends: ProducerID, ProducerEpoch, BaseSequence and LeaderEpoch all -1.
type BuildOptions struct {
	Codec      Codec
	BaseOffset int64
	// BaseTimestamp is the batch's baseTimestamp in ms. Zero means the
	// first record's Timestamp, as Kafka producers set it.
	BaseTimestamp int64
	ProducerID    int64 // -1: no producer id
	ProducerEpoch int16 // -1: no producer epoch
	BaseSequence  int32 // -1: no sequence
	Transactional bool  // sets TransactionalBit
	Control       bool  // sets ControlBit
	// LogAppendTime sets TimestampTypeBit. maxTimestamp is still the
	// largest record timestamp; SetLogAppendTime sets the append time.
	LogAppendTime bool
	LeaderEpoch   int32 // partitionLeaderEpoch; -1 from producers
}

// NewBuildOptions returns options for an uncompressed batch from a plain
// producer: no producer id, epoch or sequence (-1) and no leader epoch (-1).
func NewBuildOptions() BuildOptions {
	return BuildOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, LeaderEpoch: -1}
}

// Build encodes recs as one batch. Record.Offset is ignored: the i-th
// record gets offset delta i. Record.Timestamp is absolute (ms). Build sets
// lastOffsetDelta (len(recs)-1), maxTimestamp (the largest record timestamp,
// -1 with no records), recordCount and the CRC, and compresses the records
// with opts.Codec. It is meant for tests, benchmarks and tools; it panics
// on a codec outside 0-4 or a batch over 2 GiB.
func Build(opts BuildOptions, recs []Record) []byte {
	if !opts.Codec.valid() {
		panic(fmt.Sprintf("batch.Build: unsupported codec %d", opts.Codec))
	}
	base := opts.BaseTimestamp
	if base == 0 && len(recs) > 0 {
		base = recs[0].Timestamp
	}
	maxTS := int64(-1)
	size := 0
	for i := range recs {
		maxTS = max(maxTS, recs[i].Timestamp)
		n := recordBodySize(&recs[i], int32(i), base)
		size += sizeVarint(int32(n)) + n
	}

	out := make([]byte, HeaderSize, HeaderSize+size)
	for i := range recs {
		out = appendRecord(out, &recs[i], int32(i), base)
	}
	if opts.Codec != CodecNone {
		comp, err := Compress(opts.Codec, out[HeaderSize:])
		if err != nil {
			panic(fmt.Sprintf("batch.Build: %s compression: %v", opts.Codec, err))
		}
		out = append(out[:HeaderSize], comp...)
	}
	if len(out)-LengthOverhead > math.MaxInt32 {
		panic(fmt.Sprintf("batch.Build: %d bytes do not fit one batch", len(out)))
	}

	attrs := uint16(opts.Codec)
	if opts.LogAppendTime {
		attrs |= TimestampTypeBit
	}
	if opts.Transactional {
		attrs |= TransactionalBit
	}
	if opts.Control {
		attrs |= ControlBit
	}
	putHeader(out, &Header{
		BaseOffset: opts.BaseOffset, PartitionLeaderEpoch: opts.LeaderEpoch, Attributes: int16(attrs),
		LastOffsetDelta: int32(len(recs) - 1), BaseTimestamp: base, MaxTimestamp: maxTS,
		ProducerID: opts.ProducerID, ProducerEpoch: opts.ProducerEpoch, BaseSequence: opts.BaseSequence,
		NumRecords: int32(len(recs)),
	})
	return out
}

// putHeader writes h's fields into the header of out, a whole batch, with
// batchLength from len(out), magic 2 and the CRC computed over out.
func putHeader(out []byte, h *Header) {
	be := binary.BigEndian
	be.PutUint64(out[OffBaseOffset:], uint64(h.BaseOffset))
	be.PutUint32(out[OffLength:], uint32(len(out)-LengthOverhead))
	be.PutUint32(out[OffLeaderEpoch:], uint32(h.PartitionLeaderEpoch))
	out[OffMagic] = Magic
	be.PutUint16(out[OffAttributes:], uint16(h.Attributes))
	be.PutUint32(out[OffLastOffsetDelta:], uint32(h.LastOffsetDelta))
	be.PutUint64(out[OffBaseTimestamp:], uint64(h.BaseTimestamp))
	be.PutUint64(out[OffMaxTimestamp:], uint64(h.MaxTimestamp))
	be.PutUint64(out[OffProducerID:], uint64(h.ProducerID))
	be.PutUint16(out[OffProducerEpoch:], uint16(h.ProducerEpoch))
	be.PutUint32(out[OffBaseSequence:], uint32(h.BaseSequence))
	be.PutUint32(out[OffRecordCount:], uint32(h.NumRecords))
	be.PutUint32(out[OffCRC:], Checksum(out))
}

// bytesLen is the encoded length field of a nullable byte string.
func bytesLen(b []byte) int32 {
	if b == nil {
		return -1
	}
	return int32(len(b))
}

// recordBodySize is the size of a record after its length varint.
func recordBodySize(r *Record, delta int32, base int64) int {
	n := 1 + sizeVarlong(r.Timestamp-base) + sizeVarint(delta) +
		sizeVarint(bytesLen(r.Key)) + len(r.Key) +
		sizeVarint(bytesLen(r.Value)) + len(r.Value) +
		sizeVarint(int32(len(r.Headers)))
	for _, h := range r.Headers {
		n += sizeVarint(int32(len(h.Key))) + len(h.Key) + sizeVarint(bytesLen(h.Value)) + len(h.Value)
	}
	return n
}

func appendRecord(dst []byte, r *Record, delta int32, base int64) []byte {
	dst = appendVarint(dst, int32(recordBodySize(r, delta, base)))
	dst = append(dst, byte(r.Attributes))
	dst = appendVarlong(dst, r.Timestamp-base)
	dst = appendVarint(dst, delta)
	dst = appendVarint(dst, bytesLen(r.Key))
	dst = append(dst, r.Key...)
	dst = appendVarint(dst, bytesLen(r.Value))
	dst = append(dst, r.Value...)
	dst = appendVarint(dst, int32(len(r.Headers)))
	for _, h := range r.Headers {
		dst = appendVarint(dst, int32(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendVarint(dst, bytesLen(h.Value))
		dst = append(dst, h.Value...)
	}
	return dst
}
