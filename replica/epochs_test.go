package replica

import (
	"testing"

	"github.com/sluicemq/sluice/segment/vfs"
)

// The cases follow Kafka's LeaderEpochFileCacheTest.
func TestEpochCacheEndOffsetFor(t *testing.T) {
	var c epochCache
	if e, o := c.endOffsetFor(0, 10); e != -1 || o != -1 {
		t.Fatalf("empty cache: %d %d, want -1 -1", e, o)
	}
	c.assign(2, 6)
	c.assign(3, 8)
	c.assign(5, 12)
	for _, tc := range []struct {
		req   int32
		epoch int32
		end   int64
		leo   int64
		name  string
	}{
		{req: 5, epoch: 5, end: 20, leo: 20, name: "latest epoch ends at the log end offset"},
		{req: 3, epoch: 3, end: 12, leo: 20, name: "a known epoch ends where the next starts"},
		{req: 4, epoch: 3, end: 12, leo: 20, name: "an epoch without records answers the one before it"},
		{req: 1, epoch: 1, end: 6, leo: 20, name: "older than every epoch: the first start"},
		{req: 6, epoch: -1, end: -1, leo: 20, name: "a future epoch is undefined"},
		{req: -1, epoch: -1, end: -1, leo: 20, name: "no epoch"},
	} {
		if e, o := c.endOffsetFor(tc.req, tc.leo); e != tc.epoch || o != tc.end {
			t.Errorf("%s: endOffsetFor(%d) = %d %d, want %d %d", tc.name, tc.req, e, o, tc.epoch, tc.end)
		}
	}
	if got := c.epochOf(7); got != 2 {
		t.Errorf("epochOf(7) = %d, want 2", got)
	}
	if got := c.epochOf(12); got != 5 {
		t.Errorf("epochOf(12) = %d, want 5", got)
	}
}

func TestEpochCacheAssignAndTruncate(t *testing.T) {
	var c epochCache
	if !c.assign(1, 0) || c.assign(1, 5) || c.assign(0, 9) {
		t.Fatal("only a newer epoch is assigned")
	}
	// An epoch whose leader wrote no record (only its own zero-offset
	// entry) is replaced by the next one starting at the same offset.
	c.assign(2, 10)
	c.assign(3, 10)
	if len(c.entries) != 2 || c.entries[1] != (epochEntry{3, 10}) {
		t.Fatalf("entries %v, want [{1 0} {3 10}]", c.entries)
	}
	c.assign(4, 20)
	if !c.truncateFromEnd(15) || c.latest() != 3 {
		t.Fatalf("truncateFromEnd(15): %v", c.entries)
	}
	c.assign(6, 15)
	if !c.truncateFromStart(12) || c.entries[0] != (epochEntry{3, 12}) {
		t.Fatalf("truncateFromStart(12): %v", c.entries)
	}
	if !c.truncateFromStart(30) || len(c.entries) != 1 || c.entries[0] != (epochEntry{6, 30}) {
		t.Fatalf("truncateFromStart(30): %v", c.entries)
	}
}

func TestEpochFileRoundTrip(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("p", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := readEpochFile(fs, "p"); ok || err != nil {
		t.Fatalf("no file: ok=%v err=%v", ok, err)
	}
	var c epochCache
	c.assign(0, 0)
	c.assign(3, 120)
	if err := writeEpochFile(fs, "p", &c); err != nil {
		t.Fatal(err)
	}
	got, ok, err := readEpochFile(fs, "p")
	if !ok || err != nil || len(got) != 2 || got[1] != (epochEntry{3, 120}) {
		t.Fatalf("read back %v ok=%v err=%v", got, ok, err)
	}
	for _, bad := range []string{"", "1\n0\n", "0\n2\n0 0\n", "0\n2\n3 5\n1 9\n", "0\n1\nx y\n"} {
		if _, err := decodeEpochs([]byte(bad)); err == nil {
			t.Errorf("decodeEpochs(%q) accepted", bad)
		}
	}
}
