package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"path/filepath"
	"strings"

	"github.com/sluicemq/sluice/segment/vfs"
)

// Raft snapshots of a compacted log. The cleaner takes the segments it
// cleans out of the raft log (see raft.go), so a follower whose next raft
// index is below FirstIndex needs those segments themselves: the leader
// lists them (SnapshotFiles: base offset, size and CRC-32C of each .log
// below the raft start), serves their bytes (OpenSnapshotFile, holding a
// file reference so neither retention nor the cleaner closes the file
// mid-transfer), and the follower stages each one in its partition folder
// as StagedSnapshotPath (a ".install" name recovery never takes for a
// segment), synced, then installs them all at once with InstallSnapshot:
// the staged files become the log below the raft start, every old segment
// goes, and the raft log restarts empty at the snapshot's index + 1 and
// next offset (as ResetAt does).
//
// Crash safety. InstallSnapshot checks each staged file's size and CRC,
// syncs the folder, then writes InstallMarkerName (atomically: a ".tmp",
// synced, renamed, folder synced). The marker is the commit point: before
// it the old log is whole (recovery removes stray staged files); after
// it, recovery completes the install from the marker, whatever step it
// reached, before opening anything (completeInstall: remove every old
// segment file and every index of an installed base, rename the staged
// files that are left, create the empty active segment at the next
// offset, write the checkpoint, remove the marker; each step is
// idempotent and the folder is synced between them). So a crash at any
// point reopens either the old log or the installed one.
//
// Format of InstallMarkerName, integers big-endian:
//
//	magic           uint32  0x534c5349 ("SLSI")
//	version         uint8   1
//	index           uint64  the snapshot's raft index (FirstIndex-1 after)
//	term            uint64  its term
//	nextOffset      int64   the offset after it: the raft start, the log end
//	logStartOffset  int64   the installed log's start offset
//	files           uint32  count, then per file:
//	                          base int64, size int64, crc uint32 (CRC-32C of the .log)
//	crc             uint32  CRC-32C of every byte before it
const (
	InstallMarkerName = "snapshot.install"
	installMagic      = 0x534c5349
	installVersion    = 1
	stagedSuffix      = ".install"
)

// ErrSnapshotFile reports a staged or served snapshot file that does not
// match its description (missing, another size or checksum, or no longer
// a segment outside the raft log on the leader).
var ErrSnapshotFile = errors.New("segment: snapshot file mismatch")

// SnapshotFile describes one segment .log of a compacted log's snapshot.
type SnapshotFile struct {
	Base int64  // the segment's base offset
	Size int64  // bytes of its .log
	CRC  uint32 // CRC-32C of those bytes
}

// StagedSnapshotPath is where a follower stages the snapshot file of base
// offset base in the partition folder dir before InstallSnapshot.
func StagedSnapshotPath(dir string, base int64) string {
	return filepath.Join(dir, MakeFileName(base, KindLog)+stagedSuffix)
}

// RemoveStagedSnapshot removes every staged snapshot file of dir (a
// transfer abandoned or superseded).
func RemoveStagedSnapshot(fs vfs.FS, dir string) error {
	names, err := fs.List(dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if strings.HasSuffix(name, stagedSuffix) {
			if err := fs.Remove(filepath.Join(dir, name)); err != nil && !isNotExist(err) {
				return err
			}
		}
	}
	return nil
}

// FileCRC returns the CRC-32C and size of the file at path.
func FileCRC(fs vfs.FS, path string) (crc uint32, size int64, err error) {
	f, err := fs.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	if size, err = f.Size(); err != nil {
		return 0, 0, err
	}
	crc, err = readerCRC(f, size)
	return crc, size, err
}

func readerCRC(r io.ReaderAt, size int64) (uint32, error) {
	h := crc32.New(crcTable)
	if _, err := io.Copy(h, io.NewSectionReader(r, 0, size)); err != nil {
		return 0, err
	}
	return h.Sum32(), nil
}

