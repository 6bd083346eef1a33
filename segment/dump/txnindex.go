package dump

import (
	"fmt"

	"github.com/sluicemq/sluice/index"
)

// jsonTxnEntry is one transaction index entry in --json output.
type jsonTxnEntry struct {
	Type             string `json:"type"` // "txnIndexEntry"
	File             string `json:"file"`
	Entry            int    `json:"entry"`
	ProducerID       int64  `json:"producerId"`
	FirstOffset      int64  `json:"firstOffset"`
	LastOffset       int64  `json:"lastOffset"`
	LastStableOffset int64  `json:"lastStableOffset"`
}

// txnIndexFile prints the entries of one .txnindex file given as PATH
// (package index's format: the aborted transactions whose marker is in
// the segment); a torn or invalid tail is a warning (the broker drops it).
func (d *dumper) txnIndexFile(path string) {
	f, err := d.fs.Open(path)
	if err != nil {
		d.problemf(path, -1, "%v", err)
		return
	}
	defer f.Close()
	ix, err := index.OpenTxnIndex(f, false)
	if err != nil {
		d.problemf(path, -1, "%v", err)
		return
	}
	if !d.cfg.verify && !d.cfg.json {
		fmt.Fprintf(d.out, "Dumping %s\n", path)
	}
	for i, a := range ix.Entries() {
		switch {
		case d.cfg.verify:
		case d.cfg.json:
			d.emit(&jsonTxnEntry{Type: "txnIndexEntry", File: path, Entry: i, ProducerID: a.ProducerID,
				FirstOffset: a.FirstOffset, LastOffset: a.LastOffset, LastStableOffset: a.LastStableOffset})
		default:
			fmt.Fprintf(d.out, "producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d\n",
				a.ProducerID, a.FirstOffset, a.LastOffset, a.LastStableOffset)
		}
	}
	if ix.Torn() {
		d.warnf(path, int64(ix.Len()*index.TxnEntrySize), "a torn or invalid tail after %d entries (the broker drops it)", ix.Len())
	}
}
