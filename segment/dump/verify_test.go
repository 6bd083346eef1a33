package dump

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/index"
	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
)

func TestVerifyGood(t *testing.T) {
	dir := t.TempDir()
	nb, nr := writeTestLog(t, dir)
	code, stdout, stderr := run(t, "--verify", dir)
	want := fmt.Sprintf("verified: %d batches, %d records, %d segments\n", nb, nr, len(logFiles(t, dir)))
	if code != ExitOK || stdout != want || stderr != "" {
		t.Fatalf("exit %d\nstdout: %q, want %q\nstderr:\n%s", code, stdout, want, stderr)
	}
	code, stdout, _ = run(t, "--verify", "--json", dir)
	if code != ExitOK || !strings.HasPrefix(stdout, `{"type":"verified","batches":`) {
		t.Errorf("--json --verify: exit %d %s", code, stdout)
	}
}

func TestVerifyCRC(t *testing.T) {
	dir := t.TempDir()
	writeTestLog(t, dir)
	path := logFiles(t, dir)[1]
	ps := positions(t, path)
	pos := ps[len(ps)-1]
	b := readAt(t, path, pos+batch.HeaderSize+2, 1)
	patch(t, path, pos+batch.HeaderSize+2, []byte{b[0] ^ 0x40})
	wantProblem(t, dir, path, pos, "crc")
}

func TestVerifyTornTail(t *testing.T) {
	dir := t.TempDir()
	writeTestLog(t, dir)
	logs := logFiles(t, dir)
	path := logs[len(logs)-1]
	ps := positions(t, path)
	pos := ps[len(ps)-1]
	truncate(t, path, pos+batch.HeaderSize+3)
	wantProblem(t, dir, path, pos, "torn")
	// A tail too short for a header is torn as well.
	truncate(t, path, pos+7)
	wantProblem(t, dir, path, pos, "torn")
}

// segmentWithMostBatches returns the .log file holding the most batches.
func segmentWithMostBatches(t *testing.T, dir string) (string, []int64) {
	var best string
	var bestPs []int64
	for _, p := range logFiles(t, dir) {
		if ps := positions(t, p); len(ps) > len(bestPs) {
			best, bestPs = p, ps
		}
	}
	if len(bestPs) < 3 {
		t.Fatalf("no segment with 3 batches")
	}
	return best, bestPs
}

func indexPath(logPath string, kind segment.FileKind) string {
	return strings.TrimSuffix(logPath, ".log") + kind.String()
}

func TestVerifyIndexWrongPosition(t *testing.T) {
	dir := t.TempDir()
	writeTestLog(t, dir)
	path, ps := segmentWithMostBatches(t, dir)
	idx := indexPath(path, segment.KindOffsetIndex)
	// Entry 1 is the third batch's (the first batch is never indexed):
	// point it 5 bytes into that batch, which keeps the entries in order.
	at := int64(1 * index.OffsetEntrySize)
	if got := readAt(t, idx, at+4, 4); string(got) != string(be32(uint32(ps[2]))) {
		t.Fatalf("entry 1 position %x, want %d", got, ps[2])
	}
	patch(t, idx, at+4, be32(uint32(ps[2]+5)))
	wantProblem(t, dir, idx, at, fmt.Sprintf("offset index entry 1 (offset %d, position %d) does not point at the start of a batch: it falls inside the batch at position %d (the next batch starts at position %d)",
		indexOffset(t, idx, 1), ps[2]+5, ps[2], ps[3]))
}

func TestVerifyIndexWrongOffset(t *testing.T) {
	dir := t.TempDir()
	writeTestLog(t, dir)
	path, _ := segmentWithMostBatches(t, dir)
	idx := indexPath(path, segment.KindOffsetIndex)
	rel := readAt(t, idx, 0, 4)
	// The entry holds the indexed batch's last offset (Kafka's convention);
	// two less is the previous batch's last offset, which names neither
	// end of the indexed batch.
	patch(t, idx, 0, be32(uint32(rel[3])-2))
	wantProblem(t, dir, idx, 0, "maps offset")
}

func TestVerifyIndexOutOfOrder(t *testing.T) {
	dir := t.TempDir()
	writeTestLog(t, dir)
	path, _ := segmentWithMostBatches(t, dir)
	idx := indexPath(path, segment.KindOffsetIndex)
	patch(t, idx, index.OffsetEntrySize, be32(0)) // entry 1's offset below entry 0's
	wantProblem(t, dir, idx, index.OffsetEntrySize, "out of order")
}

