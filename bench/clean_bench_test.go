package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
)

// BenchmarkClean's fixture: cleanValues records of 1 KiB values over
// cleanKeys keys, 16 records a batch, in segments of cleanSegmentBytes.
const (
	cleanValues       = 64 << 10 // 64 MiB of values: each key written about 6.5 times
	cleanKeys         = 10_000
	cleanSegmentBytes = 8 << 20
	cleanChunk        = 1 << 20 // the peer's read size
	// Values are random sequences of cleanWords random words of
	// cleanWordBytes letters: zstd compresses them about 3:1.
	cleanWords     = 256
	cleanWordBytes = 8
	// The -benchtime 1x (CI smoke) fixture: 4 MiB, same shape.
	cleanSmokeValues       = 4 << 10
	cleanSmokeKeys         = 625
	cleanSmokeSegmentBytes = 512 << 10
)

// BenchmarkClean times one full segment.Log.Clean of a compacted log on the
// real file system: the log holds 65,536 records with 1 KiB values under
// 10,000 keys drawn at random (so about 85% of the records are superseded),
// 16 records a batch, in 8 MiB segments (segment.bytes), all of them closed
// (Roll) and synced (Sync), so every segment is cleanable. One op is one
// Clean; MB/s counts the bytes of the segments it examined
// (CleanStats.BytesRead). Each value is 128 words of 8 letters drawn at
// random from 256 random words: "none" stores them uncompressed (about
// 65 MiB on disk), "zstd" in zstd batches (the same records, about 18 MiB
// on disk: 3.7:1; the cleaner decompresses every batch and compresses again
// each one it keeps records of).
//
// The fixture is rebuilt for each op outside the timer, in a fresh folder
// under b.TempDir(), and removed after it; its data is in the page cache
// when the clean starts (it was just written and synced).
//
// The peer, outside the timer, does the IO a clean cannot avoid: it reads
// the same segment files front to back (1 MiB reads, through descriptors
// opened before the clean) and writes as many bytes as the clean wrote
// (CleanStats.BytesWritten), in proportion as it reads, to a new file in
// the same folder, then fdatasyncs the file and syncs the folder. The clean
// and the peer alternate which goes first from op to op. Custom metrics:
// peer-MB/s (the segment bytes over the peer's time) and ratio = MB/s /
// peer-MB/s, the fraction of the minimum-IO speed the cleaner reaches;
// written-% (BytesWritten over BytesRead) says how much survived.
//
// With -benchtime 1x (CI) the fixture is 4 MiB in 512 KiB segments, a
// smoke test; measure with -benchtime 5x or more (the first op is b.N == 1
// with the small fixture when the testing package probes with a duration).
func BenchmarkClean(b *testing.B) {
	for _, codec := range []struct {
		name  string
		codec batch.Codec
	}{{"none", batch.CodecNone}, {"zstd", batch.CodecZstd}} {
		b.Run(codec.name, func(b *testing.B) { benchmarkClean(b, codec.codec) })
	}
}

func benchmarkClean(b *testing.B, codec batch.Codec) {
	values, keys, segBytes := cleanValues, cleanKeys, int64(cleanSegmentBytes)
	if b.N == 1 {
		values, keys, segBytes = cleanSmokeValues, cleanSmokeKeys, cleanSmokeSegmentBytes
	}
	cfg := segment.DefaultConfig()
	cfg.SegmentBytes = segBytes
	cfg.CleanupPolicy = segment.PolicyCompact
	batches := buildCleanBatches(codec, values, keys)
	root := b.TempDir()

	var (
		segBytesTotal int64 // bytes of the cleanable segments, the same every op
		written       int64 // CleanStats.BytesWritten of the last clean
		peerTime      time.Duration
		cleaned       int64
	)
	b.ResetTimer()
	b.StopTimer()
	for i := range b.N {
		dir := filepath.Join(root, fmt.Sprint(i))
		l, files, size, err := buildCleanLog(dir, cfg, batches)
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			segBytesTotal = size
			b.SetBytes(size)
		} else if size != segBytesTotal {
			b.Fatalf("op %d: the fixture has %d bytes of closed segments, op 0 had %d", i, size, segBytesTotal)
		}
		peer := func() {
			d, err := timeIt(func() error { return cleanPeer(dir, files, written) })
			if err != nil {
				b.Fatal(err)
			}
			peerTime += d
		}
		peerFirst := i%2 == 1 // op 0 cleans first: the peer needs BytesWritten
		if peerFirst {
			peer()
		}
		b.StartTimer()
		st, err := l.Clean(l.LogEndOffset())
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if st.BytesRead != size || st.BytesWritten <= 0 || st.BytesWritten >= size {
			b.Fatalf("op %d: clean read %d bytes and wrote %d; the log has %d bytes of closed segments", i, st.BytesRead, st.BytesWritten, size)
		}
		if i > 0 && st.BytesWritten != written {
			b.Fatalf("op %d: clean wrote %d bytes, op 0 wrote %d", i, st.BytesWritten, written)
		}
		written = st.BytesWritten
		cleaned += st.BytesRead
		if !peerFirst {
			peer()
		}
		for _, f := range files {
			f.Close()
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
	}
	peerMBps := mbps(cleaned, peerTime)
	b.ReportMetric(peerMBps, "peer-MB/s")
	if peerMBps > 0 {
		b.ReportMetric(mbps(cleaned, b.Elapsed())/peerMBps, "ratio")
	}
	if segBytesTotal > 0 {
		b.ReportMetric(100*float64(written)/float64(segBytesTotal), "written-%")
	}
}

