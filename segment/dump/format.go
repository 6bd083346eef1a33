package dump

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sluicemq/sluice/segment/batch"
)

// timestampType is Kafka's name for a batch's timestamp type.
func timestampType(h *batch.Header) string {
	if h.LogAppendTime() {
		return "LogAppendTime"
	}
	return "CreateTime"
}

// addSequence is Kafka's DefaultRecordBatch.incrementSequence: sequences
// wrap from math.MaxInt32 to 0. A base of -1 (no sequence) stays -1.
func addSequence(base, delta int32) int32 {
	if base < 0 {
		return -1
	}
	if base > math.MaxInt32-delta {
		return delta - (math.MaxInt32 - base) - 1
	}
	return base + delta
}

func deleteHorizon(h *batch.Header) (int64, bool) {
	return h.BaseTimestamp, h.Attributes&batch.DeleteHorizonBit != 0
}

// Small JSON lines; "type" comes first in each.
type (
	jsonCheckpoint struct {
		Type           string `json:"type"`
		File           string `json:"file"`
		LogStartOffset int64  `json:"logStartOffset"`
		RecoveryPoint  int64  `json:"recoveryPoint"`
		CleanShutdown  bool   `json:"cleanShutdown"`
		// The raft fields (checkpoint version 3).
		RaftStartOffset *int64  `json:"raftStartOffset,omitempty"`
		RaftPrevIndex   *uint64 `json:"raftPrevIndex,omitempty"`
		RaftPrevTerm    *uint64 `json:"raftPrevTerm,omitempty"`
	}
	jsonSegment struct {
		Type       string `json:"type"`
		File       string `json:"file"`
		BaseOffset int64  `json:"baseOffset"`
		Size       int64  `json:"size"`
	}
	jsonOffsetEntry struct {
		Type     string `json:"type"`
		File     string `json:"file"`
		Entry    int    `json:"entry"`
		Offset   int64  `json:"offset"`
		Position uint32 `json:"position"`
	}
	jsonTimeEntry struct {
		Type      string `json:"type"`
		File      string `json:"file"`
		Entry     int    `json:"entry"`
		Timestamp int64  `json:"timestamp"`
		Offset    int64  `json:"offset"`
	}
	jsonVerified struct {
		Type     string `json:"type"`
		Batches  int64  `json:"batches"`
		Records  int64  `json:"records"`
		Segments int64  `json:"segments"`
	}
	// jsonVerifiedFile is the "verified" line of an index or checkpoint
	// given as PATH; Entries and CheckedAgainstLog are for indexes only.
	jsonVerifiedFile struct {
		Type              string `json:"type"`
		File              string `json:"file"`
		Kind              string `json:"kind"` // "offsetIndex", "timeIndex" or "checkpoint"
		Entries           *int   `json:"entries,omitempty"`
		CheckedAgainstLog *bool  `json:"checkedAgainstLog,omitempty"`
	}
)

// jsonBatch is a "batch" JSON line; field names are kafka-dump-log's.
type jsonBatch struct {
	Type                 string `json:"type"`
	File                 string `json:"file"`
	Position             int64  `json:"position"`
	BaseOffset           int64  `json:"baseOffset"`
	LastOffset           int64  `json:"lastOffset"`
	Count                int32  `json:"count"`
	BaseSequence         int32  `json:"baseSequence"`
	LastSequence         int32  `json:"lastSequence"`
	ProducerID           int64  `json:"producerId"`
	ProducerEpoch        int16  `json:"producerEpoch"`
	PartitionLeaderEpoch int32  `json:"partitionLeaderEpoch"`
	IsTransactional      bool   `json:"isTransactional"`
	IsControl            bool   `json:"isControl"`
	DeleteHorizonMs      *int64 `json:"deleteHorizonMs,omitempty"`
	TimestampType        string `json:"timestampType"`
	BaseTimestamp        int64  `json:"baseTimestamp"`
	MaxTimestamp         int64  `json:"maxTimestamp"`
	Size                 int    `json:"size"`
	Magic                int8   `json:"magic"`
	CompressCodec        string `json:"compresscodec"`
	CRC                  uint32 `json:"crc"`
	IsValid              bool   `json:"isvalid"`
	RaftIndex            uint64 `json:"raftIndex,omitempty"` // from the segment's .raftindex
}

