package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"sort"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// Format of a segment's raft index file, <base>.raftindex (KindRaftIndex).
// Every integer is big-endian:
//
//	offset size field
//	------ ---- ----------------------------------------------------------
//	     0    4 magic     "SRIX" (0x53524958)
//	     4    1 version   1
//	     5    3 zero
//	     8    8 first     uint64: the raft index of the segment's first batch
//	                      (0: the segment is outside the raft log, see Clean)
//	    16    8 prevTerm  uint64: the term of entry first-1
//	    24    4 count     uint32: n, the number of positions
//	    28    4 crc       uint32: CRC-32C (Castagnoli) of bytes [0, 28) and [32, end)
//	    32  4*n positions one uint32 per batch of the .log, in file order
//	                      (dense: entry k is raft index first+k): bits 0-30
//	                      the batch's byte position in the .log (segments
//	                      stay below 2 GiB), bit 31 set for an internal batch
//
// The file is derived data, written whole (header and every position)
// when the segment is sealed by a roll and for the active segment at
// Close, and synced with the sealed segment; the active segment's is
// rebuilt at Open after an unclean shutdown (the .log is scanned then
// anyway). At Open it is checked: the length is 32 + 4n, magic, version
// and crc match (a torn or damaged file fails here), positions start at 0
// and strictly increase below the .log's size, and the last one names a
// batch (its header read) that ends exactly at the end of the .log with
// the same internal bit (a file from before the .log changed fails here). A missing,
// torn, short or inconsistent file is rebuilt by walking the .log's batch
// headers. first and prevTerm are advisory too: recovery derives each
// segment's first index from the one before (first + batch count) and the
// first raft segment's from log.checkpoint (raft-prev-index + 1), using the
// file's only when the checkpoint has no raft fields (a lost checkpoint).
// Logs written before raft indexes existed have no .raftindex files: they
// are built at Open, the first segment's first index being 1.
const (
	raftIndexMagic      = 0x53524958
	raftIndexVersion    = 1
	raftIndexHeaderSize = 32
	raftInternalFlag    = 1 << 31
	raftPosMask         = raftInternalFlag - 1
)

// raftIndexHeader is a .raftindex file's header.
type raftIndexHeader struct {
	first, prevTerm uint64
}

// encodeRaftIndex returns the whole file for the given header and positions.
func encodeRaftIndex(hdr raftIndexHeader, rpos []uint32) []byte {
	b := make([]byte, raftIndexHeaderSize+4*len(rpos))
	be := binary.BigEndian
	be.PutUint32(b[0:], raftIndexMagic)
	b[4] = raftIndexVersion
	be.PutUint64(b[8:], hdr.first)
	be.PutUint64(b[16:], hdr.prevTerm)
	be.PutUint32(b[24:], uint32(len(rpos)))
	for i, p := range rpos {
		be.PutUint32(b[raftIndexHeaderSize+4*i:], p)
	}
	be.PutUint32(b[28:], raftIndexCRC(b))
	return b
}

// raftIndexCRC is the crc field's value for the file b.
func raftIndexCRC(b []byte) uint32 {
	c := crc32.Update(0, crcTable, b[:28])
	return crc32.Update(c, crcTable, b[raftIndexHeaderSize:])
}

// decodeRaftIndex parses a .raftindex file's bytes; ok is false when the
// header is bad or the length torn.
func decodeRaftIndex(b []byte) (hdr raftIndexHeader, rpos []uint32, ok bool) {
	be := binary.BigEndian
	if len(b) < raftIndexHeaderSize || be.Uint32(b) != raftIndexMagic || b[4] != raftIndexVersion ||
		int64(len(b)) != raftIndexHeaderSize+4*int64(be.Uint32(b[24:])) || be.Uint32(b[28:]) != raftIndexCRC(b) {
		return hdr, nil, false
	}
	hdr = raftIndexHeader{first: be.Uint64(b[8:]), prevTerm: be.Uint64(b[16:])}
	n := (len(b) - raftIndexHeaderSize) / 4
	rpos = make([]uint32, n)
	for i := range rpos {
		rpos[i] = be.Uint32(b[raftIndexHeaderSize+4*i:])
	}
	return hdr, rpos, true
}

