package dump

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/segment/batch"
)

func TestDumpBatches(t *testing.T) {
	dir := t.TempDir()
	nb, _ := writeTestLog(t, dir)
	code, stdout, stderr := run(t, dir)
	if code != ExitOK || stderr != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	bl := lines(stdout, "baseOffset: ")
	if len(bl) != nb {
		t.Fatalf("%d batch lines, want %d:\n%s", len(bl), nb, stdout)
	}
	want := "baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 " +
		"partitionLeaderEpoch: -1 isTransactional: false isControl: false position: 0 CreateTime: 1700000000002 size: "
	if !strings.HasPrefix(bl[0], want) || !strings.HasSuffix(bl[0], " magic: 2 compresscodec: none crc: "+crcOf(bl[0])+" isvalid: true raftIndex: 1") {
		t.Errorf("first batch line:\n%s\nwant prefix:\n%s", bl[0], want)
	}
	if !strings.Contains(bl[1], "baseOffset: 3 lastOffset: 5 count: 3 ") || !strings.Contains(bl[1], "compresscodec: gzip") {
		t.Errorf("second batch line: %s", bl[1])
	}
	if !strings.Contains(bl[3], "compresscodec: zstd") {
		t.Errorf("fourth batch line: %s", bl[3])
	}
	logs := logFiles(t, dir)
	if got := lines(stdout, "Dumping "); len(got) != len(logs) || got[0] != "Dumping "+logs[0] {
		t.Errorf("Dumping lines %q, want one per .log file %q", got, logs)
	}
	if !strings.HasPrefix(stdout, "Checkpoint "+filepath.Join(dir, "log.checkpoint")+"\nlogStartOffset: 0 ") {
		t.Errorf("no checkpoint first:\n%s", stdout)
	}
	if len(lines(stdout, "| ")) != 0 {
		t.Errorf("records printed without --records")
	}
}

// crcOf returns the crc field of a batch line.
func crcOf(line string) string {
	_, after, _ := strings.Cut(line, " crc: ")
	crc, _, _ := strings.Cut(after, " ")
	return crc
}

func TestDumpRecords(t *testing.T) {
	dir := t.TempDir()
	_, nr := writeTestLog(t, dir)
	code, stdout, stderr := run(t, "--records", "--max-value-bytes", "10", dir)
	if code != ExitOK || stderr != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	rl := lines(stdout, "| offset: ")
	if len(rl) != nr {
		t.Fatalf("%d record lines, want %d", len(rl), nr)
	}
	for _, want := range []string{
		`| offset: 0 CreateTime: 1700000000000 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [h,n] key: "k0" payload: "v0" headers: ["h"="hv", "n"=null]`,
		`keySize: -1 valueSize: 1 sequence: -1 headerKeys: [] key: null payload: "x"`,    // null key
		`keySize: 4 valueSize: -1 sequence: -1 headerKeys: [] key: "dead" payload: null`, // tombstone
		`keySize: 5 valueSize: 0 sequence: -1 headerKeys: [] key: "empty" payload: ""`,   // empty value
		`key: "bin" payload: "\xff\x00\xfe"`,
		`key: "long" payload: "LLLLLLLLLL"...(100 bytes)`,
		`key: "g1" payload: "gzip-1"`,
		`key: "alive" payload: "zstd"`,
	} {
		if !strings.Contains(stdout, want+"\n") && !strings.Contains(stdout, want) {
			t.Errorf("no record line containing %s", want)
		}
	}
}