// printBatch prints one batch line; valid is whether the header and CRC
// checked out.
func (d *dumper) printBatch(path string, pos int64, h *batch.Header, valid bool, raftIndex uint64) {
	lastSeq := addSequence(h.BaseSequence, h.LastOffsetDelta)
	if d.cfg.json {
		jb := jsonBatch{
			Type: "batch", File: path, Position: pos,
			BaseOffset: h.BaseOffset, LastOffset: h.LastOffset(), Count: h.NumRecords,
			BaseSequence: h.BaseSequence, LastSequence: lastSeq,
			ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, PartitionLeaderEpoch: h.PartitionLeaderEpoch,
			IsTransactional: h.Transactional(), IsControl: h.Control(),
			TimestampType: timestampType(h), BaseTimestamp: h.BaseTimestamp, MaxTimestamp: h.MaxTimestamp,
			Size: h.Size(), Magic: h.Magic, CompressCodec: h.Codec().String(), CRC: h.CRC, IsValid: valid, RaftIndex: raftIndex,
		}
		if dh, ok := deleteHorizon(h); ok {
			jb.DeleteHorizonMs = &dh
		}
		d.emit(&jb)
		return
	}
	w := d.out
	fmt.Fprintf(w, "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %t isControl: %t",
		h.BaseOffset, h.LastOffset(), h.NumRecords, h.BaseSequence, lastSeq, h.ProducerID, h.ProducerEpoch,
		h.PartitionLeaderEpoch, h.Transactional(), h.Control())
	if dh, ok := deleteHorizon(h); ok {
		fmt.Fprintf(w, " deleteHorizonMs: %d", dh)
	}
	fmt.Fprintf(w, " position: %d %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %t",
		pos, timestampType(h), h.MaxTimestamp, h.Size(), h.Magic, h.Codec(), h.CRC, valid)
	if raftIndex > 0 {
		fmt.Fprintf(w, " raftIndex: %d", raftIndex)
	}
	fmt.Fprintln(w)
}

// cut returns b cut to at most limit bytes (limit < 0: no limit), backing
// off to a UTF-8 rune start so valid text stays valid, and whether it cut.
func cut(b []byte, limit int) ([]byte, bool) {
	if limit < 0 || len(b) <= limit {
		return b, false
	}
	n := limit
	for back := 0; n > 0 && back < utf8.UTFMax-1 && !utf8.RuneStart(b[n]); back++ {
		n--
	}
	if !utf8.RuneStart(b[n]) {
		n = limit // not UTF-8 anyway
	}
	return b[:n], true
}

// quoteBytes renders a key, value or header value for text output: null,
// or the bytes Go-quoted, cut at limit with a note of the full size.
func quoteBytes(b []byte, limit int) string {
	if b == nil {
		return "null"
	}
	c, cutOff := cut(b, limit)
	s := strconv.Quote(string(c))
	if cutOff {
		s += fmt.Sprintf("...(%d bytes)", len(b))
	}
	return s
}

// jsonBytes renders bytes for JSON: nil for null, a string when the bytes
// (after cutting) are valid UTF-8, else base64 with encoding "base64".
func jsonBytes(b []byte, limit int) (s *string, encoding string, truncated bool) {
	if b == nil {
		return nil, "", false
	}
	c, truncated := cut(b, limit)
	var v string
	if utf8.Valid(c) {
		v = string(c)
	} else {
		v, encoding = base64.StdEncoding.EncodeToString(c), "base64"
	}
	return &v, encoding, truncated
}

func size(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}

// controlMarker decodes a control record (a transaction marker): key
// version int16 and type int16 (0 ABORT, 1 COMMIT); value version int16
// and coordinatorEpoch int32. ok is false when the key is too short.
func controlMarker(r *batch.Record) (marker string, coordinatorEpoch int32, ok bool) {
	if len(r.Key) < 4 {
		return "", 0, false
	}
	switch t := int16(binary.BigEndian.Uint16(r.Key[2:])); t {
	case 0:
		marker = "ABORT"
	case 1:
		marker = "COMMIT"
	default:
		marker = fmt.Sprintf("UNKNOWN(%d)", t)
	}
	coordinatorEpoch = -1
	if len(r.Value) >= 6 {
		coordinatorEpoch = int32(binary.BigEndian.Uint32(r.Value[2:]))
	}
	return marker, coordinatorEpoch, true
}

