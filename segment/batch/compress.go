package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// MaxDecompressedBytes bounds what one batch's records may decompress to,
// in bytes (default 256 MiB). Larger output is reported as corruption, so a
// small compressed "bomb" cannot exhaust memory. Set it before use; it is
// read without synchronisation.
var MaxDecompressedBytes = 256 << 20

// Decompress decompresses src, the records section of a batch compressed
// with codec, into a new slice. For CodecNone it returns src itself. Snappy
// input may be a raw snappy block or xerial-framed (as the Java client
// writes it); lz4 is the LZ4 frame format. Malformed input, and output over
// MaxDecompressedBytes, wrap ErrCorrupt; a codec outside 0-4 returns
// ErrUnsupportedCodec.
func Decompress(codec Codec, src []byte) ([]byte, error) {
	if codec == CodecNone {
		return src, nil
	}
	if !codec.valid() {
		return nil, fmt.Errorf("%w: %d", ErrUnsupportedCodec, codec)
	}
	var g grant
	out, err := decompress(nil, codec, src, MaxDecompressedBytes, &g)
	g.release() // the caller keeps out: the slot only paces decompressions
	return out, err
}

// Compress compresses src with codec into a new slice, the way Kafka's Java
// producer frames it: gzip, xerial-framed snappy in 32 KiB blocks, the LZ4
// frame format with 64 KiB independent blocks, or one zstd frame. For
// CodecNone it returns src itself; a codec outside 0-4 returns
// ErrUnsupportedCodec.
func Compress(codec Codec, src []byte) ([]byte, error) {
	switch codec {
	case CodecNone:
		return src, nil
	case CodecGzip:
		w := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(w)
		return compressStream(w, src)
	case CodecSnappy:
		return xerial.Encode(make([]byte, 0, 16+4+s2.MaxEncodedLen(len(src))), src), nil
	case CodecLZ4:
		w := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(w)
		return compressStream(w, src)
	case CodecZstd:
		enc := zstdEncoder()
		return enc.EncodeAll(src, make([]byte, 0, len(src)/2+64)), nil
	}
	return nil, fmt.Errorf("%w: %d", ErrUnsupportedCodec, codec)
}

// streamWriter is what gzip.Writer and lz4.Writer have in common.
type streamWriter interface {
	io.WriteCloser
	Reset(io.Writer)
}

func compressStream(w streamWriter, src []byte) ([]byte, error) {
	out := bytes.NewBuffer(make([]byte, 0, len(src)/2+64))
	w.Reset(out)
	_, err := w.Write(src)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	w.Reset(nil) // do not keep out alive in the pool
	if err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

var (
	gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
	lz4Writers  = sync.Pool{New: func() any {
		w := lz4.NewWriter(nil)
		if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
			panic(fmt.Sprintf("batch: lz4 writer options: %v", err))
		}
		return w
	}}
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		// EncodeAll may be called concurrently on one Encoder. Zero
		// frames keep an empty input a valid frame.
		enc, err := zstd.NewWriter(nil, zstd.WithZeroFrames(true))
		if err != nil {
			panic(fmt.Sprintf("batch: zstd encoder: %v", err))
		}
		return enc
	})
)

// decompress appends the decompression of src to dst[:0], rejecting output
// over limit bytes. Output growing past smallDecompressed takes a large
// slot into g first (memory.go); the caller releases g once done with the
// output. Errors wrap ErrCorrupt.
func decompress(dst []byte, codec Codec, src []byte, limit int, g *grant) ([]byte, error) {
	dst = dst[:0]
	switch codec {
	case CodecGzip:
		return gunzip(dst, src, limit, g)
	case CodecSnappy:
		return unsnappy(dst, src, limit, g)
	case CodecLZ4:
		return unlz4(dst, src, limit, g)
	case CodecZstd:
		return unzstd(dst, src, limit, g)
	}
	return nil, fmt.Errorf("%w: %w: codec %d", ErrCorrupt, ErrUnsupportedCodec, codec)
}

func tooLarge(codec Codec, limit int) error {
	return corruptf("%s records decompress to more than %d bytes", codec, limit)
}

// Stream decoders are pooled with the bytes.Reader they read from, so a
// decompression allocates neither.
type gzipReader struct {
	z   gzip.Reader
	src bytes.Reader
}

type lz4Reader struct {
	z   *lz4.Reader
	src bytes.Reader
}

var (
	gzipReaders = sync.Pool{New: func() any { return new(gzipReader) }}
	lz4Readers  = sync.Pool{New: func() any { return &lz4Reader{z: lz4.NewReader(nil)} }}
)

func gunzip(dst, src []byte, limit int, g *grant) ([]byte, error) {
	r := gzipReaders.Get().(*gzipReader)
	defer gzipReaders.Put(r)
	r.src.Reset(src)
	if err := r.z.Reset(&r.src); err != nil {
		return nil, corruptf("gzip records: %v", err)
	}
	out, err := readBounded(dst, &r.z, CodecGzip, limit, g)
	r.src.Reset(nil)
	return out, err
}

func unlz4(dst, src []byte, limit int, g *grant) ([]byte, error) {
	r := lz4Readers.Get().(*lz4Reader)
	defer lz4Readers.Put(r)
	r.src.Reset(src)
	r.z.Reset(&r.src)
	out, err := readBounded(dst, r.z, CodecLZ4, limit, g)
	r.src.Reset(nil)
	return out, err
}