func TestVerifyTimeIndex(t *testing.T) {
	dir := t.TempDir()
	writeTestLog(t, dir)
	path, _ := segmentWithMostBatches(t, dir)
	tix := indexPath(path, segment.KindTimeIndex)
	data, err := os.ReadFile(tix)
	if err != nil || len(data) < 2*index.TimeEntrySize {
		t.Fatalf("time index: %d bytes, %v", len(data), err)
	}
	last := int64(len(data) - index.TimeEntrySize)
	patch(t, tix, last+7, []byte{data[last+7] + 1}) // a larger timestamp: still in order
	wantProblem(t, dir, tix, last, "max timestamp")
}

func TestVerifyOverlappingSegments(t *testing.T) {
	dir := t.TempDir()
	writeTestLog(t, dir)
	logs := logFiles(t, dir)
	prev, ok1 := segment.ParseFileName(filepath.Base(logs[1]))
	next, ok2 := segment.ParseFileName(filepath.Base(logs[2]))
	if !ok1 || !ok2 || next.Base-prev.Base < 2 {
		t.Fatalf("segments %s %s", logs[1], logs[2])
	}
	// Segment 2 renamed one offset above segment 1's base: it now claims
	// offsets segment 1 holds.
	lower := prev.Base + 1
	for _, k := range []segment.FileKind{segment.KindLog, segment.KindOffsetIndex, segment.KindTimeIndex} {
		if err := os.Rename(filepath.Join(dir, segment.MakeFileName(next.Base, k)), filepath.Join(dir, segment.MakeFileName(lower, k))); err != nil {
			t.Fatal(err)
		}
	}
	wantProblem(t, dir, filepath.Join(dir, segment.MakeFileName(lower, segment.KindLog)), 0, "overlaps")
}

// writeRaw writes batches with the given base offsets into one .log file
// by hand (no indexes), for offset layouts Append never makes.
func writeRaw(t *testing.T, dir string, base int64, bases ...int64) string {
	t.Helper()
	var data []byte
	for _, b := range bases {
		opts := batch.NewBuildOptions()
		opts.BaseOffset = b
		data = append(data, batch.Build(opts, []batch.Record{
			{Timestamp: testTime, Key: []byte("k"), Value: []byte("v")},
			{Timestamp: testTime + 1, Key: []byte("k"), Value: []byte("w")},
		})...)
	}
	path := filepath.Join(dir, segment.MakeFileName(base, segment.KindLog))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestVerifyOffsets(t *testing.T) {
	// Gaps between batches of a segment, before a segment's first batch
	// and between segments are fine: compaction leaves them.
	dir := t.TempDir()
	writeRaw(t, dir, 0, 0, 2, 10)
	writeRaw(t, dir, 14, 20)
	if code, stdout, stderr := run(t, "--verify", dir); code != ExitOK || stdout != "verified: 4 batches, 8 records, 2 segments\n" {
		t.Fatalf("gaps: exit %d\n%s%s", code, stdout, stderr)
	}
	// Offsets going backwards inside a segment are a problem.
	dir = t.TempDir()
	path := writeRaw(t, dir, 0, 0, 2, 3)
	wantProblem(t, dir, path, positions(t, path)[2], "go backwards or overlap")
	// So is a first batch below the segment's base offset.
	dir = t.TempDir()
	path = writeRaw(t, dir, 5, 4)
	wantProblem(t, dir, path, 0, "go backwards or overlap")
	// Contiguous segments without indexes verify, with warnings.
	dir = t.TempDir()
	writeRaw(t, dir, 0, 0, 2)
	writeRaw(t, dir, 4, 4)
	code, stdout, stderr := run(t, "--verify", dir)
	if code != ExitOK || stdout != "verified: 3 batches, 6 records, 2 segments\n" || !strings.Contains(stderr, "warning: ") ||
		!strings.Contains(stderr, "missing (the broker rebuilds it") {
		t.Fatalf("contiguous: exit %d\n%s%s", code, stdout, stderr)
	}
}

// indexOffset returns the offset of entry i of an offset index file.
func indexOffset(t *testing.T, path string, i int) int64 {
	t.Helper()
	n, ok := segment.ParseFileName(filepath.Base(path))
	if !ok {
		t.Fatalf("not an index: %s", path)
	}
	rel := readAt(t, path, int64(i*index.OffsetEntrySize), 4)
	return n.Base + int64(uint32(rel[0])<<24|uint32(rel[1])<<16|uint32(rel[2])<<8|uint32(rel[3]))
}
