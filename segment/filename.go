package segment

import (
	"fmt"
	"strconv"
	"strings"
)

// FileKind is the kind of a segment file; its extension is Kafka's.
type FileKind uint8

// The segment file kinds.
const (
	KindLog         FileKind = iota // .log: the record batches
	KindOffsetIndex                 // .index: sparse offset index
	KindTimeIndex                   // .timeindex: time index
	KindRaftIndex                   // .raftindex: raft index -> file position (see raftindex.go)
	KindTxnIndex                    // .txnindex: aborted transactions (package index; see txnindex.go)
)

// Format: segment file names are the base offset zero-padded to 20 digits
// followed by the kind's extension, Kafka's layout. A file being deleted
// carries the extra suffix deletedSuffix until it is removed. The log
// cleaner writes a segment's replacement under cleanedSuffix, renames it to
// swapSuffix once it is complete and synced, and to the plain name once the
// old files are renamed deletedSuffix (see Log.Clean).
const (
	baseOffsetDigits = 20
	deletedSuffix    = ".deleted"
	cleanedSuffix    = ".cleaned"
	swapSuffix       = ".swap"
	// truncSuffix names the copy of a segment's .log prefix that a
	// truncation writes when readers hold the file (see truncateAt);
	// recovery removes a leftover one.
	truncSuffix = ".trunc"
)

var kindExt = [...]string{KindLog: ".log", KindOffsetIndex: ".index", KindTimeIndex: ".timeindex", KindRaftIndex: ".raftindex", KindTxnIndex: ".txnindex"}

// String returns the kind's file extension, e.g. ".log".
func (k FileKind) String() string {
	if int(k) < len(kindExt) {
		return kindExt[k]
	}
	return fmt.Sprintf("FileKind(%d)", uint8(k))
}

// FileName is the parsed name of a segment file.
type FileName struct {
	Base    int64    // the segment's base offset
	Kind    FileKind // log, offset, time, raft or transaction index
	Deleted bool     // the name carries the ".deleted" suffix
}

// MakeFileName returns the file name (not path) of a segment file, e.g.
// "00000000000000000042.index" for base offset 42.
func MakeFileName(base int64, kind FileKind) string {
	return fmt.Sprintf("%0*d%s", baseOffsetDigits, base, kind)
}

// String returns the file name.
func (n FileName) String() string {
	s := MakeFileName(n.Base, n.Kind)
	if n.Deleted {
		s += deletedSuffix
	}
	return s
}

// ParseFileName parses a segment file name; ok is false when name is not
// one (other files in a partition folder, such as checkpoints, are not).
func ParseFileName(name string) (n FileName, ok bool) {
	if s, found := strings.CutSuffix(name, deletedSuffix); found {
		n.Deleted = true
		name = s
	}
	if len(name) <= baseOffsetDigits {
		return FileName{}, false
	}
	digits, ext := name[:baseOffsetDigits], name[baseOffsetDigits:]
	switch ext {
	case ".log":
		n.Kind = KindLog
	case ".index":
		n.Kind = KindOffsetIndex
	case ".timeindex":
		n.Kind = KindTimeIndex
	case ".raftindex":
		n.Kind = KindRaftIndex
	case ".txnindex":
		n.Kind = KindTxnIndex
	default:
		return FileName{}, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return FileName{}, false
		}
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return FileName{}, false
	}
	n.Base = base
	return n, true
}