// SnapshotFiles lists the segments below the raft start (outside the raft
// log: cleaned, or left by a ResetAt-free history before raft indexes)
// with the size and CRC-32C of each .log, for a raft snapshot at
// FirstIndex-1. It reads them all; the list is what the leader holds now
// (a later clean may replace them, and the transfer then fails).
func (l *Log) SnapshotFiles() ([]SnapshotFile, error) {
	type ref struct {
		fh   *fileHandle
		base int64
		size int64
	}
	var refs []ref
	defer func() {
		for _, r := range refs {
			r.fh.release()
		}
	}()
	l.mu.RLock()
	for _, s := range l.segs[:l.firstRaftSegLocked()] {
		fh, err := s.log.acquire()
		if err != nil {
			l.mu.RUnlock()
			return nil, err
		}
		refs = append(refs, ref{fh: fh, base: s.base, size: s.size})
	}
	l.mu.RUnlock()
	out := make([]SnapshotFile, 0, len(refs))
	for _, r := range refs {
		crc, err := readerCRC(r.fh.f, r.size)
		if err != nil {
			return nil, fmt.Errorf("segment: snapshot file %d: %w", r.base, err)
		}
		out = append(out, SnapshotFile{Base: r.base, Size: r.size, CRC: crc})
	}
	return out, nil
}

// SnapshotReader reads one segment file listed by SnapshotFiles; it holds
// a reference to the file until Close, so its bytes stay readable even if
// the segment is cleaned again or deleted meanwhile.
type SnapshotReader struct {
	fh   *fileHandle
	size int64
}

// ReadAt reads the file's bytes (io.ReaderAt), never past its size.
func (r *SnapshotReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.size {
		return 0, io.EOF
	}
	if rest := r.size - off; int64(len(p)) > rest {
		n, err := r.fh.f.ReadAt(p[:rest], off)
		if err == nil {
			err = io.EOF
		}
		return n, err
	}
	return r.fh.f.ReadAt(p, off)
}

// Size returns the file's size.
func (r *SnapshotReader) Size() int64 { return r.size }

// Close releases the file.
func (r *SnapshotReader) Close() error {
	if r.fh != nil {
		r.fh.release()
		r.fh = nil
	}
	return nil
}

// OpenSnapshotFile opens the segment f describes for reading, if it is
// still a segment outside the raft log of that size (ErrSnapshotFile
// otherwise; the caller then fails the transfer and raft asks for a new
// snapshot). The checksum is the receiver's to verify.
func (l *Log) OpenSnapshotFile(f SnapshotFile) (*SnapshotReader, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.segs[:l.firstRaftSegLocked()] {
		if s.base != f.Base {
			continue
		}
		if s.size != f.Size {
			return nil, fmt.Errorf("%w: segment %d has %d bytes, the snapshot %d", ErrSnapshotFile, f.Base, s.size, f.Size)
		}
		fh, err := s.log.acquire()
		if err != nil {
			return nil, err
		}
		return &SnapshotReader{fh: fh, size: f.Size}, nil
	}
	return nil, fmt.Errorf("%w: no segment %d below the raft start", ErrSnapshotFile, f.Base)
}

// installMarker is InstallMarkerName's content.
type installMarker struct {
	index, term                uint64
	nextOffset, logStartOffset int64
	files                      []SnapshotFile
}

