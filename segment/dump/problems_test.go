package dump

import (
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
)

// wantExit runs args and checks the exit status and that stderr holds
// every one of words; it returns stdout and stderr.
func wantExit(t *testing.T, want int, args []string, words ...string) (string, string) {
	t.Helper()
	code, stdout, stderr := run(t, args...)
	if code != want {
		t.Fatalf("%q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, want, stdout, stderr)
	}
	for _, w := range words {
		if !strings.Contains(stderr, w) {
			t.Errorf("%q: stderr lacks %q:\n%s", args, w, stderr)
		}
	}
	return stdout, stderr
}

func TestNoSegmentFiles(t *testing.T) {
	empty := t.TempDir()
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{empty, other} {
		for _, args := range [][]string{{"--verify", dir}, {dir}, {"--verify", "--json", dir}} {
			stdout, _ := wantExit(t, ExitProblem, args, "sluice-dump: no segment .log files in "+dir+"\n")
			if stdout != "" {
				t.Errorf("%q: stdout %q", args, stdout)
			}
		}
	}
}

func TestVerifyIndexFileAlone(t *testing.T) {
	dir := t.TempDir()
	writeTestLog(t, dir)
	path, _ := segmentWithMostBatches(t, dir)
	idx, tix := indexPath(path, segment.KindOffsetIndex), indexPath(path, segment.KindTimeIndex)
	nIdx, nTix := fileSize(t, idx)/8, fileSize(t, tix)/12
	log := filepath.Base(path)
	stdout, stderr := wantExit(t, ExitOK, []string{"--verify", idx})
	if want := fmt.Sprintf("verified: offset index %s: %d entries, in order and checked against %s\n", idx, nIdx, log); stdout != want || stderr != "" {
		t.Errorf("offset index: stdout %q, want %q; stderr:\n%s", stdout, want, stderr)
	}
	stdout, _ = wantExit(t, ExitOK, []string{"--verify", tix})
	if want := fmt.Sprintf("verified: time index %s: %d entries, in order and checked against %s\n", tix, nTix, log); stdout != want {
		t.Errorf("time index: stdout %q, want %q", stdout, want)
	}
	stdout, _ = wantExit(t, ExitOK, []string{"--verify", "--json", idx})
	if want := fmt.Sprintf(`{"type":"verified","file":%q,"kind":"offsetIndex","entries":%d,"checkedAgainstLog":true}`+"\n", idx, nIdx); stdout != want {
		t.Errorf("json: %q, want %q", stdout, want)
	}
	// An entry that points into a batch is found from the index alone.
	ps := positions(t, path)
	patch(t, idx, 8+4, be32(uint32(ps[2]+5)))
	for _, args := range [][]string{{"--verify", idx}, {idx}} {
		stdout, _ := wantExit(t, ExitProblem, args, idx+": position 8: offset index entry 1 ", "does not point at the start of a batch")
		if strings.Contains(stdout, "verified") {
			t.Errorf("%q: stdout %q", args, stdout)
		}
	}
	// Without its .log, only the order is checked, and it says so.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	stdout, _ = wantExit(t, ExitOK, []string{"--verify", tix}, "warning: "+tix+": "+log+" is missing: the entries were checked for order only")
	if want := fmt.Sprintf("verified: time index %s: %d entries, in order only (not checked against batches: %s is missing)\n", tix, nTix, log); stdout != want {
		t.Errorf("without .log: %q, want %q", stdout, want)
	}
}

func fileSize(t *testing.T, path string) int {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// Closed segments' indexes are trimmed to their entries.
	return int(fi.Size())
}

func TestSegmentGap(t *testing.T) {
	dir := t.TempDir()
	writeTestLog(t, dir)
	logs := logFiles(t, dir)
	if len(logs) < 3 {
		t.Fatalf("%d segments", len(logs))
	}
	if err := os.Remove(logs[1]); err != nil {
		t.Fatal(err)
	}
	// The gap itself is fine (compaction leaves gaps); the missing
	// segment's orphaned indexes are warned about, and the dump goes on.
	orphan := indexPath(logs[1], segment.KindOffsetIndex)
	code, stdout, stderr := run(t, dir)
	if code != ExitOK || !strings.Contains(stderr, "warning: "+orphan+": index file without a .log file") || strings.Contains(stderr, "missing:") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "Dumping "+logs[len(logs)-1]) {
		t.Errorf("plain dump stopped:\n%s", stdout)
	}
}

// checkpointBytes returns a checkpoint file's bytes with a valid CRC.
func checkpointBytes(body string) []byte {
	crc := crc32.Checksum([]byte(body), crc32.MakeTable(crc32.Castagnoli))
	return []byte(fmt.Sprintf("%scrc %d\n", body, crc))
}

func TestCheckpointDamaged(t *testing.T) {
	for _, tc := range []struct{ name, content, reason string }{
		{"crc", "version 1\nlog-start-offset 0\nrecovery-point 3\nclean-shutdown 1\ncrc 12345\n", "checksum mismatch"},
		{"version", string(checkpointBytes("version 4\nlog-start-offset 0\nrecovery-point 0\nclean-shutdown 1\n")), "version 4"},
		{"unparsable", string(checkpointBytes("version 1\nlog-start-offset zero\n")), `line "log-start-offset zero"`},
		{"no crc", "version 1\n", "no crc line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTestLog(t, dir)
			ckpt := filepath.Join(dir, segment.CheckpointName)
			if err := os.WriteFile(ckpt, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			want := ckpt + ": segment: bad checkpoint file: " + tc.reason
			for _, args := range [][]string{{"--verify", dir}, {dir}, {"--verify", ckpt}, {ckpt}} {
				stdout, stderr := wantExit(t, ExitProblem, args, want)
				if n := strings.Count(stderr, "bad checkpoint"); n != 1 {
					t.Errorf("%q: reported %d times:\n%s", args, n, stderr)
				}
				if strings.Contains(stdout, "verified") || strings.Contains(stdout, "Checkpoint ") {
					t.Errorf("%q: stdout:\n%s", args, stdout)
				}
			}
		})
	}
}

