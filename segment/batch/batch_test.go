package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func isCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

func TestHeaderOffsets(t *testing.T) {
	// Each offset follows the previous field, as in the package doc.
	fields := []struct{ off, size int }{
		{OffBaseOffset, 8}, {OffLength, 4}, {OffLeaderEpoch, 4}, {OffMagic, 1}, {OffCRC, 4},
		{OffAttributes, 2}, {OffLastOffsetDelta, 4}, {OffBaseTimestamp, 8}, {OffMaxTimestamp, 8},
		{OffProducerID, 8}, {OffProducerEpoch, 2}, {OffBaseSequence, 4}, {OffRecordCount, 4},
	}
	at := 0
	for i, f := range fields {
		if f.off != at {
			t.Fatalf("field %d at %d, want %d", i, f.off, at)
		}
		at += f.size
	}
	if at != HeaderSize || minLength != 49 {
		t.Fatalf("header size %d, minLength %d", at, minLength)
	}
	for c, name := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		if Codec(c).String() != name {
			t.Errorf("Codec(%d) = %q", c, Codec(c).String())
		}
	}
}

func TestParseHeader(t *testing.T) {
	opts := BuildOptions{Codec: CodecLZ4, BaseOffset: 1 << 40, BaseTimestamp: 99, ProducerID: 7, ProducerEpoch: 2,
		BaseSequence: 11, Transactional: true, LogAppendTime: true, LeaderEpoch: 5}
	b := Build(opts, sampleRecords(1000))
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Header{BaseOffset: 1 << 40, Length: int32(len(b) - 12), PartitionLeaderEpoch: 5, Magic: 2, CRC: Checksum(b),
		Attributes: int16(CodecLZ4) | TimestampTypeBit | TransactionalBit, LastOffsetDelta: 5, BaseTimestamp: 99,
		MaxTimestamp: 1000 + 1<<40, ProducerID: 7, ProducerEpoch: 2, BaseSequence: 11, NumRecords: 6}
	if h != want {
		t.Fatalf("got  %+v\nwant %+v", h, want)
	}
	if h.Size() != len(b) || h.LastOffset() != 1<<40+5 || h.NextOffset() != 1<<40+6 || h.Codec() != CodecLZ4 ||
		!h.LogAppendTime() || !h.Transactional() || h.Control() {
		t.Fatalf("accessors of %+v", h)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseHeader(b) }); n != 0 {
		t.Fatalf("ParseHeader allocates %v", n)
	}
	if _, err := ParseHeader(b[:HeaderSize-1]); !isCorrupt(err) {
		t.Fatalf("short header: %v", err)
	}
	b[OffMagic] = 1
	if _, err := ParseHeader(b); !isCorrupt(err) {
		t.Fatalf("magic 1: %v", err)
	}
}

func TestCodecRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sets := map[string][]Record{
		"sample": sampleRecords(1_700_000_000_000),
		"empty":  nil,
		"large":  randomRecords(rng, 300, 1024, 5), // several snappy and lz4 blocks
	}
	for _, c := range allCodecs {
		for name, recs := range sets {
			opts := NewBuildOptions()
			opts.Codec, opts.BaseOffset = c, 42
			b := Build(opts, recs)
			h, err := Validate(b)
			if err != nil {
				t.Fatalf("%s/%s: %v", c, name, err)
			}
			if h.Codec() != c || h.NumRecords != int32(len(recs)) {
				t.Fatalf("%s/%s: header %+v", c, name, h)
			}
			h, got, err := Records(b)
			if err != nil {
				t.Fatalf("%s/%s: %v", c, name, err)
			}
			equalRecords(t, h, got, recs)
			// The records must not alias b.
			clear(b)
			equalRecords(t, h, got, recs)

			b = Build(opts, recs)
			i := 0
			if _, err := Iterate(b, func(r *Record) error {
				hh := h
				hh.BaseOffset = r.Offset
				equalRecords(t, hh, []Record{{Offset: r.Offset, Timestamp: r.Timestamp, Attributes: r.Attributes,
					Key: r.Key, Value: r.Value, Headers: r.Headers}}, []Record{recs[i]})
				if r.Offset != 42+int64(i) {
					t.Fatalf("offset %d at %d", r.Offset, i)
				}
				i++
				return nil
			}); err != nil || i != len(recs) {
				t.Fatalf("%s/%s: Iterate saw %d: %v", c, name, i, err)
			}
		}
	}
}