func (m *installMarker) encode() []byte {
	b := binary.BigEndian.AppendUint32(nil, installMagic)
	b = append(b, installVersion)
	b = binary.BigEndian.AppendUint64(b, m.index)
	b = binary.BigEndian.AppendUint64(b, m.term)
	b = binary.BigEndian.AppendUint64(b, uint64(m.nextOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(m.logStartOffset))
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.files)))
	for _, f := range m.files {
		b = binary.BigEndian.AppendUint64(b, uint64(f.Base))
		b = binary.BigEndian.AppendUint64(b, uint64(f.Size))
		b = binary.BigEndian.AppendUint32(b, f.CRC)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

func decodeInstallMarker(b []byte) (installMarker, error) {
	var m installMarker
	const fixed = 4 + 1 + 8 + 8 + 8 + 8 + 4
	if len(b) < fixed+4 {
		return m, fmt.Errorf("%w: install marker of %d bytes", ErrCorrupt, len(b))
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, crcTable) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return m, fmt.Errorf("%w: install marker checksum", ErrCorrupt)
	}
	if binary.BigEndian.Uint32(body) != installMagic || body[4] != installVersion {
		return m, fmt.Errorf("%w: install marker magic or version", ErrCorrupt)
	}
	r := body[5:]
	m.index = binary.BigEndian.Uint64(r)
	m.term = binary.BigEndian.Uint64(r[8:])
	m.nextOffset = int64(binary.BigEndian.Uint64(r[16:]))
	m.logStartOffset = int64(binary.BigEndian.Uint64(r[24:]))
	n := binary.BigEndian.Uint32(r[32:])
	r = r[36:]
	if uint64(len(r)) != uint64(n)*20 {
		return m, fmt.Errorf("%w: install marker: %d files in %d bytes", ErrCorrupt, n, len(r))
	}
	for range n {
		m.files = append(m.files, SnapshotFile{Base: int64(binary.BigEndian.Uint64(r)), Size: int64(binary.BigEndian.Uint64(r[8:])), CRC: binary.BigEndian.Uint32(r[16:])})
		r = r[20:]
	}
	return m, m.validate()
}

// validate checks the marker's fields fit together: bases ascending and
// below the next offset, the log start offset among them.
func (m *installMarker) validate() error {
	if m.nextOffset < 0 || m.term > math.MaxInt32 || m.logStartOffset > m.nextOffset {
		return fmt.Errorf("%w: install at offset %d, log start %d, term %d", ErrRaftIndex, m.nextOffset, m.logStartOffset, m.term)
	}
	prev := int64(-1)
	for _, f := range m.files {
		if f.Base <= prev || f.Base >= m.nextOffset || f.Size < 0 {
			return fmt.Errorf("%w: snapshot file %d (after %d, next offset %d)", ErrRaftIndex, f.Base, prev, m.nextOffset)
		}
		prev = f.Base
	}
	if len(m.files) > 0 && m.logStartOffset < m.files[0].Base {
		return fmt.Errorf("%w: log start offset %d below the first snapshot file %d", ErrRaftIndex, m.logStartOffset, m.files[0].Base)
	}
	return nil
}

func writeFileAtomic(fs vfs.FS, dir, name string, data []byte) error {
	return vfs.WriteFileAtomic(fs, filepath.Join(dir, name), data)
}