func TestDumpJSON(t *testing.T) {
	dir := t.TempDir()
	nb, nr := writeTestLog(t, dir)
	code, stdout, stderr := run(t, "--json", "--records", "--max-value-bytes", "10", dir)
	if code != ExitOK || stderr != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	types := map[string]int{}
	records := map[string]map[string]any{} // by key
	for i, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("line %d %q: %v", i+1, line, err)
		}
		typ, _ := m["type"].(string)
		types[typ]++
		if typ == "record" {
			if k, ok := m["key"].(string); ok {
				records[k] = m
			} else if m["key"] == nil {
				records["<null>"] = m
			}
		}
		if typ == "batch" && m["isvalid"] != true {
			t.Errorf("batch not valid: %s", line)
		}
	}
	if types["batch"] != nb || types["record"] != nr || types["segment"] != len(logFiles(t, dir)) || types["checkpoint"] != 1 {
		t.Errorf("line types %v, want %d batches, %d records", types, nb, nr)
	}
	check := func(key, field string, want any) {
		t.Helper()
		r, ok := records[key]
		if !ok {
			t.Fatalf("no record with key %q", key)
		}
		v, present := r[field]
		if !present {
			t.Errorf("record %q has no field %q", key, field)
		} else if v != want {
			t.Errorf("record %q: %s = %#v, want %#v", key, field, v, want)
		}
	}
	check("<null>", "key", nil)
	check("<null>", "keySize", json.Number("-1"))
	check("dead", "value", nil)
	check("dead", "valueSize", json.Number("-1"))
	check("empty", "value", "")
	check("empty", "valueSize", json.Number("0"))
	check("bin", "value", base64.StdEncoding.EncodeToString([]byte{0xff, 0x00, 0xfe}))
	check("bin", "valueEncoding", "base64")
	check("long", "value", "LLLLLLLLLL")
	check("long", "valueTruncated", true)
	check("long", "valueSize", json.Number("100"))
	check("g2", "value", "gzip-2")
	hdrs, _ := records["k0"]["headers"].([]any)
	if len(hdrs) != 2 || hdrs[1].(map[string]any)["value"] != nil || hdrs[0].(map[string]any)["value"] != "hv" {
		t.Errorf("headers of k0: %#v", hdrs)
	}
}

func TestDumpSingleFile(t *testing.T) {
	dir := t.TempDir()
	writeTestLog(t, dir)
	path := logFiles(t, dir)[1]
	code, stdout, stderr := run(t, "--records", path)
	if code != ExitOK || stderr != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if got := lines(stdout, "Dumping "); len(got) != 1 || got[0] != "Dumping "+path {
		t.Errorf("Dumping lines %q", got)
	}
	if n := len(lines(stdout, "baseOffset: ")); n != len(positions(t, path)) {
		t.Errorf("%d batch lines, want %d", n, len(positions(t, path)))
	}
	if strings.Contains(stdout, "Checkpoint") {
		t.Errorf("checkpoint printed for a single file")
	}
	// Flags after the path work too, and so does --verify on one file.
	if code, stdout, stderr := run(t, path, "--verify"); code != ExitOK || !strings.HasPrefix(stdout, "verified: ") || stderr != "" {
		t.Errorf("verify one file: exit %d\n%s%s", code, stdout, stderr)
	}
}

func TestDumpDoesNotModify(t *testing.T) {
	dir := t.TempDir()
	writeTestLog(t, dir)
	before := snapshot(t, dir)
	for _, args := range [][]string{{dir}, {"--records", dir}, {"--json", "--records", dir}, {"--verify", dir}} {
		if code, _, stderr := run(t, args...); code != ExitOK {
			t.Fatalf("%v: exit %d\n%s", args, code, stderr)
		}
	}
	after := snapshot(t, dir)
	if len(before) != len(after) {
		t.Fatalf("files changed: %v -> %v", before, after)
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed", k)
		}
	}
}

