package dump

import (
	"fmt"
	"path/filepath"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
)

// raftIndex is a segment's .raftindex while its .log is dumped: it gives
// each batch its raft index, and is checked against the batches.
type raftIndex struct {
	path string
	f    segment.RaftIndexFile
	n    int // batches seen
	bad  bool
}

// openRaftIndex reads the .raftindex of the segment at base, if any, and
// prints its header. A .raftindex that does not decode is a warning only:
// the broker rebuilds it from the .log.
func (d *dumper) openRaftIndex(logPath string, base int64) {
	path := filepath.Join(filepath.Dir(logPath), segment.MakeFileName(base, segment.KindRaftIndex))
	b, err := d.readSmall(path, 1<<30)
	if isNotExist(err) {
		return
	}
	if err != nil {
		d.warnf(path, -1, "%v", err)
		return
	}
	f, ok := segment.DecodeRaftIndexFile(b)
	if !ok {
		d.warnf(path, -1, "raft index file does not decode (bad header, length or crc): the broker rebuilds it from the .log")
		return
	}
	d.raft = &raftIndex{path: path, f: f}
	if d.cfg.verify || d.cfg.json {
		return
	}
	if f.First == 0 {
		fmt.Fprintf(d.out, "Raft index %s: the segment is outside the raft log (compacted)\n", path)
	} else {
		fmt.Fprintf(d.out, "Raft index %s: first index %d (the entry before it has term %d), %d entries\n", path, f.First, f.PrevTerm, len(f.Pos))
	}
}

// index returns the raft index of the batch at pos (0 when unknown); a
// .raftindex that disagrees with the .log stops giving indexes.
func (r *raftIndex) index(path string, pos int64) uint64 {
	if r == nil || r.bad {
		return 0
	}
	k := r.n
	r.n++
	if k >= len(r.f.Pos) || r.f.Pos[k] != pos || r.f.First == 0 {
		r.bad = true
		return 0
	}
	return r.f.First + uint64(k)
}

// internalBatch prints (or checks) an internal batch: one of raft's own
// entries, which takes no offset (its base offset is the next offset).
func (d *dumper) internalBatch(path string, pos int64, b []byte, h *batch.Header, herr error, next *int64, raftIndex uint64) {
	d.raftEntries++
	if herr == nil {
		_, kind, data, err := batch.ParseInternal(b)
		if err != nil {
			herr = err
		} else if !d.cfg.verify {
			d.printInternal(path, pos, h, segment.EntryKind(kind), data, raftIndex)
		}
	}
	if herr != nil {
		if !d.cfg.verify {
			d.printBatch(path, pos, h, false, raftIndex)
		}
		d.problemf(path, pos, "%v", herr)
		*next = -1
		return
	}
	if *next >= 0 && h.BaseOffset < *next {
		d.problemf(path, pos, "raft entry at offset %d goes backwards: the previous batch puts the next offset at %d", h.BaseOffset, *next)
		*next = -1
		return
	}
	if *next >= 0 {
		*next = h.NextOffset()
	}
	if r := d.raft; r != nil && !r.bad && r.n > 0 && r.n-1 < len(r.f.Internal) && !r.f.Internal[r.n-1] {
		d.warnf(r.path, -1, "entry %d is an internal batch in the .log but a data batch in the raft index: the broker rebuilds it", r.n-1)
		r.bad = true
	}
}

type jsonRaftEntry struct {
	Type      string  `json:"type"`
	File      string  `json:"file"`
	Position  int64   `json:"position"`
	Offset    int64   `json:"offset"` // the next offset: the entry takes none
	Kind      string  `json:"kind"`
	Term      int32   `json:"term"`
	RaftIndex uint64  `json:"raftIndex,omitempty"`
	DataSize  int     `json:"dataSize"`
	Data      *string `json:"data,omitempty"`
	Encoding  string  `json:"dataEncoding,omitempty"`
	Size      int     `json:"size"`
	CRC       uint32  `json:"crc"`
}

// printInternal prints an internal batch as a raft entry: its kind and term
// (and, with --records, its data).
func (d *dumper) printInternal(path string, pos int64, h *batch.Header, kind segment.EntryKind, data []byte, raftIndex uint64) {
	if d.cfg.json {
		je := jsonRaftEntry{Type: "raftEntry", File: path, Position: pos, Offset: h.BaseOffset, Kind: kind.String(),
			Term: h.PartitionLeaderEpoch, RaftIndex: raftIndex, DataSize: len(data), Size: h.Size(), CRC: h.CRC}
		if d.cfg.records {
			je.Data, je.Encoding, _ = jsonBytes(data, d.cfg.maxValueBytes)
		}
		d.emit(&je)
		return
	}
	fmt.Fprintf(d.out, "raftEntry: %s term: %d offset: %d (takes no offset) dataSize: %d position: %d size: %d crc: %d isvalid: true",
		kind, h.PartitionLeaderEpoch, h.BaseOffset, len(data), pos, h.Size(), h.CRC)
	if raftIndex > 0 {
		fmt.Fprintf(d.out, " raftIndex: %d", raftIndex)
	}
	if d.cfg.records && len(data) > 0 {
		fmt.Fprintf(d.out, " data: %s", quoteBytes(data, d.cfg.maxValueBytes))
	}
	fmt.Fprintln(d.out)
}

// raftIndexFile dumps a .raftindex given as PATH: its header and each
// batch's position.
func (d *dumper) raftIndexFile(path string) {
	b, err := d.readSmall(path, 1<<30)
	if err != nil {
		d.errorf("%v", err)
		return
	}
	f, ok := segment.DecodeRaftIndexFile(b)
	if !ok {
		d.problemf(path, -1, "raft index file does not decode (bad header, length or crc)")
		return
	}
	if d.cfg.verify {
		d.verified = append(d.verified, verifiedItem{text: fmt.Sprintf("%s: raft index of %s", path, plural(len(f.Pos), "entry", "entries")),
			json: &jsonVerifiedFile{Type: "verified", File: path, Kind: "raftIndex"}})
		return
	}
	if !d.cfg.json {
		fmt.Fprintf(d.out, "Dumping %s\nfirst index: %d prevTerm: %d entries: %d\n", path, f.First, f.PrevTerm, len(f.Pos))
	}
	for i, p := range f.Pos {
		idx := uint64(0)
		if f.First > 0 {
			idx = f.First + uint64(i)
		}
		if d.cfg.json {
			d.emit(&jsonRaftIndexEntry{Type: "raftIndexEntry", File: path, Entry: i, RaftIndex: idx, Position: p, Internal: f.Internal[i]})
		} else {
			fmt.Fprintf(d.out, "entry: %d raftIndex: %d position: %d internal: %t\n", i, idx, p, f.Internal[i])
		}
	}
}

type jsonRaftIndexEntry struct {
	Type      string `json:"type"`
	File      string `json:"file"`
	Entry     int    `json:"entry"`
	RaftIndex uint64 `json:"raftIndex"`
	Position  int64  `json:"position"`
	Internal  bool   `json:"internal"`
}
