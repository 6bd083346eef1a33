package batch

import (
	"fmt"
	"math"
)

// HasDeleteHorizon reports whether DeleteHorizonBit is set: BaseTimestamp
// is then the compaction delete horizon in ms (KIP-534).
func (h Header) HasDeleteHorizon() bool { return h.Attributes&DeleteHorizonBit != 0 }

// Rebuild encodes recs, a subset of the records of the batch whose header
// is h, in offset order, as the log cleaner's replacement of that batch
// (Kafka's MemoryRecords.filterTo). The result keeps h's base offset,
// lastOffsetDelta (so the producer's last sequence stays right after the
// last record is removed), partitionLeaderEpoch, producer id, epoch and
// base sequence, and attribute bits; each record keeps its offset
// (offsetDelta = Offset - h.BaseOffset, so deltas may have gaps) and its
// absolute timestamp. The records are compressed again with h's codec (an
// empty header is left uncompressed); the
// length, record count and CRC are recomputed.
//
// deleteHorizon >= 0 sets DeleteHorizonBit and stores the horizon in
// baseTimestamp (record timestamp deltas are then relative to it, as in
// Kafka); -1 clears the bit. maxTimestamp is the largest record timestamp,
// except that a LogAppendTime batch and a batch left with no records (an
// empty header, which Kafka keeps for a producer's last batch) keep h's.
func Rebuild(h Header, recs []Record, deleteHorizon int64) ([]byte, error) {
	codec := h.Codec()
	if !codec.valid() {
		return nil, fmt.Errorf("%w: codec %d", ErrUnsupportedCodec, codec)
	}
	base := h.BaseTimestamp
	switch {
	case deleteHorizon >= 0:
		base = deleteHorizon
	case h.HasDeleteHorizon() && len(recs) > 0:
		base = recs[0].Timestamp
	case h.HasDeleteHorizon():
		base = h.MaxTimestamp
	}
	maxTs := h.MaxTimestamp
	if !h.LogAppendTime() && len(recs) > 0 {
		maxTs = math.MinInt64
		for i := range recs {
			maxTs = max(maxTs, recs[i].Timestamp)
		}
	}
	out := make([]byte, HeaderSize, HeaderSize+64*len(recs))
	for i := range recs {
		delta := recs[i].Offset - h.BaseOffset
		if delta < 0 || delta > int64(h.LastOffsetDelta) {
			return nil, fmt.Errorf("batch.Rebuild: record offset %d outside batch [%d, %d]", recs[i].Offset, h.BaseOffset, h.LastOffset())
		}
		out = appendRecord(out, &recs[i], int32(delta), base)
	}
	if codec != CodecNone && len(recs) > 0 {
		comp, err := Compress(codec, out[HeaderSize:])
		if err != nil {
			return nil, err
		}
		out = append(out[:HeaderSize], comp...)
	}
	if len(out)-LengthOverhead > math.MaxInt32 {
		return nil, fmt.Errorf("batch.Rebuild: %d bytes do not fit one batch", len(out))
	}
	attrs := uint16(h.Attributes) &^ DeleteHorizonBit
	if len(recs) == 0 {
		attrs &^= CompressionMask // an empty header has nothing to compress
	}
	if deleteHorizon >= 0 {
		attrs |= DeleteHorizonBit
	}
	nh := h
	nh.Attributes, nh.BaseTimestamp, nh.MaxTimestamp, nh.NumRecords = int16(attrs), base, maxTs, int32(len(recs))
	putHeader(out, &nh)
	return out, nil
}