// readRaftIndexFile reads and checks s's .raftindex against its .log
// (format above); ok is false when it is missing or does not fit.
func (s *segment) readRaftIndexFile(fs vfs.FS) (hdr raftIndexHeader, rpos []uint32, ok bool, err error) {
	f, err := fs.Open(s.path(KindRaftIndex))
	if isNotExist(err) {
		return hdr, nil, false, nil
	} else if err != nil {
		return hdr, nil, false, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return hdr, nil, false, err
	}
	if size > raftIndexHeaderSize+4*(s.size/batch.HeaderSize+1) {
		return hdr, nil, false, nil // more batches than fit in the .log
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		return hdr, nil, false, err
	}
	hdr, rpos, ok = decodeRaftIndex(b)
	if !ok {
		return hdr, nil, false, nil
	}
	if len(rpos) == 0 {
		return hdr, rpos, s.size == 0, nil
	}
	if rpos[0]&raftPosMask != 0 {
		return hdr, nil, false, nil
	}
	for i := 1; i < len(rpos); i++ {
		if rpos[i]&raftPosMask <= rpos[i-1]&raftPosMask {
			return hdr, nil, false, nil
		}
	}
	last := rpos[len(rpos)-1]
	var buf [batch.HeaderSize]byte
	h, err := s.headerAt(int64(last&raftPosMask), &buf)
	if err != nil || int64(last&raftPosMask)+int64(h.Size()) != s.size || h.Internal() != (last&raftInternalFlag != 0) {
		return hdr, nil, false, nil
	}
	return hdr, rpos, true, nil
}

// walkPositions builds the position list of s by reading every batch
// header of its .log. On an error it returns the positions before it too.
func (s *segment) walkPositions() ([]uint32, error) {
	var buf [batch.HeaderSize]byte
	var rpos []uint32
	for pos := int64(0); pos < s.size; {
		h, err := s.headerAt(pos, &buf)
		if err != nil {
			return rpos, fmt.Errorf("segment: raft index of %s: %w", s.path(KindLog), err)
		}
		rpos = append(rpos, raftPosEntry(pos, h.Internal()))
		pos += int64(h.Size())
	}
	return rpos, nil
}

func raftPosEntry(pos int64, internal bool) uint32 {
	e := uint32(pos)
	if internal {
		e |= raftInternalFlag
	}
	return e
}

// setPositions installs rpos and derives the internal batches' positions.
func (s *segment) setPositions(rpos []uint32) {
	s.rpos = rpos
	s.internals = s.internals[:0]
	for _, p := range rpos {
		if p&raftInternalFlag != 0 {
			s.internals = append(s.internals, int64(p&raftPosMask))
		}
	}
}

// addPosition records a batch appended at pos.
func (s *segment) addPosition(pos int64, internal bool) {
	s.rpos = append(s.rpos, raftPosEntry(pos, internal))
	if internal {
		s.internals = append(s.internals, pos)
	}
}

// truncatePositions forgets the batches at or after pos.
func (s *segment) truncatePositions(pos int64) {
	k := sort.Search(len(s.rpos), func(i int) bool { return int64(s.rpos[i]&raftPosMask) >= pos })
	s.rpos = s.rpos[:k]
	j := sort.Search(len(s.internals), func(i int) bool { return s.internals[i] >= pos })
	s.internals = s.internals[:j]
}

// nextInternal returns the position of the first internal batch at or
// after pos, or the segment's size when there is none.
func (s *segment) nextInternal(pos int64) int64 {
	j := sort.Search(len(s.internals), func(i int) bool { return s.internals[i] >= pos })
	if j < len(s.internals) {
		return s.internals[j]
	}
	return s.size
}