// buildCleanBatches returns the fixture's batches: values records of 1 KiB
// values (random words) under keys random keys, 16 a batch, built with
// codec; the same on every call.
func buildCleanBatches(codec batch.Codec, values, keys int) [][]byte {
	rng := rand.New(rand.NewPCG(5, 6))
	opts := batch.NewBuildOptions()
	opts.Codec = codec
	ts := time.Now().UnixMilli()
	words := make([][]byte, cleanWords)
	for i := range words {
		words[i] = make([]byte, cleanWordBytes)
		for j := range words[i] {
			words[i][j] = 'a' + byte(rng.IntN(26))
		}
	}
	var out [][]byte
	recs := make([]batch.Record, recordsPerBatch)
	for n := 0; n < values; n += recordsPerBatch {
		for i := range recs {
			v := make([]byte, 0, recordValueBytes)
			for len(v) < recordValueBytes {
				v = append(v, words[rng.IntN(len(words))]...)
			}
			recs[i] = batch.Record{Timestamp: ts, Key: fmt.Appendf(nil, "key-%05d", rng.IntN(keys)), Value: v}
		}
		out = append(out, batch.Build(opts, recs))
	}
	return out
}

// buildCleanLog writes batches to a new log in dir, rolls and syncs it, and
// returns it with its closed segments' .log files opened for the peer and
// their total size.
func buildCleanLog(dir string, cfg segment.Config, batches [][]byte) (*segment.Log, []*os.File, int64, error) {
	l, err := openLog(dir, cfg)
	if err != nil {
		return nil, nil, 0, err
	}
	fail := func(err error) (*segment.Log, []*os.File, int64, error) {
		l.Close()
		return nil, nil, 0, err
	}
	for _, bt := range batches {
		if _, err := l.Append(bt); err != nil {
			return fail(err)
		}
	}
	if err := l.Roll(); err != nil {
		return fail(err)
	}
	if err := l.Sync(); err != nil {
		return fail(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fail(err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	names = names[:len(names)-1] // the empty active segment
	var (
		files []*os.File
		size  int64
	)
	for _, name := range names {
		f, err := os.Open(filepath.Join(dir, name))
		if err == nil {
			var fi os.FileInfo
			if fi, err = f.Stat(); err == nil {
				size += fi.Size()
			}
			files = append(files, f)
		}
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return fail(err)
		}
	}
	if got := l.Size(); got != size {
		for _, f := range files {
			f.Close()
		}
		return fail(fmt.Errorf("clean fixture: the log has %d bytes, its closed segment files %d", got, size))
	}
	return l, files, size, nil
}

// cleanPeer reads files front to back in 1 MiB reads and writes written
// bytes in all, in proportion as it reads, to a new file in dir, then
// fdatasyncs it and syncs dir.
func cleanPeer(dir string, files []*os.File, written int64) error {
	var total int64
	for _, f := range files {
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		total += fi.Size()
	}
	out, err := newPlainLog(filepath.Join(dir, "peer"), 1<<62)
	if err != nil {
		return err
	}
	defer out.close()
	buf := make([]byte, cleanChunk)
	var read, wrote int64
	for _, f := range files {
		for off := int64(0); ; {
			n, err := f.ReadAt(buf, off)
			off += int64(n)
			read += int64(n)
			if want := written * read / max(total, 1); want > wrote {
				if err := out.write(buf[:want-wrote], 1, false); err != nil {
					return err
				}
				wrote = want
			}
			if err == io.EOF || err == nil && n < len(buf) {
				break
			}
			if err != nil {
				return err
			}
		}
	}
	if err := out.sync(); err != nil {
		return err
	}
	return syncDir(filepath.Join(dir, "peer"))
}