func TestCheckpointPath(t *testing.T) {
	dir := t.TempDir()
	writeTestLog(t, dir)
	ckpt := filepath.Join(dir, segment.CheckpointName)
	stdout, stderr := wantExit(t, ExitOK, []string{ckpt})
	if !strings.HasPrefix(stdout, "Checkpoint "+ckpt+"\nlogStartOffset: 0 recoveryPoint: ") || strings.Contains(stdout, "Dumping") || stderr != "" {
		t.Errorf("dump:\n%s%s", stdout, stderr)
	}
	stdout, _ = wantExit(t, ExitOK, []string{"--verify", ckpt})
	if !strings.HasPrefix(stdout, "verified: checkpoint "+ckpt+": logStartOffset: 0 recoveryPoint: ") || strings.Count(stdout, "\n") != 1 {
		t.Errorf("verify:\n%s", stdout)
	}
	stdout, _ = wantExit(t, ExitOK, []string{"--json", ckpt})
	if !strings.HasPrefix(stdout, `{"type":"checkpoint","file":`) {
		t.Errorf("json:\n%s", stdout)
	}
	// Any file with that name is a checkpoint, wherever it is.
	other := filepath.Join(t.TempDir(), segment.CheckpointName)
	if err := os.WriteFile(other, checkpointBytes("version 1\nlog-start-offset 7\nrecovery-point 9\nclean-shutdown 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _ = wantExit(t, ExitOK, []string{other})
	if stdout != "Checkpoint "+other+"\nlogStartOffset: 7 recoveryPoint: 9 cleanShutdown: false\n" {
		t.Errorf("other:\n%s", stdout)
	}
}

func TestCRCDecimal(t *testing.T) {
	dir := t.TempDir()
	path := writeRaw(t, dir, 0, 0)
	patch(t, path, batch.HeaderSize+2, []byte{0x7e})
	stdout, stderr := wantExit(t, ExitProblem, []string{path}, "crc mismatch: the header says ")
	stored := crcOf(lines(stdout, "baseOffset: ")[0])
	if !strings.Contains(stderr, "the header says "+stored+", the bytes give ") || strings.Contains(stderr, "0x") {
		t.Errorf("crc %s not in decimal in:\n%s", stored, stderr)
	}
	wantProblem(t, dir, path, 0, "crc mismatch: the header says "+stored+", the bytes give ")
}

func TestPlural(t *testing.T) {
	dir := t.TempDir()
	path := writeRaw(t, dir, 0, 0)
	stdout, _ := wantExit(t, ExitOK, []string{"--verify", path})
	if stdout != "verified: 1 batch, 2 records, 1 segment\n" {
		t.Errorf("stdout %q", stdout)
	}
	for n, want := range map[int]string{0: "0 records", 1: "1 record", 2: "2 records"} {
		if got := plural(n, "record", "records"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestVerifyWins: with --verify, --records changes nothing and --json only
// the verified line; problems stay text on stderr.
func TestVerifyWins(t *testing.T) {
	dir := t.TempDir()
	writeTestLog(t, dir)
	_, plain, _ := run(t, "--verify", dir)
	_, withRecords, _ := run(t, "--verify", "--records", dir)
	_, jsonOnly, _ := run(t, "--verify", "--json", dir)
	_, jsonRecords, _ := run(t, "--verify", "--json", "--records", dir)
	if plain != withRecords || jsonOnly != jsonRecords || !strings.HasPrefix(plain, "verified: ") || !strings.HasPrefix(jsonOnly, `{"type":"verified",`) {
		t.Errorf("outputs differ:\n%s%s%s%s", plain, withRecords, jsonOnly, jsonRecords)
	}
	bad := t.TempDir()
	path := writeRaw(t, bad, 0, 0, 1) // overlapping offsets
	stdout, _ := wantExit(t, ExitProblem, []string{"--verify", "--json", "--records", bad}, "sluice-dump: "+path+": position ")
	if stdout != "" {
		t.Errorf("stdout %q", stdout)
	}
}

// TestPlainDumpWarns: a plain dump prints the warnings --verify prints.
func TestPlainDumpWarns(t *testing.T) {
	dir := t.TempDir()
	writeRaw(t, dir, 0, 0, 2)
	orphan := filepath.Join(dir, segment.MakeFileName(9, segment.KindOffsetIndex))
	if err := os.WriteFile(orphan, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	words := []string{"warning: " + orphan + ": index file without a .log file",
		"warning: " + filepath.Join(dir, segment.MakeFileName(0, segment.KindOffsetIndex)) + ": missing"}
	_, verr := wantExit(t, ExitOK, []string{"--verify", dir}, words...)
	stdout, perr := wantExit(t, ExitOK, []string{dir}, words...)
	if verr != perr || len(lines(stdout, "baseOffset: ")) != 2 {
		t.Errorf("verify stderr:\n%s\nplain stderr:\n%s\nstdout:\n%s", verr, perr, stdout)
	}
}