// readBounded appends everything r yields to dst, failing once more than
// limit bytes came out.
func readBounded(dst []byte, r io.Reader, codec Codec, limit int, g *grant) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			if len(dst) > limit {
				return nil, tooLarge(codec, limit)
			}
			// Grow geometrically, but never past limit+1: one byte
			// over is enough to know the limit was passed. Growing
			// past smallDecompressed takes a large slot first.
			n := min(max(len(dst), 16<<10), limit+1-len(dst))
			if len(dst)+n > smallDecompressed {
				g.need()
			}
			dst = slices.Grow(dst, n)
			g.grew(cap(dst))
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst) > limit {
			return nil, tooLarge(codec, limit)
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return nil, corruptf("%s records: %v", codec, err)
		}
	}
}

// xerialMagic starts the xerial snappy framing the Java client writes: this
// magic, an int32 version and an int32 minimum compatible version, then
// blocks of a big-endian int32 length and a raw snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

func unsnappy(dst, src []byte, limit int, g *grant) ([]byte, error) {
	if len(src) >= xerialHeaderSize && bytes.Equal(src[:len(xerialMagic)], xerialMagic) {
		return unxerial(dst, src[xerialHeaderSize:], limit, g)
	}
	return appendSnappyBlock(dst, src, limit, g)
}

// appendSnappyBlock decodes one raw snappy block onto dst, checking its
// declared length against the limit before allocating.
func appendSnappyBlock(dst, block []byte, limit int, g *grant) ([]byte, error) {
	l, err := s2.DecodedLen(block)
	if err != nil {
		return nil, corruptf("snappy: %v", err)
	}
	if l > limit-len(dst) {
		return nil, tooLarge(CodecSnappy, limit)
	}
	if len(dst)+l > smallDecompressed {
		g.need()
	}
	dst = slices.Grow(dst, l)
	g.grew(cap(dst))
	if _, err := s2.Decode(dst[len(dst):len(dst)+l], block); err != nil {
		return nil, corruptf("snappy: %v", err)
	}
	return dst[:len(dst)+l], nil
}

func unxerial(dst, src []byte, limit int, g *grant) ([]byte, error) {
	// Sum the blocks' declared lengths first, so that dst grows once and
	// a bomb is refused before anything is allocated.
	total := 0
	for rem := src; len(rem) > 0; {
		if len(rem) < 4 {
			return nil, corruptf("snappy: truncated xerial block length")
		}
		size := binary.BigEndian.Uint32(rem)
		rem = rem[4:]
		if uint64(size) > uint64(len(rem)) {
			return nil, corruptf("snappy: xerial block of %d bytes, %d left", size, len(rem))
		}
		l, err := s2.DecodedLen(rem[:size])
		if err != nil {
			return nil, corruptf("snappy: xerial block: %v", err)
		}
		if total += l; total > limit {
			return nil, tooLarge(CodecSnappy, limit)
		}
		rem = rem[size:]
	}
	if total > smallDecompressed {
		g.need()
	}
	dst = slices.Grow(dst, total)
	g.grew(cap(dst))
	for len(src) > 0 {
		size := binary.BigEndian.Uint32(src)
		var err error
		if dst, err = appendSnappyBlock(dst, src[4:4+size], limit, g); err != nil {
			return nil, err
		}
		src = src[4+size:]
	}
	return dst, nil
}

// zstdDec is a shared zstd decoder made for one limit; DecodeAll may be
// called concurrently on it. It is remade if its limit changes.
type zstdDec struct {
	limit int
	d     *zstd.Decoder
}

// zstdSmall decodes output up to smallDecompressed, zstdLarge up to
// MaxDecompressedBytes.
var zstdSmall, zstdLarge atomic.Pointer[zstdDec]

func zstdDecoderFor(p *atomic.Pointer[zstdDec], limit int) (*zstd.Decoder, error) {
	zd := p.Load()
	if zd == nil || zd.limit != limit {
		// A Decoder that only serves DecodeAll holds no goroutines, so a
		// replaced one needs no Close.
		d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(uint64(max(limit, 1))))
		if err != nil {
			return nil, fmt.Errorf("batch: zstd decoder: %w", err)
		}
		zd = &zstdDec{limit: limit, d: d}
		p.Store(zd)
	}
	return zd.d, nil
}

// unzstd decodes with the small decoder first; output too large for it
// takes a large slot and is decoded again with the full limit (zstd
// decodes a frame whole, so its growth cannot be paced).
func unzstd(dst, src []byte, limit int, g *grant) ([]byte, error) {
	if limit > smallDecompressed {
		d, err := zstdDecoderFor(&zstdSmall, smallDecompressed)
		if err != nil {
			return nil, err
		}
		out, err := d.DecodeAll(src, dst)
		if err == nil && len(out) <= smallDecompressed {
			return out, nil
		}
		if !errors.Is(err, zstd.ErrDecoderSizeExceeded) && !errors.Is(err, zstd.ErrWindowSizeExceeded) && err != nil {
			return nil, corruptf("zstd records: %v", err)
		}
		g.need()
		g.grew(limit) // DecodeAll's growth is not seen: assume the most
	}
	d, err := zstdDecoderFor(&zstdLarge, limit)
	if err != nil {
		return nil, err
	}
	out, err := d.DecodeAll(src, dst[:0])
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) || len(out) > limit {
		return nil, tooLarge(CodecZstd, limit)
	}
	if err != nil {
		return nil, corruptf("zstd records: %v", err)
	}
	return out, nil
}
