package dump

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// demoTime is the demo log's first timestamp: 2023-11-14T22:13:20Z, in ms.
const demoTime = 1_700_000_000_000

// demoBatch is one batch of the demo log.
type demoBatch struct {
	opts          batch.BuildOptions
	recs          []batch.Record
	logAppendTime bool
}

// demoBatches returns the demo log's batches: one of each thing worth
// seeing in a dump. Batch i has timestamps from demoTime + i seconds.
func demoBatches() []demoBatch {
	plain := batch.NewBuildOptions()
	with := func(c batch.Codec) batch.BuildOptions { o := plain; o.Codec = c; return o }
	idem := plain
	idem.ProducerID, idem.ProducerEpoch, idem.BaseSequence = 4000, 0, 0
	txn := plain
	txn.ProducerID, txn.ProducerEpoch, txn.BaseSequence, txn.Transactional = 4001, 0, 0, true
	marker := txn
	marker.BaseSequence, marker.Control = -1, true

	rec := func(key, value []byte, hdrs ...batch.RecordHeader) batch.Record {
		return batch.Record{Key: key, Value: value, Headers: hdrs}
	}
	b := func(s string) []byte { return []byte(s) }
	json := batch.RecordHeader{Key: "content-type", Value: b("application/json")}
	batches := []demoBatch{
		{opts: plain, recs: []batch.Record{
			rec(b("user-1"), b(`{"name":"ada"}`), json),
			rec(b("user-2"), b(`{"name":"grace"}`), json),
			rec(b("user-3"), b(`{"name":"edsger"}`), json),
		}},
		{opts: plain, recs: []batch.Record{rec(nil, b("no key")), rec(nil, b("no key either"))}},
		{opts: with(batch.CodecGzip), recs: []batch.Record{
			rec(b("sensor-1"), b("temperature=21.5")), rec(b("sensor-1"), b("temperature=21.6")),
			rec(b("sensor-2"), b("temperature=19.0")), rec(b("sensor-2"), b("temperature=19.1")),
		}},
		{opts: plain, recs: []batch.Record{rec(b("user-2"), nil)}}, // a tombstone
		{opts: plain, recs: []batch.Record{rec(b("user-4"), b("")), rec(b(""), b("empty key"))}},
		{opts: with(batch.CodecZstd), recs: []batch.Record{
			rec(b("order-1"), b("created"), batch.RecordHeader{Key: "trace-id", Value: b("4bf92f3577b34da6")}),
			rec(b("order-1"), b("paid"), batch.RecordHeader{Key: "trace-id", Value: b("4bf92f3577b34da6")}, batch.RecordHeader{Key: "retry", Value: nil}),
			rec(b("order-1"), b("shipped")),
		}},
		{opts: plain, recs: []batch.Record{rec(b("blob"), []byte{0x00, 0x01, 0xfe, 0xff, 'h', 'i', '\n'})}},
		{opts: idem, recs: []batch.Record{rec(b("payment-7"), b("authorized")), rec(b("payment-7"), b("captured"))}},
		{opts: txn, recs: []batch.Record{rec(b("account-1"), b("debit 10")), rec(b("account-2"), b("credit 10"))}},
		// The transaction's commit marker: key version 0, type 1 (COMMIT);
		// value version 0, coordinatorEpoch 0.
		{opts: marker, recs: []batch.Record{rec([]byte{0, 0, 0, 1}, []byte{0, 0, 0, 0, 0, 0})}},
		{opts: plain, logAppendTime: true, recs: []batch.Record{
			rec(b("long"), b(strings.Repeat("a long value, cut at --max-value-bytes. ", 4))),
		}},
	}
	for i := range batches {
		for j := range batches[i].recs {
			batches[i].recs[j].Timestamp = demoTime + int64(i)*1000 + int64(j)
		}
	}
	return batches
}

// demoConfig keeps segments small so the demo log has three of them, and
// indexes every batch after a segment's first.
func demoConfig() segment.Config {
	cfg := segment.DefaultConfig()
	cfg.SegmentBytes = 600
	cfg.IndexIntervalBytes = 0
	cfg.SegmentIndexBytes = 4096
	return cfg
}

// writeDemo writes the demo partition log into dir with segment.Open and
// Append, then closes it. It writes nothing and returns false when dir
// already holds .log files, and refuses a folder holding anything else.
func writeDemo(fs vfs.FS, dir string, stderr io.Writer) (bool, error) {
	if fi, err := fs.Stat(dir); err == nil {
		if !fi.IsDir() {
			return false, fmt.Errorf("%s is not a folder", dir)
		}
		names, err := fs.List(dir)
		if err != nil {
			return false, err
		}
		for _, name := range names {
			if n, ok := segment.ParseFileName(name); ok && n.Kind == segment.KindLog && !n.Deleted {
				return false, nil
			}
		}
		if len(names) > 0 {
			return false, fmt.Errorf("%s is not empty and holds no .log file: refusing to write a demo log there", dir)
		}
	} else if !isNotExist(err) {
		return false, err
	}
	now := time.UnixMilli(demoTime + 60_000)
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	l, err := segment.Open(fs, dir, demoConfig(), segment.Options{Now: func() time.Time { return now }, Logger: logger})
	if err != nil {
		return false, err
	}
	records := 0
	for i, db := range demoBatches() {
		_, err := l.AppendWith(batch.Build(db.opts, db.recs), segment.AppendOptions{
			SetLeaderEpoch: true, LeaderEpoch: 0, LogAppendTime: db.logAppendTime})
		if err != nil {
			l.Close()
			return false, fmt.Errorf("append batch %d: %w", i, err)
		}
		records += len(db.recs)
	}
	segments := l.NumSegments()
	n := len(demoBatches())
	if err := l.Close(); err != nil {
		return false, err
	}
	fmt.Fprintf(stderr, "sluice-dump: wrote a demo partition log to %s: %s, %s, %s\n", dir,
		plural(n, "batch", "batches"), plural(records, "record", "records"), plural(segments, "segment", "segments"))
	return true, nil
}