func TestIterateStops(t *testing.T) {
	stop := errors.New("stop")
	b := Build(NewBuildOptions(), sampleRecords(10))
	n := 0
	_, err := Iterate(b, func(r *Record) error {
		if n++; n == 2 {
			return stop
		}
		return nil
	})
	if err != stop || n != 2 {
		t.Fatalf("err %v after %d", err, n)
	}
}

func TestDecompressErrors(t *testing.T) {
	if _, err := Decompress(Codec(5), []byte{1}); !errors.Is(err, ErrUnsupportedCodec) || isCorrupt(err) {
		t.Fatalf("codec 5: %v", err)
	}
	if _, err := Compress(Codec(7), []byte{1}); !errors.Is(err, ErrUnsupportedCodec) {
		t.Fatalf("codec 7: %v", err)
	}
	garbage := []byte("definitely not compressed data, not at all")
	for _, c := range allCodecs[1:] {
		if _, err := Decompress(c, garbage); !isCorrupt(err) {
			t.Errorf("%s garbage: %v", c, err)
		}
		good, _ := Compress(c, bytes.Repeat([]byte("x"), 1000))
		if _, err := Decompress(c, good[:len(good)-2]); !isCorrupt(err) {
			t.Errorf("%s truncated: %v", c, err)
		}
	}
}

// TestDecompressionBomb shrinks the limit so that a well-formed batch
// decompresses past it.
func TestDecompressionBomb(t *testing.T) {
	defer func(old int) { MaxDecompressedBytes = old }(MaxDecompressedBytes)
	recs := []Record{{Value: make([]byte, 1<<20)}}
	for _, c := range allCodecs[1:] {
		opts := NewBuildOptions()
		opts.Codec = c
		b := Build(opts, recs)
		MaxDecompressedBytes = 256 << 20
		if _, err := Validate(b); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		MaxDecompressedBytes = 64 << 10
		if len(b) > MaxDecompressedBytes {
			t.Fatalf("%s: %d bytes is no bomb", c, len(b))
		}
		if _, err := Validate(b); !isCorrupt(err) {
			t.Errorf("%s: Validate: %v", c, err)
		}
		if _, _, err := Records(b); !isCorrupt(err) {
			t.Errorf("%s: Records: %v", c, err)
		}
		if _, err := Decompress(c, b[HeaderSize:]); !isCorrupt(err) {
			t.Errorf("%s: Decompress: %v", c, err)
		}
	}
}

func TestSetters(t *testing.T) {
	for _, c := range allCodecs {
		opts := NewBuildOptions()
		opts.Codec = c
		recs := sampleRecords(1000)
		b := Build(opts, recs)

		SetBaseOffset(b, 5000)
		SetPartitionLeaderEpoch(b, 17)
		if !CRCValid(b) {
			t.Fatalf("%s: offset and epoch must not need a new CRC", c)
		}
		SetLogAppendTime(b, 123456)
		if !CRCValid(b) {
			t.Fatalf("%s: SetLogAppendTime left a bad CRC", c)
		}
		h, got, err := Records(b)
		if err != nil {
			t.Fatal(err)
		}
		if h.BaseOffset != 5000 || h.PartitionLeaderEpoch != 17 || !h.LogAppendTime() || h.MaxTimestamp != 123456 || h.Codec() != c {
			t.Fatalf("%s: header %+v", c, h)
		}
		for i, r := range got {
			if r.Timestamp != 123456 || r.Offset != 5000+int64(i) {
				t.Fatalf("%s: record %d ts %d offset %d", c, i, r.Timestamp, r.Offset)
			}
		}
		if _, err := Validate(b); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("SetBaseOffset on a short slice did not panic")
		}
	}()
	SetBaseOffset(make([]byte, 10), 1)
}

