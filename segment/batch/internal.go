package batch

import (
	"encoding/binary"
	"fmt"
)

// Internal batches (Sluice's own, never served to clients). See the
// package doc's "Internal batches" section for the layout. These constants
// are part of the on-disk format.
const (
	// InternalBit is attribute bit 7, unused by Kafka: set (with
	// ControlBit) on a batch that holds one of raft's own entries and
	// takes no Kafka offset.
	InternalBit = 0x80
	// InternalKeyVersion is the version in an internal record's key.
	InternalKeyVersion = 0
	// internalKeySize is the internal record's key: version int16, kind
	// int16, term int64 (the partitionLeaderEpoch again, where the CRC
	// covers it).
	internalKeySize = 12
)

// Internal reports whether the batch is one of Sluice's internal batches
// (attribute bit 7 with the control bit): a raft entry that takes no Kafka
// offset and is never handed to a client.
func (h Header) Internal() bool {
	return h.Attributes&InternalBit != 0 && h.Attributes&ControlBit != 0
}

// BuildInternal returns an internal batch holding one raft entry of the
// given kind (a small number the caller defines: segment.EntryKind) and
// data (may be empty): base offset baseOffset, partitionLeaderEpoch term
// (also in the record key, so the CRC covers it; it must not be changed
// with SetPartitionLeaderEpoch),
// lastOffsetDelta -1 (so NextOffset() == baseOffset: zero offsets taken),
// timestamps -1, no producer, one uncompressed record, CRC set.
func BuildInternal(baseOffset int64, term int32, kind uint8, data []byte) []byte {
	key := make([]byte, internalKeySize)
	binary.BigEndian.PutUint16(key[0:], InternalKeyVersion)
	binary.BigEndian.PutUint16(key[2:], uint16(kind))
	binary.BigEndian.PutUint64(key[4:], uint64(int64(term)))
	if data == nil {
		data = []byte{}
	}
	r := Record{Key: key, Value: data}
	out := make([]byte, HeaderSize, HeaderSize+recordBodySize(&r, 0, -1)+5)
	out = appendRecord(out, &r, 0, -1)
	putHeader(out, &Header{
		BaseOffset: baseOffset, PartitionLeaderEpoch: term,
		Attributes:      ControlBit | InternalBit,
		LastOffsetDelta: -1, BaseTimestamp: -1, MaxTimestamp: -1,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, NumRecords: 1,
	})
	return out
}

// ParseInternal checks b, exactly one whole internal batch, and returns the
// entry kind and data it holds (data aliases b). The term in the record key
// must equal partitionLeaderEpoch (which the CRC does not cover): an
// internal batch's term is checked. Errors wrap ErrCorrupt.
func ParseInternal(b []byte) (h Header, kind uint8, data []byte, err error) {
	if h, err = ValidateHeader(b); err != nil {
		return h, 0, nil, err
	}
	if !h.Internal() {
		return h, 0, nil, corruptf("not an internal batch (attributes %#x)", h.Attributes)
	}
	var r rawRecord
	n, err := parseRecord(b[HeaderSize:], 0, &r)
	if err != nil {
		return h, 0, nil, err
	}
	if HeaderSize+n != len(b) {
		return h, 0, nil, corruptf("internal batch: %d bytes after its record", len(b)-HeaderSize-n)
	}
	if len(r.key) != internalKeySize || binary.BigEndian.Uint16(r.key) != InternalKeyVersion {
		return h, 0, nil, corruptf("internal batch: bad record key %x", r.key)
	}
	k := binary.BigEndian.Uint16(r.key[2:])
	if k > 0xff {
		return h, 0, nil, corruptf("internal batch: entry kind %d", k)
	}
	if term := int64(binary.BigEndian.Uint64(r.key[4:])); term != int64(h.PartitionLeaderEpoch) {
		return h, 0, nil, corruptf("internal batch: partitionLeaderEpoch %d, its record says term %d", h.PartitionLeaderEpoch, term)
	}
	return h, uint8(k), r.value, nil
}

// validateInternalHeader checks the header fields an internal batch must
// have (ValidateHeader's rules for it).
func validateInternalHeader(h *Header) error {
	if h.Codec() != CodecNone || h.NumRecords != 1 || h.LastOffsetDelta != -1 {
		return fmt.Errorf("%w: internal batch with codec %s, recordCount %d, lastOffsetDelta %d (want none, 1, -1)",
			ErrCorrupt, h.Codec(), h.NumRecords, h.LastOffsetDelta)
	}
	return nil
}
