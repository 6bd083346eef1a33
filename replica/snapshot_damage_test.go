package replica

import (
	"slices"
	"testing"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/vfs"
)

// Opening a damaged log (a segment cut short in the middle) changes
// nothing on disk: the producer snapshots above the damage stay, for when
// the operator restores the file (they were removed as "past the log
// end", and Close wrote one at the damage).
func TestDamagedOpenKeepsSnapshots(t *testing.T) {
	fs := vfs.NewMem()
	cfg := smallSegments()
	p := openAt(t, fs, cfg, Options{})
	for i := 0; i < 12; i++ {
		if _, err := produce(t, p, idemBatch(7, 0, int32(i), 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	before := snapshotFiles(t, fs)
	// Truncate the second segment: damage in the middle of a clean log.
	names, _ := fs.List(snapDir)
	var logs []string
	for _, n := range names {
		if f, ok := segment.ParseFileName(n); ok && f.Kind == segment.KindLog {
			logs = append(logs, n)
		}
	}
	f, err := fs.OpenReadWrite(snapDir + "/" + logs[1])
	if err != nil {
		t.Fatal(err)
	}
	sz, _ := f.Size()
	f.Truncate(sz - 10)
	f.Close()
	// Its raft group's saved applied index lies past the damage: the
	// group cannot start on it, and Open fails, after loading the
	// producer state, which must not have touched the snapshots.
	if p, err := openVoter(t, fs, snapDir, cfg, Options{}, 0); err == nil {
		p.Close()
		t.Fatal("opened a damaged log whose group applied entries past the damage")
	}
	if after := snapshotFiles(t, fs); !slices.Equal(after, before) {
		t.Errorf("opening the damaged log changed its snapshots: %v -> %v", before, after)
	}
	// Without that group state (a log written before its replica ran on
	// raft) it opens, damaged.
	if err := fs.Remove(snapDir + ".raftstate"); err != nil {
		t.Fatal(err)
	}
	p = openAt(t, fs, cfg, Options{})
	if p.Failed() == nil {
		t.Fatal("the cut segment did not damage the log")
	}
	p.Close()
	if after := snapshotFiles(t, fs); !slices.Equal(after, before) {
		t.Errorf("opening the damaged log changed its snapshots: %v -> %v", before, after)
	}
}
