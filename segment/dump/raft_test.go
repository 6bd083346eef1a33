package dump

import (
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// writeRaftLog writes a raft log: a leader's empty entry, data, a
// configuration change, a second leader's empty entry and more data, over
// at least two segments.
func writeRaftLog(t *testing.T, dir string) {
	t.Helper()
	cfg := segment.DefaultConfig()
	cfg.SegmentBytes = 300
	l, err := segment.Open(vfs.Default, dir, cfg, segment.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	data := func(v string) []byte {
		return batch.Build(batch.NewBuildOptions(), []batch.Record{{Timestamp: testTime, Key: []byte("k"), Value: []byte(v)}, {Timestamp: testTime, Value: []byte(v)}})
	}
	for i, e := range []struct {
		term uint64
		kind segment.EntryKind
		data []byte
	}{
		{1, segment.EntryEmpty, nil}, {1, segment.EntryData, data("a")}, {1, segment.EntryConfChangeV2, []byte("conf-change")},
		{1, segment.EntryData, data("b")}, {2, segment.EntryEmpty, nil}, {2, segment.EntryData, data("c")}, {2, segment.EntryData, data("d")},
	} {
		if _, err := l.AppendEntry(uint64(i+1), e.term, e.kind, e.data, segment.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if l.NumSegments() < 2 {
		t.Fatalf("%d segments", l.NumSegments())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// sluice-dump shows raft's own entries (internal batches) as raft entries
// with their kind and term, and every batch's raft index from .raftindex.
func TestDumpRaftEntries(t *testing.T) {
	dir := t.TempDir()
	writeRaftLog(t, dir)
	code, stdout, stderr := run(t, "--records", dir)
	if code != ExitOK || stderr != "" {
		t.Fatalf("exit %d, stderr:\n%s\nstdout:\n%s", code, stderr, stdout)
	}
	re := lines(stdout, "raftEntry: ")
	if len(re) != 3 {
		t.Fatalf("%d raft entry lines:\n%s", len(re), stdout)
	}
	for i, want := range []string{
		"raftEntry: empty term: 1 offset: 0 (takes no offset) dataSize: 0 ",
		"raftEntry: confchangev2 term: 1 offset: 2 (takes no offset) dataSize: 11 ",
		"raftEntry: empty term: 2 offset: 4 (takes no offset) dataSize: 0 ",
	} {
		if !strings.HasPrefix(re[i], want) {
			t.Errorf("raft entry %d:\n%s\nwant prefix\n%s", i, re[i], want)
		}
	}
	if !strings.Contains(re[0], "raftIndex: 1") || !strings.Contains(re[1], `raftIndex: 3 data: "conf-change"`) || !strings.Contains(re[2], "raftIndex: 5") {
		t.Errorf("raft indexes: %q", re)
	}
	bl := lines(stdout, "baseOffset: ")
	if len(bl) != 4 || !strings.HasSuffix(bl[0], "raftIndex: 2") || !strings.HasSuffix(bl[3], "raftIndex: 7") || !strings.Contains(bl[3], "partitionLeaderEpoch: 2 ") {
		t.Errorf("batch lines: %q", bl)
	}
	if len(lines(stdout, "Raft index ")) < 2 {
		t.Errorf("no raft index headers:\n%s", stdout)
	}

	code, stdout, _ = run(t, "--verify", dir)
	if code != ExitOK || !strings.Contains(stdout, "verified: 7 batches (3 raft entries), 8 records,") {
		t.Fatalf("verify: exit %d\n%s", code, stdout)
	}

	code, stdout, _ = run(t, "--json", dir)
	if code != ExitOK {
		t.Fatal(code)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if m["type"] == "raftEntry" {
			n++
			if m["kind"] == "" || m["term"] == nil {
				t.Errorf("raft entry line %s", line)
			}
		}
	}
	if n != 3 {
		t.Errorf("%d raftEntry JSON lines", n)
	}

	// A .raftindex given as PATH.
	code, stdout, _ = run(t, filepath.Join(dir, segment.MakeFileName(0, segment.KindRaftIndex)))
	if code != ExitOK || !strings.Contains(stdout, "first index: 1 prevTerm: 0") || !strings.Contains(stdout, "entry: 0 raftIndex: 1 position: 0 internal: true") {
		t.Errorf("raft index dump: exit %d\n%s", code, stdout)
	}
}
