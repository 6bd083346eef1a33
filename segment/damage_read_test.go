package segment

import (
	"errors"
	"syscall"
	"testing"

	"github.com/sluicemq/sluice/segment/vfs"
)

// A bad batch length that recovery did not read (a segment it trusted
// after a clean stop) and that a read meets while looking up or stepping
// through the segment damages the log there: the read gets ErrDamaged,
// offsets below are still served, and later reads past it are refused as
// damage, not answered CORRUPT_MESSAGE forever with the partition healthy.
func TestBadLengthFoundByReadDamages(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig()
	b := mkBatch(2, 0, 20, "a")
	cfg.SegmentBytes = int64(10 * len(b))
	cfg.IndexIntervalBytes = 4 * len(b)
	l := openTest(t, mem, cfg, nil)
	for i := 0; i < 30; i++ {
		mustAppend(t, l, mkBatch(2, int64(i), 20, "a"))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := mem.OpenReadWrite("/p/topic-0/" + MakeFileName(0, KindLog))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0x00, 0x00, 0x00, 0x20}, int64(2*len(b))+8) // the third batch's length
	f.Close()
	l, err = Open(mem, "/p/topic-0", cfg, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// Offset 8 is found through an index entry past the damage at 4.
	if _, err := l.Read(8, 1<<20, NoUpperBound); !errors.Is(err, ErrDamaged) {
		t.Fatalf("read past the damage: %v, want ErrDamaged", err)
	}
	d := l.Damage()
	if d == nil || d.Offset != 4 {
		t.Fatalf("damage %v, want at offset 4", d)
	}
	res, err := l.Read(0, 1<<20, NoUpperBound)
	if err != nil || res.NextOffset != 4 {
		t.Fatalf("read below the damage: next %d, %v; want the 4 offsets below it", res.NextOffset, err)
	}
	res.Release()
}

// A read error during the first-read check is not damage: the read fails,
// the next one (the disk answering again) is served and checked, and the
// log stays writable.
func TestReadErrorDuringCheckIsNotDamage(t *testing.T) {
	mem, cfg := damagedLog(t, 3)
	var armed bool
	fs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if armed && op == vfs.OpRead {
			armed = false
			return syscall.EIO
		}
		return nil
	}))
	l, err := Open(fs, "/p/topic-0", cfg, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	res, checks, d, err := l.read(0, 1<<20, NoUpperBound)
	if err != nil || checks == nil || d != nil {
		t.Fatalf("read: %v %v %v", err, checks, d)
	}
	armed = true // one EIO, then the disk is fine again
	if err := l.verifyRanges(&res, checks); err == nil || errors.Is(err, ErrDamaged) {
		t.Fatalf("check with a failing read: %v, want the read error", err)
	}
	res.Release()
	res, err = l.Read(0, 1<<20, NoUpperBound)
	if err != nil || res.Bytes == 0 {
		t.Fatalf("read after a transient EIO: %d bytes, %v", res.Bytes, err)
	}
	res.Release()
	if _, err := l.Append(mkBatch(1, 0, 1, "x")); err != nil {
		t.Fatalf("append after a transient EIO: %v", err)
	}
	if d := l.Damage(); d != nil {
		t.Fatalf("intact log marked damaged by one EIO: %v", d)
	}
}
