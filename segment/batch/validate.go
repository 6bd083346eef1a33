package batch

import (
	"fmt"
	"sync"
)

// ValidateHeader checks b, which must be exactly one whole batch, as far as
// its header and CRC go: the magic byte, batchLength (at least 49, and
// len(b) == batchLength+12), the CRC-32C, a known codec, recordCount >= 0,
// lastOffsetDelta >= -1 and recordCount <= lastOffsetDelta+1; for an
// internal batch (InternalBit), no codec, recordCount 1 and
// lastOffsetDelta -1 instead. It does not
// look at the records, so it accepts replicated or compacted batches whose
// offset deltas have gaps. Errors wrap ErrCorrupt (and ErrUnsupportedCodec
// for codec bits 5-7). The Header is returned whenever it could be parsed.
func ValidateHeader(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.Length < minLength {
		return h, corruptf("batchLength %d below the minimum %d", h.Length, minLength)
	}
	if h.Size() != len(b) {
		return h, corruptf("batchLength %d means %d bytes, have %d", h.Length, h.Size(), len(b))
	}
	if crc := Checksum(b); crc != h.CRC {
		return h, corruptf("crc %#08x, computed %#08x", h.CRC, crc)
	}
	if c := h.Codec(); !c.valid() {
		return h, fmt.Errorf("%w: %w: codec %d", ErrCorrupt, ErrUnsupportedCodec, c)
	}
	if h.Attributes&InternalBit != 0 {
		if h.Attributes&ControlBit == 0 {
			return h, corruptf("attribute bit 7 (Sluice's internal batch) without the control bit")
		}
		return h, validateInternalHeader(&h)
	}
	if h.NumRecords < 0 {
		return h, corruptf("recordCount %d", h.NumRecords)
	}
	if h.LastOffsetDelta < -1 || int64(h.NumRecords) > int64(h.LastOffsetDelta)+1 {
		return h, corruptf("recordCount %d with lastOffsetDelta %d", h.NumRecords, h.LastOffsetDelta)
	}
	return h, nil
}

// Validate fully checks b, which must be exactly one whole batch, as a
// leader checks a producer's batch (Kafka's LogValidator): everything
// ValidateHeader checks, lastOffsetDelta == recordCount-1, and then every
// record, decompressing if needed: the count matches recordCount, each
// record is well formed (bounded varints, lengths -1 or >= 0, header keys
// not null) and its fields fill its length exactly, the records fill the
// section exactly, and the offset deltas are 0, 1, 2, ... in order. An
// empty batch (recordCount 0, lastOffsetDelta -1) passes; Kafka's produce
// path rejects those, which is the caller's policy to apply.
//
// It does not allocate for uncompressed batches; compressed ones decompress
// into a pooled buffer. Errors wrap ErrCorrupt. The Header is returned
// whenever it could be parsed.
func Validate(b []byte) (Header, error) {
	h, _, err := ValidateRecords(b)
	return h, err
}

// Validate and ValidateRecords refuse a batch with InternalBit set: that
// attribute is Sluice's, so a producer's batch carrying it is invalid.

// ValidateRecords is Validate that also returns the largest record
// timestamp (baseTimestamp plus each record's delta, in ms; -1 with no
// records), which the producer's maxTimestamp field should equal for a
// CreateTime batch (Kafka's LogValidator recomputes it: see
// SetMaxTimestamp).
func ValidateRecords(b []byte) (h Header, maxTs int64, err error) {
	h, err = ValidateHeader(b)
	if err != nil {
		return h, -1, err
	}
	if h.Attributes&InternalBit != 0 {
		// Bit 7 marks Sluice's own internal batches (raft entries): a
		// producer's batch never carries it.
		return h, -1, corruptf("attribute bit 7 is reserved for Sluice's internal batches")
	}
	if h.LastOffsetDelta != h.NumRecords-1 {
		return h, -1, corruptf("lastOffsetDelta %d, want recordCount-1 = %d", h.LastOffsetDelta, h.NumRecords-1)
	}
	if streamed(h.Codec()) {
		maxTs, err = walkStream(&h, b[HeaderSize:])
		return h, maxTs, err
	}
	data, buf, err := recordsOf(&h, b)
	if err != nil {
		return h, -1, err
	}
	maxTs, err = walkAll(&h, data)
	buf.put(data)
	return h, maxTs, err
}

// walkAll checks every record of data with the strict (producer) rules and
// returns the largest record timestamp (-1 with no records).
func walkAll(h *Header, data []byte) (int64, error) {
	w, err := newWalker(h, data, true)
	if err != nil {
		return -1, err
	}
	var r rawRecord
	maxDelta := int64(-1 << 63)
	for {
		ok, err := w.next(&r)
		if err != nil {
			return -1, err
		}
		if !ok {
			break
		}
		maxDelta = max(maxDelta, r.tsDelta)
	}
	if h.NumRecords == 0 {
		return -1, nil
	}
	return h.BaseTimestamp + maxDelta, nil
}

// Decompression buffers reused by Validate and Iterate. Buffers larger than
// maxPooledBuf are dropped rather than kept alive.
const maxPooledBuf = 4 << 20

var bufPool = sync.Pool{New: func() any { return new(pooledBuf) }}

// recordsOf returns the records section of b: a subslice of b when
// uncompressed (buf nil), or the decompressed bytes held in buf, which the
// caller hands back with buf.put once done with data (which also gives
// back the large-decompression slot it may hold, memory.go).
func recordsOf(h *Header, b []byte) (data []byte, buf *pooledBuf, err error) {
	c := h.Codec()
	if c == CodecNone {
		return b[HeaderSize:], nil, nil
	}
	buf = bufPool.Get().(*pooledBuf)
	data, err = decompress(buf.b[:0], c, b[HeaderSize:], MaxDecompressedBytes, &buf.g)
	if err != nil {
		buf.g.release()
		bufPool.Put(buf)
		return nil, nil, err
	}
	return data, buf, nil
}

// pooledBuf is a decompression buffer and the slot its contents hold.
type pooledBuf struct {
	b []byte
	g grant
}

// put hands buf back once data, its contents, is no longer used. A nil
// buf (uncompressed records) does nothing.
func (buf *pooledBuf) put(data []byte) {
	if buf == nil {
		return
	}
	buf.g.release()
	if cap(data) > maxPooledBuf {
		return
	}
	buf.b = data[:0]
	bufPool.Put(buf)
}
