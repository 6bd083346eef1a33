package dump

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

const testTime = 1_700_000_000_000

type testBatch struct {
	codec batch.Codec
	recs  []batch.Record
}

// testLogBatches are the batches writeTestLog appends: compressed ones, a
// null key, a tombstone, an empty value, headers, a binary value, a long one.
func testLogBatches() []testBatch {
	b := func(s string) []byte { return []byte(s) }
	r := func(k, v []byte, h ...batch.RecordHeader) batch.Record {
		return batch.Record{Key: k, Value: v, Headers: h}
	}
	bs := []testBatch{
		{batch.CodecNone, []batch.Record{
			r(b("k0"), b("v0"), batch.RecordHeader{Key: "h", Value: b("hv")}, batch.RecordHeader{Key: "n", Value: nil}),
			r(b("k1"), b("v1")), r(b("k2"), b("v2")),
		}},
		{batch.CodecGzip, []batch.Record{r(b("g0"), b("gzip-0")), r(b("g1"), b("gzip-1")), r(b("g2"), b("gzip-2"))}},
		{batch.CodecNone, []batch.Record{r(nil, b("x"))}},
		{batch.CodecZstd, []batch.Record{r(b("alive"), b("zstd")), r(b("dead"), nil)}},
		{batch.CodecNone, []batch.Record{r(b("empty"), b(""))}},
		{batch.CodecNone, []batch.Record{r(b("bin"), []byte{0xff, 0x00, 0xfe}), r(b("long"), bytes.Repeat(b("L"), 100))}},
	}
	for i := range 4 {
		bs = append(bs, testBatch{batch.CodecNone, []batch.Record{r(b("p"), b("plain-a")), r(b("q"), b("plain-b-"+string(rune('0'+i))))}})
	}
	return bs
}

// writeTestLog writes the test batches into dir with segment.Open/Append:
// small segments (at least three), every batch after a segment's first
// indexed. It returns the number of batches and records.
func writeTestLog(t *testing.T, dir string) (batches, records int) {
	t.Helper()
	cfg := segment.DefaultConfig()
	cfg.SegmentBytes = 400
	cfg.IndexIntervalBytes = 0
	cfg.SegmentIndexBytes = 1024
	now := time.UnixMilli(testTime)
	l, err := segment.Open(vfs.Default, dir, cfg, segment.Options{
		Now: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for i, tb := range testLogBatches() {
		for j := range tb.recs {
			tb.recs[j].Timestamp = testTime + int64(i)*100 + int64(j)
		}
		opts := batch.NewBuildOptions()
		opts.Codec = tb.codec
		if _, err := l.Append(batch.Build(opts, tb.recs)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		batches++
		records += len(tb.recs)
	}
	if n := l.NumSegments(); n < 3 {
		t.Fatalf("want at least 3 segments, got %d", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return batches, records
}

// run runs Main in-process.
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

// logFiles returns the .log files of dir in base-offset order.
func logFiles(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(paths)
	return paths
}

// positions returns the byte positions of the batches of a .log file.
func positions(t *testing.T, path string) []int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ps []int64
	for p := 0; p < len(data); {
		h, err := batch.ParseHeader(data[p:])
		if err != nil {
			t.Fatalf("%s at %d: %v", path, p, err)
		}
		ps = append(ps, int64(p))
		p += h.Size()
	}
	return ps
}

// patch overwrites bytes of a file at off.
func patch(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func readAt(t *testing.T, path string, off int64, n int) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data[off : off+int64(n)]
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// snapshot returns every file of dir with its content hash and mod time.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = fmt.Sprintf("%x ", sha256.Sum256(data)) + fi.ModTime().String()
	}
	return m
}

// lines returns the lines of s that start with prefix.
func lines(s, prefix string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// wantProblem asserts that a --verify run failed at file and position.
func wantProblem(t *testing.T, dir, file string, pos int64, words ...string) {
	t.Helper()
	code, stdout, stderr := run(t, "--verify", dir)
	if code != ExitProblem {
		t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, ExitProblem, stdout, stderr)
	}
	if strings.Contains(stdout, "verified:") {
		t.Errorf("stdout says verified:\n%s", stdout)
	}
	var problem string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "sluice-dump: ") && !strings.HasPrefix(l, "sluice-dump: warning: ") {
			problem = l
			break
		}
	}
	want := "sluice-dump: " + file + ": position " + itoa(pos) + ": "
	if !strings.HasPrefix(problem, want) {
		t.Fatalf("problem line %q, want prefix %q; stderr:\n%s", problem, want, stderr)
	}
	for _, w := range words {
		if !strings.Contains(problem, w) {
			t.Errorf("problem line %q does not mention %q", problem, w)
		}
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}