// InstallSnapshot replaces the log by a compacted log's raft snapshot
// whose files were staged (StagedSnapshotPath, each synced): they become
// the segments below the raft start, every old segment goes, and the raft
// log restarts empty with FirstIndex index+1, Term(index) = term, log end
// offset nextOffset, and log start offset logStartOffset (with no files,
// nextOffset). Each staged file must have the size and CRC-32C files
// give (ErrSnapshotFile), and its batches must scan cleanly. It is
// durable when it returns and crash-safe throughout (see the top of the
// file).
func (l *Log) InstallSnapshot(files []SnapshotFile, index, term uint64, nextOffset, logStartOffset int64) error {
	if len(files) == 0 {
		logStartOffset = nextOffset
	}
	m := installMarker{index: index, term: term, nextOffset: nextOffset, logStartOffset: logStartOffset, files: files}
	if err := m.validate(); err != nil {
		return err
	}
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.RLock()
	err := l.writableLocked()
	l.mu.RUnlock()
	if err != nil {
		return err
	}
	for _, f := range files {
		crc, size, err := FileCRC(l.fs, StagedSnapshotPath(l.dir, f.Base))
		if err != nil {
			return fmt.Errorf("%w: staged file %d: %w", ErrSnapshotFile, f.Base, err)
		}
		if size != f.Size || crc != f.CRC {
			return fmt.Errorf("%w: staged file %d has %d bytes, crc %#x; want %d, %#x", ErrSnapshotFile, f.Base, size, crc, f.Size, f.CRC)
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail("install", err)
	}
	// The commit point.
	if err := writeFileAtomic(l.fs, l.dir, InstallMarkerName, m.encode()); err != nil {
		return l.fail("install", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.raftLog = true
	for _, s := range l.segs {
		l.deleteSegmentLocked(s)
	}
	old := l.segs
	if err := completeInstall(l.fs, l.dir, m); err != nil {
		return l.failLocked("install", err)
	}
	segs, err := l.openInstalledLocked(m)
	if err != nil {
		// The old (deleted) list stays so the log is well formed; it
		// refuses writes, and reopens installed.
		l.segs = old
		return l.failLocked("install", err)
	}
	l.segs = segs
	l.unsynced = nil
	l.logStartOffset = m.logStartOffset
	l.firstDirty = nextOffset
	l.raftPrevIndex, l.raftPrevTerm, l.lastTerm = index, term, term
	l.writeSeq++
	l.truncEpoch++
	for _, s := range segs[:len(segs)-1] {
		l.retireSegment(s)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.failLocked("install", err)
	}
	l.dirDirty = false
	c := l.checkpointLocked(nextOffset, false)
	if err := writeCheckpoint(l.fs, l.dir, c); err != nil {
		return l.failLocked("checkpoint", err)
	}
	l.recoveryPoint, l.durableLSO = nextOffset, c.LogStartOffset
	return nil
}

// openInstalledLocked opens the segments completeInstall left: the
// installed ones, scanned whole (their indexes rebuilt and synced), and
// the empty active one at the next offset.
func (l *Log) openInstalledLocked(m installMarker) ([]*segment, error) {
	var segs []*segment
	fail := func(err error) ([]*segment, error) {
		for _, s := range segs {
			s.closeFiles()
		}
		return nil, err
	}
	for i, f := range m.files {
		s, _, err := openSegment(l.fs, l.files, l.dir, f.Base, &l.cfg, false)
		if err != nil {
			return fail(err)
		}
		segs = append(segs, s)
		if err := s.reopenIndexesWritable(&l.cfg); err != nil {
			return fail(err)
		}
		s.offIdx.Reset()
		s.timeIdx.Reset()
		s.resetSummary()
		s.unverified = nil
		s.needsVerify.Store(false)
		end := m.nextOffset
		if i+1 < len(m.files) {
			end = m.files[i+1].Base
		}
		cut, reason, err := s.scan(0, &l.cfg, end, false, nil)
		if err != nil {
			return fail(err)
		}
		if cut > 0 || s.next > end {
			return fail(fmt.Errorf("%w: installed segment %d (ends at %d, next segment %d): %v", ErrSnapshotFile, f.Base, s.next, end, reason))
		}
		if err := s.seal(); err != nil {
			return fail(err)
		}
		if err := s.syncAll(); err != nil {
			return fail(err)
		}
		rpos, err := s.walkPositions()
		if err != nil {
			return fail(err)
		}
		s.setPositions(rpos)
		s.rfirst, s.rprev = 0, 0
	}
	act, err := createSegment(l.fs, l.files, l.dir, m.nextOffset, &l.cfg, l.opts.Now())
	if err != nil {
		return fail(err)
	}
	act.rfirst, act.rprev = m.index+1, m.term
	return append(segs, act), nil
}

// completeInstall carries out a committed install on disk (see the top of
// the file); every step is idempotent, so recovery runs it again after a
// crash anywhere in it.
func completeInstall(fs vfs.FS, dir string, m installMarker) error {
	names, err := fs.List(dir)
	if err != nil {
		return err
	}
	installed := map[int64]bool{}
	for _, f := range m.files {
		installed[f.Base] = true
	}
	staged := map[int64]bool{}
	for _, name := range names {
		if n, ok := ParseFileName(strings.TrimSuffix(name, stagedSuffix)); ok && strings.HasSuffix(name, stagedSuffix) && n.Kind == KindLog && !n.Deleted {
			staged[n.Base] = installed[n.Base]
		}
	}
	// 1. Old segment files go: every file of a base not installed, the
	// indexes of installed bases (rebuilt from the .log), and the .log of
	// a base still staged (an old segment of the same base).
	for _, name := range names {
		trimmed := name
		suffix := ""
		for _, sfx := range []string{swapSuffix, cleanedSuffix, truncSuffix, stagedSuffix} {
			if s, ok := strings.CutSuffix(name, sfx); ok {
				trimmed, suffix = s, sfx
				break
			}
		}
		n, ok := ParseFileName(trimmed)
		if !ok || n.Deleted {
			continue // not a segment file, or a pending delete (recovery removes those)
		}
		keep := installed[n.Base] && n.Kind == KindLog &&
			((suffix == "" && !staged[n.Base]) || (suffix == stagedSuffix))
		if keep {
			continue
		}
		if err := fs.Remove(filepath.Join(dir, name)); err != nil && !isNotExist(err) {
			return err
		}
	}
	if err := fs.SyncDir(dir); err != nil {
		return err
	}
	// 2. The staged files take their segments' names.
	for _, f := range m.files {
		if staged[f.Base] {
			if err := fs.Rename(StagedSnapshotPath(dir, f.Base), filepath.Join(dir, MakeFileName(f.Base, KindLog))); err != nil {
				return err
			}
		} else if _, err := fs.Stat(filepath.Join(dir, MakeFileName(f.Base, KindLog))); err != nil {
			return fmt.Errorf("%w: installed segment %d is missing: %w", ErrCorrupt, f.Base, err)
		}
	}
	// 3. The empty active segment at the next offset.
	a, err := fs.Create(filepath.Join(dir, MakeFileName(m.nextOffset, KindLog)))
	if err != nil {
		return err
	}
	if err := a.Sync(); err != nil {
		a.Close()
		return err
	}
	if err := a.Close(); err != nil {
		return err
	}
	if err := fs.SyncDir(dir); err != nil {
		return err
	}
	// 4. The checkpoint: the installed segments are synced and cleaned
	// (gaps are compaction's), the raft log starts at the next offset.
	c := Checkpoint{LogStartOffset: m.logStartOffset, RecoveryPoint: m.nextOffset, CleanerOffset: m.nextOffset,
		HasRaft: true, RaftStartOffset: m.nextOffset, RaftPrevIndex: m.index, RaftPrevTerm: m.term,
		RaftLog: true, RaftRPTerm: m.term}
	if err := writeCheckpoint(fs, dir, c); err != nil {
		return err
	}
	// 5. Done.
	if err := fs.Remove(filepath.Join(dir, InstallMarkerName)); err != nil && !isNotExist(err) {
		return err
	}
	return fs.SyncDir(dir)
}

// recoverInstall runs first in recovery: it completes a committed install
// (InstallMarkerName present), or removes the staged files of one that
// never committed.
func (l *Log) recoverInstall() error {
	path := filepath.Join(l.dir, InstallMarkerName)
	if err := l.fs.Remove(path + ".tmp"); err != nil && !isNotExist(err) {
		return err
	}
	f, err := l.fs.Open(path)
	if isNotExist(err) {
		return RemoveStagedSnapshot(l.fs, l.dir)
	}
	if err != nil {
		return err
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return err
	}
	b := make([]byte, size)
	_, err = f.ReadAt(b, 0)
	f.Close()
	if err != nil && err != io.EOF {
		return err
	}
	m, err := decodeInstallMarker(b)
	if err != nil {
		return err // written atomically: damage is not a crash's
	}
	l.opts.Logger.Info("segment: completing a raft snapshot install interrupted by a crash", "dir", l.dir, "index", m.index, "next_offset", m.nextOffset, "files", len(m.files))
	return completeInstall(l.fs, l.dir, m)
}

// SnapshotSegments lists what SnapshotFiles would, without the checksums
// (CRC zero): cheap, to tell whether a list computed earlier still holds.
func (l *Log) SnapshotSegments() []SnapshotFile {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []SnapshotFile
	for _, s := range l.segs[:l.firstRaftSegLocked()] {
		out = append(out, SnapshotFile{Base: s.base, Size: s.size})
	}
	return out
}
