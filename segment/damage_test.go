package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// damagedLog writes a log of segments closed cleanly (2 batches of 2
// records each, so segment k starts at offset 4k) and returns its FS and
// config.
func damagedLog(t *testing.T, segments int) (*vfs.MemFS, Config) {
	t.Helper()
	mem := vfs.NewMem()
	cfg := testConfig()
	b := mkBatch(2, 0, 20, "a")
	cfg.SegmentBytes = int64(2 * len(b))
	l := openTest(t, mem, cfg, nil)
	for i := 0; i < 2*segments; i++ {
		mustAppend(t, l, mkBatch(2, int64(i), 20, "a"))
	}
	if got := l.NumSegments(); got != segments {
		t.Fatalf("%d segments, want %d", got, segments)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return mem, cfg
}

func segmentFiles(t *testing.T, mem *vfs.MemFS) []string {
	t.Helper()
	names, err := mem.List("/p/topic-0")
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	for _, n := range names {
		if f, ok := ParseFileName(n); ok && f.Kind == KindLog {
			logs = append(logs, n)
		}
	}
	return logs
}

// A segment truncated in the middle of a cleanly closed log: recovery
// keeps every later segment on disk, serves what lies below the damage,
// refuses reads at and past it and writes with ErrDamaged, and logs the
// file and position (Kafka takes the log dir offline; it never deletes).
func TestMidLogTruncationKeepsLaterSegments(t *testing.T) {
	mem, cfg := damagedLog(t, 6)
	path := "/p/topic-0/" + MakeFileName(8, KindLog)
	f, err := mem.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	size, _ := f.Size()
	if err := f.Truncate(size - 10); err != nil { // the second batch is torn
		t.Fatal(err)
	}
	f.Close()

	var logbuf bytes.Buffer
	l, err := Open(mem, "/p/topic-0", cfg, Options{Logger: slog.New(slog.NewTextHandler(&logbuf, nil))})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if got := len(segmentFiles(t, mem)); got != 6 {
		t.Fatalf("%d segment files left on disk, want all 6", got)
	}
	if fi, err := mem.Stat(path); err != nil || fi.Size() != size-10 {
		t.Fatalf("damaged segment changed on disk: %v %v", fi, err)
	}
	d := l.Damage()
	if d == nil || d.Offset != 10 || d.File != path || d.Position != size/2 {
		t.Fatalf("damage %+v, want offset 10 in %s at %d", d, path, size/2)
	}
	if out := logbuf.String(); !strings.Contains(out, "damaged") || !strings.Contains(out, path) || !strings.Contains(out, "position=") {
		t.Fatalf("log does not name the damage:\n%s", out)
	}
	if hs := readBelowDamage(t, l); len(hs) != 5 || hs[4].LastOffset() != 9 {
		t.Fatalf("read %d batches below the damage, want 5 (offsets 0-9)", len(hs))
	}
	if _, err := l.Read(10, 1<<20, NoUpperBound); !errors.Is(err, ErrDamaged) || !errors.Is(err, ErrFailed) {
		t.Fatalf("read at the damage: %v, want ErrDamaged", err)
	}
	// Past the damage (and past the log end offset the damage leaves)
	// is the damage too, not out of range: a consumer told
	// OFFSET_OUT_OF_RANGE would reset its position.
	if _, err := l.Read(15, 1<<20, NoUpperBound); !errors.Is(err, ErrDamaged) {
		t.Fatalf("read past the damage: %v, want ErrDamaged", err)
	}
	if _, err := l.Append(mkBatch(1, 0, 1, "x")); !errors.Is(err, ErrDamaged) {
		t.Fatalf("append to a damaged log: %v", err)
	}
	if err := l.Close(); err != nil && !errors.Is(err, ErrFailed) {
		t.Fatal(err)
	}
	// Reopening finds the same damage: nothing was cut meanwhile.
	l, err = Open(mem, "/p/topic-0", cfg, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if d := l.Damage(); d == nil || d.Offset != 10 {
		t.Fatalf("damage after reopen %+v", d)
	}
	l.Close()
	if got := len(segmentFiles(t, mem)); got != 6 {
		t.Fatalf("%d segment files after reopen, want 6", got)
	}
}

// A segment missing from the middle of a cleanly closed log: the log
// opens damaged at the gap, serving what lies below it.
func TestMissingSegmentDamagesLog(t *testing.T) {
	mem, cfg := damagedLog(t, 3)
	if err := mem.Remove("/p/topic-0/" + MakeFileName(4, KindLog)); err != nil {
		t.Fatal(err)
	}
	l, err := Open(mem, "/p/topic-0", cfg, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatalf("open with a missing segment: %v", err)
	}
	defer l.Close()
	d := l.Damage()
	if d == nil || d.Offset != 4 || !strings.Contains(d.Error(), "missing") {
		t.Fatalf("damage %+v", d)
	}
	if hs := readBelowDamage(t, l); len(hs) != 2 {
		t.Fatalf("read %d batches below the gap, want 2", len(hs))
	}
	if got := len(segmentFiles(t, mem)); got != 2 {
		t.Fatalf("%d segment files, want 2 (none removed)", got)
	}
}

// A torn tail of the active segment after a crash is still cut: that is
// crash recovery, not damage.
func TestTornActiveTailStillTruncated(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig()
	l := openTest(t, mem, cfg, nil)
	for i := 0; i < 3; i++ {
		mustAppend(t, l, mkBatch(2, int64(i), 20, "a"))
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone(vfs.CrashOptions{})
	l.Close()
	path := "/p/topic-0/" + MakeFileName(0, KindLog)
	f, _ := crashed.OpenReadWrite(path)
	size, _ := f.Size()
	f.Truncate(size - 5)
	f.Close()
	l, err := Open(crashed, "/p/topic-0", cfg, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Damage() != nil || l.LogEndOffset() != 4 {
		t.Fatalf("damage %v, log end %d; want a clean cut at 4", l.Damage(), l.LogEndOffset())
	}
	if _, err := l.Append(mkBatch(1, 0, 1, "x")); err != nil {
		t.Fatal(err)
	}
}

// readBelowDamage reads every batch from the log start offset until the
// read returns the log's damage, checking each batch's CRC.
func readBelowDamage(t testing.TB, l *Log) []batch.Header {
	t.Helper()
	var out []batch.Header
	offset := l.LogStartOffset()
	for {
		data, res, err := l.ReadBytes(nil, offset, 64<<10, NoUpperBound)
		if errors.Is(err, ErrDamaged) {
			return out
		}
		if err != nil {
			t.Fatalf("read at %d: %v", offset, err)
		}
		if res.Bytes == 0 {
			t.Fatalf("read at %d: nothing and no damage", offset)
		}
		for len(data) > 0 {
			h, err := batch.ValidateHeader(data[:min(len(data), int(binary.BigEndian.Uint32(data[8:12]))+12)])
			if err != nil {
				t.Fatalf("batch served at %d: %v", offset, err)
			}
			out = append(out, h)
			data = data[h.Size():]
		}
		offset = res.NextOffset
	}
}

// A batch whose CRC fails in a segment recovery trusted (closed cleanly)
// is not served: the first read of it returns the batches before it, the
// next read the damage, and the log refuses writes. Checked segments are
// not read again.
func TestBadCRCNotServed(t *testing.T) {
	mem, cfg := damagedLog(t, 4)
	path := "/p/topic-0/" + MakeFileName(4, KindLog)
	f, err := mem.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	size, _ := f.Size()
	// The last byte of the segment's second batch: a record's value.
	if _, err := f.WriteAt([]byte{'!'}, size-1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var logbuf bytes.Buffer
	l, err := Open(mem, "/p/topic-0", cfg, Options{Logger: slog.New(slog.NewTextHandler(&logbuf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Damage() != nil {
		t.Fatalf("damage found by a clean open: %v", l.Damage())
	}
	hs := readBelowDamage(t, l)
	if len(hs) != 3 || hs[2].LastOffset() != 5 {
		t.Fatalf("served %d batches, want the 3 before the bad one (offsets 0-5)", len(hs))
	}
	d := l.Damage()
	if d == nil || d.File != path || d.Offset != 6 || d.Position != size/2 || !errors.Is(d.Reason, ErrCorrupt) {
		t.Fatalf("damage %+v", d)
	}
	if out := logbuf.String(); strings.Count(out, "log damaged") != 1 || !strings.Contains(out, "crc") {
		t.Fatalf("log lines:\n%s", out)
	}
	if _, err := l.Read(6, 1<<20, NoUpperBound); !errors.Is(err, ErrDamaged) {
		t.Fatalf("read at the bad batch: %v", err)
	}
	if _, err := l.Append(mkBatch(1, 0, 1, "x")); !errors.Is(err, ErrDamaged) {
		t.Fatalf("append: %v", err)
	}
	l.mu.RLock()
	first := l.segs[0]
	l.mu.RUnlock()
	if !first.verified() {
		t.Fatal("the segment read whole is still unchecked")
	}
}

// Reads of checked data do not read it again for the check: a read of a
// verified segment returns its ranges without touching the file.
func TestVerifiedOnce(t *testing.T) {
	mem, cfg := damagedLog(t, 3)
	var reads int
	fs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if op == vfs.OpRead {
			reads++
		}
		return nil
	}))
	l, err := Open(fs, "/p/topic-0", cfg, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Read(0, 1<<20, NoUpperBound); err != nil {
		t.Fatal(err)
	}
	before := reads
	for range 5 {
		if _, err := l.Read(0, 1<<20, NoUpperBound); err != nil {
			t.Fatal(err)
		}
	}
	// A read looks up one header per segment (3); checking its 6 batches
	// would read each one.
	if per := (reads - before) / 5; per > 3 {
		t.Fatalf("%d file reads per read of checked data", per)
	}
}

// An operator's TruncateFolder at the damage: a dry run changes nothing;
// applied, it cuts the damaged segment there and removes the later ones,
// and the log opens undamaged and takes writes.
func TestTruncateFolderRepairsDamage(t *testing.T) {
	mem, cfg := damagedLog(t, 6)
	path := "/p/topic-0/" + MakeFileName(8, KindLog)
	f, _ := mem.OpenReadWrite(path)
	size, _ := f.Size()
	f.Truncate(size - 10)
	f.Close()

	plan, err := TruncateFolder(mem, "/p/topic-0", 10, false)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Segment != path || plan.Position != size/2 || plan.EndOffset != 10 || plan.Damage == nil || len(plan.Removed) != 12 {
		t.Fatalf("plan %+v", plan)
	}
	if got := len(segmentFiles(t, mem)); got != 6 {
		t.Fatalf("dry run removed segments: %d left", got)
	}
	if _, err := TruncateFolder(mem, "/p/topic-0", 10, true); err != nil {
		t.Fatal(err)
	}
	if got := len(segmentFiles(t, mem)); got != 3 {
		t.Fatalf("%d segments after the repair, want 3", got)
	}
	l, err := Open(mem, "/p/topic-0", cfg, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Damage() != nil || l.LogEndOffset() != 10 {
		t.Fatalf("after the repair: damage %v, log end %d", l.Damage(), l.LogEndOffset())
	}
	if off := mustAppend(t, l, mkBatch(2, 0, 20, "b")); off != 10 {
		t.Fatalf("append after the repair at %d", off)
	}
	if hs := readAll(t, l, 0); len(hs) != 6 {
		t.Fatalf("%d batches after the repair", len(hs))
	}
}

// A batch length damaged in the middle of a closed segment (below its
// last index entry, where a clean open reads nothing) is found by the
// header scan a partition runs at open: the log is damaged there and
// serves what lies below.
func TestBadBatchLengthFoundByHeaderScan(t *testing.T) {
	mem, cfg := damagedLog(t, 3)
	path := "/p/topic-0/" + MakeFileName(4, KindLog)
	f, _ := mem.OpenReadWrite(path)
	size, _ := f.Size()
	f.WriteAt([]byte{0x7f, 0xff, 0xff, 0xff}, size/2+8) // the second batch's length
	f.Close()
	l, err := Open(mem, "/p/topic-0", cfg, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	n := 0
	if err := l.ScanHeaders(0, func(batch.Header) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if d := l.Damage(); n != 3 || d == nil || d.Offset != 6 || d.Position != size/2 {
		t.Fatalf("scanned %d headers, damage %+v", n, d)
	}
	if hs := readBelowDamage(t, l); len(hs) != 3 {
		t.Fatalf("read %d batches below the damage", len(hs))
	}
}