// endsInternal reports whether the segment's last batch is internal. The
// log never rolls then (short of the 2 GiB position limit): a closed
// segment ends with a data batch, so that recovery, which checks that each
// segment's batches end at the next segment's base offset, also notices a
// lost tail of internal batches (they take no offset: losing them alone
// would leave the offsets whole and shift the raft indexes of every later
// segment). A segment of internal batches only never closes either, so no
// two segments share a base offset.
func (s *segment) endsInternal() bool {
	return len(s.rpos) > 0 && s.rpos[len(s.rpos)-1]&raftInternalFlag != 0
}

// count returns the number of batches (raft entries) in the segment.
func (s *segment) count() uint64 { return uint64(len(s.rpos)) }

// writeRaftIndex writes s's .raftindex whole (see the format above) and
// keeps the file open for the next sync (closeIndexFiles closes it).
func (s *segment) writeRaftIndex(fs vfs.FS) error {
	if s.rfile != nil {
		s.rfile.Close()
		s.rfile = nil
	}
	f, err := fs.Create(s.path(KindRaftIndex))
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(encodeRaftIndex(raftIndexHeader{first: s.rfirst, prevTerm: s.rprev}, s.rpos), 0); err != nil {
		f.Close()
		return err
	}
	s.rfile = f
	return nil
}

// closeRaftFile closes the .raftindex file once synced.
func (s *segment) closeRaftFile() error {
	if s.rfile == nil {
		return nil
	}
	err := s.rfile.Close()
	s.rfile = nil
	return err
}

// replacePrefix replaces s's .log, which readers hold, by a new file
// holding only its bytes before pos: the prefix is copied to
// <base>.log.trunc, synced, and renamed over the .log (the folder synced),
// and the new file becomes the pinned one. Readers keep the old file, so
// the byte ranges a ReadResult covers never change under it, while
// appends go to the new file. A crash before the rename leaves the old
// .log (recovery removes the .trunc file); after it, the prefix. The copy
// costs up to a segment's size, and happens only when a truncation finds
// readers on the segment it cuts (raft truncates only uncommitted
// entries, which consumers below the high watermark never read).
func (s *segment) replacePrefix(pos int64) error {
	fs := s.log.fs
	tmp := s.path(KindLog) + truncSuffix
	f, err := fs.Create(tmp)
	if err != nil {
		return err
	}
	buf := make([]byte, min(pos, 1<<20))
	for off := int64(0); off < pos; {
		n := min(int64(len(buf)), pos-off)
		if _, err := s.log.ReadAt(buf[:n], off); err != nil && err != io.EOF {
			f.Close()
			return err
		}
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			f.Close()
			return err
		}
		off += n
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := fs.Rename(tmp, s.path(KindLog)); err != nil {
		f.Close()
		return err
	}
	if err := fs.SyncDir(filepath.Dir(s.path(KindLog))); err != nil {
		f.Close()
		return err
	}
	s.log.replacePinned(f)
	return nil
}

// RaftIndexFile is a decoded .raftindex file (format above), for tools.
type RaftIndexFile struct {
	First    uint64  // raft index of the segment's first batch (0: outside the raft log)
	PrevTerm uint64  // term of entry First-1
	Pos      []int64 // each batch's position in the .log
	Internal []bool  // whether that batch is internal
}

// DecodeRaftIndexFile decodes a .raftindex file's bytes; ok is false when
// the header, length or crc do not check out.
func DecodeRaftIndexFile(b []byte) (f RaftIndexFile, ok bool) {
	hdr, rpos, ok := decodeRaftIndex(b)
	if !ok {
		return f, false
	}
	f.First, f.PrevTerm = hdr.first, hdr.prevTerm
	for _, p := range rpos {
		f.Pos = append(f.Pos, int64(p&raftPosMask))
		f.Internal = append(f.Internal, p&raftInternalFlag != 0)
	}
	return f, true
}