func TestValidateRejects(t *testing.T) {
	good := Build(NewBuildOptions(), sampleRecords(1_700_000_000_000))
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	put32 := func(off int, v int32) func([]byte) []byte {
		return func(b []byte) []byte { binary.BigEndian.PutUint32(b[off:], uint32(v)); return fixup(b) }
	}
	one := rawRecords(0)
	cases := []struct {
		name   string
		want   string // a substring of the reason
		b      []byte
		header bool // ValidateHeader must reject it too
		codec  bool // the error also wraps ErrUnsupportedCodec
	}{
		{name: "empty input", want: "header needs 61 bytes", b: nil, header: true},
		{name: "short header", want: "header needs 61 bytes", b: good[:HeaderSize-1], header: true},
		{name: "wrong magic", want: "magic 1", b: mut(func(b []byte) []byte { b[OffMagic] = 1; return b }), header: true},
		{name: "bad crc", want: "crc ", b: mut(func(b []byte) []byte { b[len(b)-5] ^= 1; return b }), header: true},
		{name: "truncated", want: "means", b: good[:len(good)-1], header: true},
		{name: "extra byte", want: "means", b: append(bytes.Clone(good), 0), header: true},
		{name: "length too large", want: "means", b: mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[OffLength:], uint32(len(b))); return b }), header: true},
		{name: "length negative", want: "below the minimum", b: mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[OffLength:], 0xfffffff0); return b }), header: true},
		{name: "length below minimum", want: "below the minimum", b: mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[OffLength:], 10); return b }), header: true},
		{name: "unknown codec", want: "codec 5", b: mut(func(b []byte) []byte { b[OffAttributes+1] |= 5; return fixup(b) }), header: true, codec: true},
		{name: "negative record count", want: "recordCount -1", b: mut(put32(OffRecordCount, -1)), header: true},
		{name: "count beyond lastOffsetDelta", want: "with lastOffsetDelta", b: mut(put32(OffRecordCount, 7)), header: true},
		{name: "lastOffsetDelta below -1", want: "with lastOffsetDelta -2", b: assemble(CodecNone, 0, -2, nil), header: true},
		{name: "lastOffsetDelta mismatch", want: "want recordCount-1", b: mut(put32(OffLastOffsetDelta, 9))},
		{name: "record count too high", want: "holds 2 records", b: assemble(CodecNone, 3, 2, rawRecords(0, 1))},
		{name: "record count too low", want: "after the last of 1 records", b: assemble(CodecNone, 1, 0, rawRecords(0, 1))},
		{name: "count cannot fit", want: "cannot fit", b: assemble(CodecNone, 1000, 999, rawRecords(0, 1))},
		{name: "offset deltas out of order", want: "record 1: offset delta 2, want 1", b: assemble(CodecNone, 3, 2, rawRecords(0, 2, 1))},
		{name: "offset deltas not from zero", want: "record 0: offset delta 1, want 0", b: assemble(CodecNone, 2, 1, rawRecords(1, 2))},
		{name: "offset delta repeated", want: "record 1: offset delta 0, want 1", b: assemble(CodecNone, 2, 1, rawRecords(0, 0))},
		{name: "trailing garbage", want: "2 bytes after the last", b: assemble(CodecNone, 1, 0, append(bytes.Clone(one), 0, 0))},
		{name: "garbage length varint", want: "malformed length varint", b: assemble(CodecNone, 1, 0, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})},
		{name: "negative record length", want: "length -7", b: assemble(CodecNone, 1, 0, append(varintBytes(-7), 0, 0, 0, 0, 0, 0, 0))},
		{name: "record length past end", want: "length 50", b: assemble(CodecNone, 1, 0, rawRecordBytes(50, 0, 0, 0, 1, 1, 0))},
		{name: "garbage timestamp varlong", want: "malformed timestampDelta", b: assemble(CodecNone, 1, 0, rawRecordBytes(-1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff))},
		{name: "garbage offset varint", want: "malformed offsetDelta", b: assemble(CodecNone, 1, 0, rawRecordBytes(-1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0))},
		{name: "garbage key varint", want: "malformed key length", b: assemble(CodecNone, 1, 0, rawRecordBytes(-1, 0, 0, 0, 0x80, 0x80, 0x80))},
		{name: "key length -2", want: "key length -2", b: assemble(CodecNone, 1, 0, rawRecordBytes(-1, append([]byte{0, 0, 0}, varintBytes(-2, -1, 0)...)...))},
		{name: "key past record", want: "key length 9", b: assemble(CodecNone, 1, 0, rawRecordBytes(-1, append([]byte{0, 0, 0}, varintBytes(9, 1, 0)...)...))},
		{name: "value length -5", want: "value length -5", b: assemble(CodecNone, 1, 0, rawRecordBytes(-1, append([]byte{0, 0, 0}, varintBytes(-1, -5, 0)...)...))},
		{name: "negative header count", want: "headerCount -1", b: assemble(CodecNone, 1, 0, rawRecordBytes(-1, append([]byte{0, 0, 0}, varintBytes(-1, -1, -1)...)...))},
		{name: "header count too large", want: "headerCount 1073741824", b: assemble(CodecNone, 1, 0, rawRecordBytes(-1, append([]byte{0, 0, 0}, varintBytes(-1, -1, 1<<30)...)...))},
		{name: "null header key", want: "bad key length", b: assemble(CodecNone, 1, 0, rawRecordBytes(-1, append([]byte{0, 0, 0}, varintBytes(-1, -1, 1, -1, 0)...)...))},
		{name: "header value -2", want: "bad value length", b: assemble(CodecNone, 1, 0, rawRecordBytes(-1, append([]byte{0, 0, 0}, varintBytes(-1, -1, 1, 0, -2)...)...))},
		{name: "header value past record", want: "bad value length", b: assemble(CodecNone, 1, 0, rawRecordBytes(-1, append([]byte{0, 0, 0}, varintBytes(-1, -1, 1, 0, 4, 0)...)...))},
		{name: "bytes left in record", want: "1 bytes left over", b: assemble(CodecNone, 1, 0, rawRecordBytes(-1, append([]byte{0, 0, 0}, varintBytes(-1, -1, 0, 0)...)...))},
		{name: "record shorter than minimum", want: "length 5", b: assemble(CodecNone, 1, 0, append(rawRecordBytes(-1, 0, 0, 0, 1, 1), rawRecords(0)...))},
		{name: "compressed garbage", want: "gzip records", b: assemble(CodecGzip, 1, 0, []byte("garbage, not gzip at all"))},
		{name: "compressed count mismatch", want: "holds 2 records", b: assemble(CodecZstd, 3, 2, mustCompress(CodecZstd, rawRecords(0, 1)))},
		{name: "compressed deltas out of order", want: "offset delta 1, want 0", b: assemble(CodecLZ4, 2, 1, mustCompress(CodecLZ4, rawRecords(1, 0)))},
		{name: "compressed trailing bytes", want: "1 bytes after the last", b: assemble(CodecSnappy, 1, 0, mustCompress(CodecSnappy, append(rawRecords(0), 1)))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Validate(tc.b)
			if !isCorrupt(err) {
				t.Fatalf("Validate: %v, want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want reason %q", err, tc.want)
			}
			if tc.codec != errors.Is(err, ErrUnsupportedCodec) {
				t.Fatalf("Validate: %v, ErrUnsupportedCodec %v", err, tc.codec)
			}
			_, herr := ValidateHeader(tc.b)
			if tc.header != isCorrupt(herr) {
				t.Fatalf("ValidateHeader: %v, header case %v", herr, tc.header)
			}
		})
	}
}

