package batch

import "bytes"

// RecordHeader is one record header. Value nil means a null value, which is
// distinct from an empty one; keys are never null.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Record is one decoded record of a batch.
type Record struct {
	// Offset is absolute: the batch's BaseOffset plus the offset delta.
	// Build ignores it (the offset delta is the record's index).
	Offset int64
	// Timestamp is absolute, in ms since the Unix epoch: the batch's
	// BaseTimestamp plus the record's delta, or the batch's MaxTimestamp
	// when the batch is LogAppendTime (Kafka's DefaultRecord).
	Timestamp int64
	// Attributes is the record attributes byte, unused by Kafka (zero).
	Attributes int8
	// Key and Value are nil for null and non-nil empty for empty.
	Key, Value []byte
	Headers    []RecordHeader
}

// minRecordSize is the smallest encoded record: a one-byte length, the
// attributes byte and five one-byte varints (timestampDelta, offsetDelta,
// keyLength, valueLength, headerCount).
const minRecordSize = 7

// rawRecord is a record as it sits in the records section: slices alias the
// section, headers are left encoded.
type rawRecord struct {
	attributes int8
	tsDelta    int64
	offDelta   int32
	key, value []byte // nil: null
	numHeaders int32
	headers    []byte // numHeaders encoded headers
}

// parseRecord decodes the record at the start of data, the idx-th record of
// its batch, checking that every field is well formed and that the fields
// fill the record's length exactly. It returns the record's encoded size.
func parseRecord(data []byte, idx int32, r *rawRecord) (int, error) {
	length, n := varint(data)
	if n == 0 {
		return 0, corruptf("record %d: malformed length varint", idx)
	}
	if length < minRecordSize-1 || int64(length) > int64(len(data)-n) {
		return 0, corruptf("record %d: length %d outside [%d, %d]", idx, length, minRecordSize-1, len(data)-n)
	}
	end := n + int(length)
	body := data[n:end]
	r.attributes = int8(body[0])
	p := 1
	if r.tsDelta, n = varlong(body[p:]); n == 0 {
		return 0, corruptf("record %d: malformed timestampDelta varlong", idx)
	}
	p += n
	if r.offDelta, n = varint(body[p:]); n == 0 {
		return 0, corruptf("record %d: malformed offsetDelta varint", idx)
	}
	p += n
	var err error
	if r.key, p, err = readBytes(body, p, idx, "key"); err != nil {
		return 0, err
	}
	if r.value, p, err = readBytes(body, p, idx, "value"); err != nil {
		return 0, err
	}
	if r.numHeaders, n = varint(body[p:]); n == 0 {
		return 0, corruptf("record %d: malformed headerCount varint", idx)
	}
	p += n
	// A header takes at least two bytes: this bounds any allocation made
	// from numHeaders later.
	if r.numHeaders < 0 || int(r.numHeaders) > (len(body)-p)/2 {
		return 0, corruptf("record %d: headerCount %d with %d bytes left", idx, r.numHeaders, len(body)-p)
	}
	start := p
	for h := int32(0); h < r.numHeaders; h++ {
		kl, n := varint(body[p:])
		if n == 0 || kl < 0 || int64(kl) > int64(len(body)-p-n) {
			return 0, corruptf("record %d: header %d: bad key length", idx, h)
		}
		p += n + int(kl)
		vl, n := varint(body[p:])
		if n == 0 || vl < -1 || int64(vl) > int64(len(body)-p-n) {
			return 0, corruptf("record %d: header %d: bad value length", idx, h)
		}
		p += n + max(int(vl), 0)
	}
	r.headers = body[start:p:p]
	if p != len(body) {
		return 0, corruptf("record %d: %d bytes left over inside its length", idx, len(body)-p)
	}
	return end, nil
}

// readBytes reads a varint length and that many bytes at body[p:]: -1 is
// null (nil), other negatives are corrupt. The slice's capacity is capped
// so that appending to it never overwrites what follows.
func readBytes(body []byte, p int, idx int32, what string) ([]byte, int, error) {
	l, n := varint(body[p:])
	if n == 0 {
		return nil, 0, corruptf("record %d: malformed %s length varint", idx, what)
	}
	p += n
	switch {
	case l == -1:
		return nil, p, nil
	case l < -1 || int64(l) > int64(len(body)-p):
		return nil, 0, corruptf("record %d: %s length %d outside [-1, %d]", idx, what, l, len(body)-p)
	}
	e := p + int(l)
	return body[p:e:e], e, nil
}

// appendHeaders decodes n headers already checked by parseRecord.
func appendHeaders(dst []RecordHeader, raw []byte, n int32) []RecordHeader {
	for ; n > 0; n-- {
		kl, k := varint(raw)
		if k == 0 || kl < 0 || int(kl) > len(raw)-k {
			break // unreachable after parseRecord
		}
		key := string(raw[k : k+int(kl)])
		raw = raw[k+int(kl):]
		vl, k := varint(raw)
		if k == 0 || vl < -1 || int(vl) > len(raw)-k {
			break
		}
		var val []byte
		if vl >= 0 {
			val = raw[k : k+int(vl) : k+int(vl)]
		}
		raw = raw[k+max(int(vl), 0):]
		dst = append(dst, RecordHeader{Key: key, Value: val})
	}
	return dst
}