func TestDumpCorruptContinues(t *testing.T) {
	dir := t.TempDir()
	writeTestLog(t, dir)
	logs := logFiles(t, dir)
	ps := positions(t, logs[0])
	patch(t, logs[0], ps[1]+batch.HeaderSize+3, []byte{0x5a})
	last := logs[len(logs)-1]
	lp := positions(t, last)
	truncate(t, last, lp[len(lp)-1]+20)

	code, stdout, stderr := run(t, dir)
	if code != ExitProblem {
		t.Fatalf("exit %d, want %d", code, ExitProblem)
	}
	if !strings.Contains(stdout, "position: "+itoa(ps[1])+" ") || !strings.Contains(stdout, "isvalid: false") {
		t.Errorf("no invalid batch line:\n%s", stdout)
	}
	// The batches after the bad one, and the later files, are still dumped.
	if !strings.Contains(stdout, "position: "+itoa(ps[2])+" ") || !strings.Contains(stdout, "Dumping "+last) {
		t.Errorf("dump stopped at the bad batch:\n%s", stdout)
	}
	for _, want := range []string{logs[0] + ": position " + itoa(ps[1]) + ": ", last + ": position " + itoa(lp[len(lp)-1]) + ": "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not report %q:\n%s", want, stderr)
		}
	}
}

func TestDemo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo-0")
	code, stdout, stderr := run(t, "--demo", dir)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"compresscodec: gzip", "compresscodec: zstd", "key: null", "payload: null", `payload: ""`,
		"endTxnMarker: COMMIT", "LogAppendTime: ", "isTransactional: true", `headers: ["trace-id"="4bf92f3577b34da6", "retry"=null]`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo dump lacks %q", want)
		}
	}
	if n := len(logFiles(t, dir)); n < 2 || n > 3 {
		t.Errorf("demo has %d segments, want 2-3", n)
	}
	code, stdout, stderr = run(t, "--verify", dir)
	if code != ExitOK || stdout != "verified: 11 batches, 22 records, 3 segments\n" || stderr != "" {
		t.Errorf("verify demo: exit %d\n%s%s", code, stdout, stderr)
	}
	// A second --demo dumps the same log without writing.
	before := snapshot(t, dir)
	code, stdout2, stderr := run(t, "--demo", dir)
	if code != ExitOK || !strings.Contains(stderr, "already holds a log") {
		t.Errorf("second demo: exit %d\n%s", code, stderr)
	}
	if first := lines(stdout, "| "); !bytes.Equal([]byte(strings.Join(first, "\n")), []byte(strings.Join(lines(stdout2, "| "), "\n"))) && len(first) > 0 {
		t.Errorf("second demo dump differs")
	}
	after := snapshot(t, dir)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("second --demo changed %s", k)
		}
	}
	// A folder with other files is refused.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run(t, "--demo", other); code != ExitProblem || !strings.Contains(stderr, "refusing") {
		t.Errorf("demo into a non-empty folder: exit %d\n%s", code, stderr)
	}
}

func TestUsage(t *testing.T) {
	// -h prints the usage to stdout, so that sluice-dump -h | less works.
	code, stdout, stderr := run(t, "-h")
	if code != ExitOK || stderr != "" || !strings.HasPrefix(stdout, "Usage: sluice-dump") {
		t.Errorf("-h: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"-max-value-bytes", "sluice-dump --verify ", "go run ./tools/cmd/sluice-dump --verify ",
		"it wins over --records, which is then ignored", "--json only turns its final \"verified\" lines into JSON"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("usage lacks %q", want)
		}
	}
	// Usage errors go to stderr, with exit status 2 and nothing on stdout.
	for _, args := range [][]string{nil, {"--bogus", "x"}, {"--max-value-bytes", "many", "x"}, {"--demo", "d", "x"}} {
		code, stdout, stderr := run(t, args...)
		if code != ExitUsage || stdout != "" || !strings.HasPrefix(stderr, "sluice-dump: ") || !strings.Contains(stderr, "sluice-dump -h") {
			t.Errorf("%q: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
		}
	}
	if _, _, stderr := run(t); !strings.Contains(stderr, "no PATH") {
		t.Errorf("no args:\n%s", stderr)
	}
	if code, _, stderr := run(t, filepath.Join(t.TempDir(), "missing")); code != ExitProblem || !strings.Contains(stderr, "no such file") {
		t.Errorf("missing path: exit %d\n%s", code, stderr)
	}
}
