package batch

import (
	"bufio"
	"errors"
	"io"
	"math"
	"sync"
)

// Streaming validation. gzip and lz4 records are checked as they come out
// of the decompressor, through a window of streamWindow bytes, so a batch
// that decompresses to hundreds of MiB (a decompression "bomb", or an
// honest batch of large records) costs that window and the decoder's own
// state, not its decompressed size. A record that fits the window is
// parsed in place by parseRecord, the rule every other path uses; a
// larger one field by field by parseBigRecord, which applies the same
// checks in the same order (FuzzStreamAgrees holds the two to that). Other
// codecs decode a block whole and are checked as before, within the
// large-decompression slots (memory.go).

// streamWindow is the most bytes of decompressed records held at once.
const streamWindow = 64 << 10

var windowPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, streamWindow) }}

// boundedReader passes a decompressor's output on, failing once more than
// limit bytes came out, and keeps the decompressor's first error.
type boundedReader struct {
	r     io.Reader
	n     int
	limit int
	codec Codec
	err   error // the first error, io.EOF at the end
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.r.Read(p)
	b.n += n
	if b.n > b.limit {
		b.err = tooLarge(b.codec, b.limit)
		return 0, b.err
	}
	if err != nil {
		if !errors.Is(err, io.EOF) {
			err = corruptf("%s records: %v", b.codec, err)
		}
		b.err = err
	}
	return n, err
}

// streamed reports whether ValidateRecords checks codec's records as a
// stream.
func streamed(c Codec) bool { return c == CodecGzip || c == CodecLZ4 }

// walkStream is walkAll over a gzip or lz4 records section src: every
// record checked with the strict rules, nothing after the last, at most
// MaxDecompressedBytes in all. It returns the largest record timestamp.
func walkStream(h *Header, src []byte) (int64, error) {
	c := h.Codec()
	var r io.Reader
	switch c {
	case CodecGzip:
		z := gzipReaders.Get().(*gzipReader)
		defer gzipReaders.Put(z)
		z.src.Reset(src)
		defer z.src.Reset(nil)
		if err := z.z.Reset(&z.src); err != nil {
			return -1, corruptf("gzip records: %v", err)
		}
		r = &z.z
	case CodecLZ4:
		z := lz4Readers.Get().(*lz4Reader)
		defer lz4Readers.Put(z)
		z.src.Reset(src)
		defer z.src.Reset(nil)
		z.z.Reset(&z.src)
		r = z.z
	default:
		return -1, corruptf("codec %s is not streamed", c)
	}
	br := &boundedReader{r: r, limit: MaxDecompressedBytes, codec: c}
	w := windowPool.Get().(*bufio.Reader)
	w.Reset(br)
	defer func() {
		w.Reset(nil)
		windowPool.Put(w)
	}()
	// short explains a stream that ended inside what it must hold.
	short := func(format string, args ...any) error {
		if br.err != nil && !errors.Is(br.err, io.EOF) {
			return br.err
		}
		return corruptf(format, args...)
	}
	maxDelta := int64(math.MinInt64)
	var rec rawRecord
	for i := int32(0); i < h.NumRecords; i++ {
		head, _ := w.Peek(5)
		if len(head) == 0 {
			return -1, short("recordCount %d but the batch holds %d records", h.NumRecords, i)
		}
		length, n := varint(head)
		if n == 0 {
			return -1, short("record %d: malformed length varint", i)
		}
		if length < minRecordSize-1 {
			return -1, corruptf("record %d: length %d outside [%d, ...]", i, length, minRecordSize-1)
		}
		size := n + int(length)
		if size <= streamWindow {
			b, _ := w.Peek(size)
			if len(b) < size {
				return -1, short("record %d: length %d outside [%d, %d]", i, length, minRecordSize-1, len(b)-n)
			}
			if _, err := parseRecord(b, i, &rec); err != nil {
				return -1, err
			}
			w.Discard(size)
		} else {
			w.Discard(n)
			if err := parseBigRecord(w, int(length), i, &rec, short); err != nil {
				return -1, err
			}
		}
		if rec.offDelta != i {
			return -1, corruptf("record %d: offset delta %d, want %d", i, rec.offDelta, i)
		}
		maxDelta = max(maxDelta, rec.tsDelta)
	}
	if b, _ := w.Peek(1); len(b) > 0 {
		return -1, corruptf("bytes after the last of %d records", h.NumRecords)
	}
	if br.err != nil && !errors.Is(br.err, io.EOF) {
		return -1, br.err // a bad checksum shows at the end
	}
	if h.NumRecords == 0 {
		return -1, nil
	}
	return h.BaseTimestamp + maxDelta, nil
}

// parseBigRecord checks a record of length bytes (its length varint
// already read) that does not fit the window, as parseRecord would: the
// same fields, bounds and order, skipping over keys, values and headers.
// It fills r's attributes, tsDelta, offDelta and numHeaders only.
func parseBigRecord(w *bufio.Reader, length int, idx int32, r *rawRecord, short func(string, ...any) error) error {
	rem := length
	// next peeks at most max bytes of the record for a varint.
	next := func(max int) []byte {
		b, _ := w.Peek(min(max, rem))
		return b
	}
	take := func(n int, what string) error {
		if d, _ := w.Discard(n); d < n {
			return short("record %d: %s cut short", idx, what)
		}
		rem -= n
		return nil
	}
	b := next(1)
	if len(b) < 1 {
		return short("record %d: cut short", idx)
	}
	r.attributes = int8(b[0])
	if err := take(1, "attributes"); err != nil {
		return err
	}
	var n int
	if r.tsDelta, n = varlong(next(10)); n == 0 {
		return short("record %d: malformed timestampDelta varlong", idx)
	}
	if err := take(n, "timestampDelta"); err != nil {
		return err
	}
	if r.offDelta, n = varint(next(5)); n == 0 {
		return short("record %d: malformed offsetDelta varint", idx)
	}
	if err := take(n, "offsetDelta"); err != nil {
		return err
	}
	for _, what := range [2]string{"key", "value"} {
		l, n := varint(next(5))
		if n == 0 {
			return short("record %d: malformed %s length varint", idx, what)
		}
		if err := take(n, what); err != nil {
			return err
		}
		if l == -1 {
			continue
		}
		if l < -1 || int64(l) > int64(rem) {
			return corruptf("record %d: %s length %d outside [-1, %d]", idx, what, l, rem)
		}
		if err := take(int(l), what); err != nil {
			return err
		}
	}
	if r.numHeaders, n = varint(next(5)); n == 0 {
		return short("record %d: malformed headerCount varint", idx)
	}
	if err := take(n, "headerCount"); err != nil {
		return err
	}
	if r.numHeaders < 0 || int(r.numHeaders) > rem/2 {
		return corruptf("record %d: headerCount %d with %d bytes left", idx, r.numHeaders, rem)
	}
	for h := int32(0); h < r.numHeaders; h++ {
		kl, n := varint(next(5))
		if n == 0 || kl < 0 || int64(kl) > int64(rem-n) {
			return short("record %d: header %d: bad key length", idx, h)
		}
		if err := take(n+int(kl), "header key"); err != nil {
			return err
		}
		vl, n := varint(next(5))
		if n == 0 || vl < -1 || int64(vl) > int64(rem-n) {
			return short("record %d: header %d: bad value length", idx, h)
		}
		if err := take(n+max(int(vl), 0), "header value"); err != nil {
			return err
		}
	}
	if rem != 0 {
		return corruptf("record %d: %d bytes left over inside its length", idx, rem)
	}
	return nil
}
