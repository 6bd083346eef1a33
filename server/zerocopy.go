package server

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/sluicemq/sluice/segment"
)

// Zero-copy fetch responses. A fetch that can send log bytes with
// sendfile(2) puts a random 16-byte marker in each partition's records
// field instead of the bytes; the response is encoded by kmsg as usual,
// then written in pieces: the encoded bytes up to a marker's length
// prefix, a new length prefix, the partition's file ranges sent straight
// from the segment files, and so on. The records field is kmsg's "nullable
// bytes": an int32 length, or in flexible versions a uvarint of length+1.

const markerLen = 16

// splice is one partition's records to send from files. It holds the
// read's references on them (res) until releaseSplices, which whoever
// owns the splice calls once the response is written or dropped: the
// writer after writing it, serveFetch when it discards a pass, the reader
// when serving fails.
type splice struct {
	marker [markerLen]byte
	ranges []segment.FileRange
	size   int64
	res    segment.ReadResult
}

// releaseSplices drops the splices' references on their files.
func releaseSplices(splices []splice) {
	for i := range splices {
		splices[i].res.Release()
	}
}

// newSplice makes a splice of res; when it reports true the splice owns
// res's references, otherwise the caller still does.
func newSplice(res *segment.ReadResult) (splice, bool) {
	s := splice{ranges: res.Ranges, size: res.Bytes, res: *res}
	for _, r := range res.Ranges {
		if r.File.Fd() == ^uintptr(0) {
			return s, false // not backed by the OS: copy instead
		}
	}
	if _, err := rand.Read(s.marker[:]); err != nil {
		return s, false
	}
	return s, true
}

// lengthPrefix encodes a records length as kmsg does for this version.
func lengthPrefix(dst []byte, n int64, flexible bool) []byte {
	if flexible {
		return binary.AppendUvarint(dst, uint64(n+1))
	}
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}

// writeSpliced writes buf (a whole encoded response, size field first)
// with each splice's marker replaced by its file ranges.
func (cc *clientConn) writeSpliced(w *bufio.Writer, buf []byte, flexible bool, splices []splice) error {
	type piece struct {
		start, end int // the marker and its length prefix in buf
		s          *splice
	}
	pieces := make([]piece, 0, len(splices))
	pos := 8
	oldPrefix := lengthPrefix(nil, markerLen, flexible)
	total := int64(len(buf) - 4)
	for i := range splices {
		s := &splices[i]
		j := bytes.Index(buf[pos:], s.marker[:])
		if j < 0 {
			return fmt.Errorf("server: fetch response marker %d not found", i)
		}
		j += pos
		start := j - len(oldPrefix)
		if start < pos || !bytes.Equal(buf[start:j], oldPrefix) {
			return fmt.Errorf("server: fetch response marker %d has no length prefix", i)
		}
		pieces = append(pieces, piece{start: start, end: j + markerLen, s: s})
		total += int64(len(lengthPrefix(nil, s.size, flexible))) + s.size - int64(len(oldPrefix)+markerLen)
		pos = j + markerLen
	}
	if err := checkFrame(total, 1); err != nil {
		return err
	}
	binary.BigEndian.PutUint32(buf[:4], uint32(total))
	last := 0
	for _, p := range pieces {
		if _, err := w.Write(buf[last:p.start]); err != nil {
			return err
		}
		if _, err := w.Write(lengthPrefix(nil, p.s.size, flexible)); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		for _, r := range p.s.ranges {
			if err := sendRange(cc.conn, w, r); err != nil {
				return err
			}
		}
		last = p.end
	}
	if _, err := w.Write(buf[last:]); err != nil {
		return err
	}
	return w.Flush()
}

// copyRange writes a file range through w (the fallback).
func copyRange(w *bufio.Writer, r segment.FileRange) error {
	if _, err := io.Copy(w, io.NewSectionReader(r.File, r.Position, r.Size)); err != nil {
		return err
	}
	return w.Flush()
}