func mustCompress(c Codec, src []byte) []byte {
	out, err := Compress(c, src)
	if err != nil {
		panic(err)
	}
	return out
}

// TestCompactedBatch: a cleaned batch keeps its original deltas with gaps
// (and may lose every record); ValidateHeader, Records and Iterate accept
// it, Validate does not.
func TestCompactedBatch(t *testing.T) {
	gappy := assemble(CodecNone, 3, 9, rawRecords(1, 4, 9))
	empty := assemble(CodecNone, 0, 9, nil)
	for name, b := range map[string][]byte{"gaps": gappy, "emptied": empty} {
		if _, err := ValidateHeader(b); err != nil {
			t.Fatalf("%s: ValidateHeader: %v", name, err)
		}
		if _, err := Validate(b); !isCorrupt(err) {
			t.Fatalf("%s: Validate: %v", name, err)
		}
	}
	_, recs, err := Records(gappy)
	if err != nil || len(recs) != 3 || recs[0].Offset != 1 || recs[1].Offset != 4 || recs[2].Offset != 9 {
		t.Fatalf("Records: %v %+v", err, recs)
	}
	if _, _, err := Records(assemble(CodecNone, 2, 9, rawRecords(4, 4))); !isCorrupt(err) {
		t.Fatalf("repeated delta: %v", err)
	}
	if _, _, err := Records(assemble(CodecNone, 2, 3, rawRecords(1, 4))); !isCorrupt(err) {
		t.Fatalf("delta past lastOffsetDelta: %v", err)
	}
	if h, recs, err := Records(empty); err != nil || len(recs) != 0 || h.NextOffset() != 10 {
		t.Fatalf("emptied: %v %d", err, len(recs))
	}
}

func TestValidateDoesNotAllocate(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	recs := randomRecords(rng, 16, 1024, 1)
	recs[3].Headers = []RecordHeader{{Key: "a", Value: []byte("b")}}
	b := Build(NewBuildOptions(), recs)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := Validate(b); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Validate allocates %v times per uncompressed batch", n)
	}
}