// walker steps through the records section of a batch whose header passed
// ValidateHeader, checking the record count, that the records fill the
// section exactly, and the offset deltas: with strict, 0, 1, 2, ... (a
// producer's batch); otherwise strictly increasing within
// [0, LastOffsetDelta] (a compacted batch may have gaps).
type walker struct {
	count     int32 // recordCount
	lastDelta int32 // lastOffsetDelta
	data      []byte
	pos       int
	i         int32
	prev      int32 // offset delta of the previous record, -1 before the first
	strict    bool
}

func newWalker(h *Header, data []byte, strict bool) (walker, error) {
	if int64(h.NumRecords) > int64(len(data)/minRecordSize) {
		return walker{}, corruptf("recordCount %d cannot fit in %d bytes of records", h.NumRecords, len(data))
	}
	return walker{count: h.NumRecords, lastDelta: h.LastOffsetDelta, data: data, prev: -1, strict: strict}, nil
}

// next decodes the next record into r. It returns false once recordCount
// records have been read and nothing is left.
func (w *walker) next(r *rawRecord) (bool, error) {
	if w.i == w.count {
		if w.pos != len(w.data) {
			return false, corruptf("%d bytes after the last of %d records", len(w.data)-w.pos, w.i)
		}
		return false, nil
	}
	if w.pos == len(w.data) {
		return false, corruptf("recordCount %d but the batch holds %d records", w.count, w.i)
	}
	n, err := parseRecord(w.data[w.pos:], w.i, r)
	if err != nil {
		return false, err
	}
	if w.strict {
		if r.offDelta != w.i {
			return false, corruptf("record %d: offset delta %d, want %d", w.i, r.offDelta, w.i)
		}
	} else if r.offDelta <= w.prev || r.offDelta > w.lastDelta {
		return false, corruptf("record %d: offset delta %d outside (%d, %d]", w.i, r.offDelta, w.prev, w.lastDelta)
	}
	w.prev = r.offDelta
	w.pos += n
	w.i++
	return true, nil
}

func (h *Header) timestamp(delta int64) int64 {
	if h.LogAppendTime() {
		return h.MaxTimestamp
	}
	return h.BaseTimestamp + delta
}

// Records decodes every record of b, exactly one whole batch, decompressing
// as needed. It checks what ValidateHeader checks, that every record is
// well formed, that the count matches recordCount and that offset deltas
// increase (gaps, as compaction leaves, are allowed). The records do not
// alias b.
func Records(b []byte) (Header, []Record, error) {
	h, err := ValidateHeader(b)
	if err != nil {
		return h, nil, err
	}
	var data []byte
	if c := h.Codec(); c == CodecNone {
		data = bytes.Clone(b[HeaderSize:])
	} else {
		var g grant
		data, err = decompress(nil, c, b[HeaderSize:], MaxDecompressedBytes, &g)
		g.release() // the records alias data: the slot only paces decompressions
		if err != nil {
			return h, nil, err
		}
	}
	w, err := newWalker(&h, data, false)
	if err != nil {
		return h, nil, err
	}
	recs := make([]Record, 0, h.NumRecords)
	var r rawRecord
	for {
		ok, err := w.next(&r)
		if err != nil {
			return h, nil, err
		}
		if !ok {
			return h, recs, nil
		}
		var hdrs []RecordHeader
		if r.numHeaders > 0 {
			hdrs = appendHeaders(make([]RecordHeader, 0, r.numHeaders), r.headers, r.numHeaders)
		}
		recs = append(recs, Record{
			Offset:     h.BaseOffset + int64(r.offDelta),
			Timestamp:  h.timestamp(r.tsDelta),
			Attributes: r.attributes,
			Key:        r.key,
			Value:      r.value,
			Headers:    hdrs,
		})
	}
}

// Iterate calls fn for each record of b, exactly one whole batch, in order,
// with the checks of Records; it stops at the first error, fn's included,
// and returns it. fn may be called for the records before a corrupt one.
// The Record and everything it points to (Key, Value, Headers and header
// values) may alias b or an internal buffer and is valid only during fn:
// copy what must be kept. It allocates per record only for header keys.
func Iterate(b []byte, fn func(r *Record) error) (Header, error) {
	h, err := ValidateHeader(b)
	if err != nil {
		return h, err
	}
	data, buf, err := recordsOf(&h, b)
	if err != nil {
		return h, err
	}
	defer buf.put(data)
	w, err := newWalker(&h, data, false)
	if err != nil {
		return h, err
	}
	var (
		r   rawRecord
		rec Record
	)
	for {
		ok, err := w.next(&r)
		if err != nil || !ok {
			return h, err
		}
		rec = Record{
			Offset:     h.BaseOffset + int64(r.offDelta),
			Timestamp:  h.timestamp(r.tsDelta),
			Attributes: r.attributes,
			Key:        r.key,
			Value:      r.value,
			Headers:    appendHeaders(rec.Headers[:0], r.headers, r.numHeaders),
		}
		if err := fn(&rec); err != nil {
			return h, err
		}
	}
}