type jsonHeader struct {
	Key            string  `json:"key"`
	KeyEncoding    string  `json:"keyEncoding,omitempty"`
	Value          *string `json:"value"`
	ValueEncoding  string  `json:"valueEncoding,omitempty"`
	ValueTruncated bool    `json:"valueTruncated,omitempty"`
}

type jsonRecord struct {
	Type             string       `json:"type"`
	File             string       `json:"file"`
	BatchPosition    int64        `json:"batchPosition"`
	Offset           int64        `json:"offset"`
	Timestamp        int64        `json:"timestamp"`
	TimestampType    string       `json:"timestampType"`
	Sequence         int32        `json:"sequence"`
	KeySize          int          `json:"keySize"`
	ValueSize        int          `json:"valueSize"`
	Key              *string      `json:"key"`
	KeyEncoding      string       `json:"keyEncoding,omitempty"`
	KeyTruncated     bool         `json:"keyTruncated,omitempty"`
	Value            *string      `json:"value"`
	ValueEncoding    string       `json:"valueEncoding,omitempty"`
	ValueTruncated   bool         `json:"valueTruncated,omitempty"`
	Headers          []jsonHeader `json:"headers"`
	EndTxnMarker     string       `json:"endTxnMarker,omitempty"`
	CoordinatorEpoch *int32       `json:"coordinatorEpoch,omitempty"`
}

// printRecord prints one record of the batch at pos.
func (d *dumper) printRecord(path string, pos int64, h *batch.Header, r *batch.Record) {
	limit := d.cfg.maxValueBytes
	seq := addSequence(h.BaseSequence, int32(r.Offset-h.BaseOffset))
	marker, coordEpoch, isMarker := "", int32(0), false
	if h.Control() {
		marker, coordEpoch, isMarker = controlMarker(r)
	}
	if d.cfg.json {
		jr := jsonRecord{Type: "record", File: path, BatchPosition: pos, Offset: r.Offset, Timestamp: r.Timestamp,
			TimestampType: timestampType(h), Sequence: seq, KeySize: size(r.Key), ValueSize: size(r.Value),
			Headers: make([]jsonHeader, 0, len(r.Headers))}
		jr.Key, jr.KeyEncoding, jr.KeyTruncated = jsonBytes(r.Key, limit)
		jr.Value, jr.ValueEncoding, jr.ValueTruncated = jsonBytes(r.Value, limit)
		for _, hd := range r.Headers {
			jh := jsonHeader{Key: hd.Key}
			if !utf8.ValidString(hd.Key) {
				jh.Key, jh.KeyEncoding = base64.StdEncoding.EncodeToString([]byte(hd.Key)), "base64"
			}
			jh.Value, jh.ValueEncoding, jh.ValueTruncated = jsonBytes(hd.Value, limit)
			jr.Headers = append(jr.Headers, jh)
		}
		if isMarker {
			jr.EndTxnMarker, jr.CoordinatorEpoch = marker, &coordEpoch
		}
		d.emit(&jr)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| offset: %d %s: %d keySize: %d valueSize: %d sequence: %d headerKeys: [",
		r.Offset, timestampType(h), r.Timestamp, size(r.Key), size(r.Value), seq)
	for i, hd := range r.Headers {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(hd.Key)
	}
	b.WriteByte(']')
	if isMarker {
		fmt.Fprintf(&b, " endTxnMarker: %s coordinatorEpoch: %d", marker, coordEpoch)
	} else {
		fmt.Fprintf(&b, " key: %s payload: %s", quoteBytes(r.Key, limit), quoteBytes(r.Value, limit))
	}
	if len(r.Headers) > 0 {
		b.WriteString(" headers: [")
		for i, hd := range r.Headers {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Quote(hd.Key))
			b.WriteByte('=')
			b.WriteString(quoteBytes(hd.Value, limit))
		}
		b.WriteByte(']')
	}
	b.WriteByte('\n')
	d.out.WriteString(b.String())
}
