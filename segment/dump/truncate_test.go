package dump

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// truncateTestLog writes a log of 4 segments of 2 batches of 2 records
// (segment k starts at offset 4k) in <tmp>/t-0, closes it and tears the
// second batch of the segment at offset 4.
func truncateTestLog(t *testing.T) (dir string, cfg segment.Config) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "t-0")
	cfg = segment.DefaultConfig()
	mk := func() []byte {
		return batch.Build(batch.NewBuildOptions(), []batch.Record{{Value: []byte("v0")}, {Value: []byte("v1")}})
	}
	cfg.SegmentBytes = int64(2 * len(mk()))
	l, err := segment.Open(vfs.Default, dir, cfg, segment.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for range 8 {
		if _, err := l.Append(mk()); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, segment.MakeFileName(4, segment.KindLog))
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()-3); err != nil {
		t.Fatal(err)
	}
	return dir, cfg
}

// sluice-dump truncate: a dry run prints the plan and changes nothing;
// --yes cuts at the damage and removes the later segments, and the log
// opens undamaged; a held .lock (a running broker) is refused.
func TestTruncateCommand(t *testing.T) {
	dir, cfg := truncateTestLog(t)
	l, err := segment.Open(vfs.Default, dir, cfg, segment.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	d := l.Damage()
	l.Close()
	if d == nil || d.Offset != 6 {
		t.Fatalf("damage %+v", d)
	}
	var out, errb bytes.Buffer
	if code := Main([]string{"truncate", "--at", "6", dir}, &out, &errb); code != ExitOK {
		t.Fatalf("dry run: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "would remove") || !strings.Contains(out.String(), "--yes") {
		t.Fatalf("dry run output:\n%s", out.String())
	}
	if n, _ := filepath.Glob(filepath.Join(dir, "*.log")); len(n) != 4 {
		t.Fatalf("dry run left %d segments", len(n))
	}

	lock, err := vfs.Default.Lock(filepath.Join(filepath.Dir(dir), ".lock"))
	if err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := Main([]string{"truncate", "--at", "6", "--yes", dir}, &out, &errb); code != ExitProblem || !strings.Contains(errb.String(), "broker running") {
		t.Fatalf("with the lock held: exit %d: %s", code, errb.String())
	}
	lock.Close()

	out.Reset()
	if code := Main([]string{"truncate", "--at", "6", "--yes", dir}, &out, &errb); code != ExitOK {
		t.Fatalf("truncate: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "damaged batch") || !strings.Contains(out.String(), "ending at offset 6") {
		t.Fatalf("output:\n%s", out.String())
	}
	if n, _ := filepath.Glob(filepath.Join(dir, "*.log")); len(n) != 2 {
		t.Fatalf("%d segments after the repair, want 2", len(n))
	}
	l, err = segment.Open(vfs.Default, dir, cfg, segment.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Damage() != nil || l.LogEndOffset() != 6 {
		t.Fatalf("after the repair: damage %v, log end %d", l.Damage(), l.LogEndOffset())
	}
	if code := Main([]string{"truncate", dir}, &out, &errb); code != ExitUsage {
		t.Fatalf("without --at: exit %d", code)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
