package server

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
	"github.com/sluicemq/sluice/segment/vfs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A partition whose log cannot be opened does not stop the broker: the
// other partitions serve, the broken one has no leader in Metadata
// (LEADER_NOT_AVAILABLE) and answers Produce, Fetch and ListOffsets with
// KAFKA_STORAGE_ERROR (an offline log dir, as Kafka's
// ReplicaManager.getPartitionOrError), and once the fault clears the
// reconciler's retry opens it.
func TestReconcilerRetriesFailedOpen(t *testing.T) {
	t.Parallel()
	mem := vfs.NewMem()
	mfs := pebblevfs.NewMem()
	b := crashBroker(t, mem, mfs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b.Addr().String()))
	for _, name := range []string{"good", "bad"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()

	var broken atomic.Bool
	broken.Store(true)
	bad := filepath.Join("/data", "bad-0")
	fs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if broken.Load() && op == vfs.OpList && strings.HasPrefix(path, bad) {
			return vfs.ErrInjected
		}
		return nil
	}))
	b = crashBroker(t, fs, mfs)
	defer b.Close()
	addr := b.Addr().String()
	cl := newClient(t, addr)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "good", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("the healthy partition: %v", err)
	}
	md, err := kadm.NewClient(newClient(t, addr)).Metadata(ctx, "bad")
	if err != nil {
		t.Fatal(err)
	}
	if p := md.Topics["bad"].Partitions[0]; !errors.Is(p.Err, kerr.LeaderNotAvailable) {
		t.Fatalf("the broken partition's metadata: %+v", p)
	}
	rc := dialRaw(t, addr)
	if got := partitionCodes(rc, "bad", 0); got != (codes{kerr.KafkaStorageError, kerr.KafkaStorageError, kerr.KafkaStorageError}) {
		t.Fatalf("the broken partition answers %v, want KAFKA_STORAGE_ERROR", got)
	}
	broken.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := b.partition("bad", 0); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the partition was not opened once the fault cleared")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "bad", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("the recovered partition: %v", err)
	}
}

// partialRemoveFS models os.RemoveAll interrupted by a power loss, on a
// real disk: it unlinks a folder's entries one at a time in directory
// order, so partition.metadata may be gone, durably, while the segment
// files are still there. When armed, RemoveAll of a folder holding
// partition.metadata removes only that file (synced) and fails. Open of
// failOpen fails while failOpen is set.
type partialRemoveFS struct {
	vfs.FS
	armed    atomic.Bool
	failOpen atomic.Pointer[string]
}

func (fs *partialRemoveFS) RemoveAll(name string) error {
	pm := filepath.Join(name, partitionMetadataName)
	if _, err := fs.FS.Stat(pm); err == nil && fs.armed.Load() {
		if err := fs.FS.Remove(pm); err != nil {
			return err
		}
		if err := fs.FS.SyncDir(name); err != nil {
			return err
		}
		return vfs.ErrInjected
	}
	return fs.FS.RemoveAll(name)
}

func (fs *partialRemoveFS) Open(name string) (vfs.File, error) {
	if p := fs.failOpen.Load(); p != nil && *p == name {
		return nil, vfs.ErrInjected
	}
	return fs.FS.Open(name)
}

// A topic deleted and recreated under the same name never sees the old
// topic's records, even when the old folder's removal was cut short after
// partition.metadata went but before the segment files did, and the broker
// restarts before the new topic's partition was opened.
func TestRecreatedTopicIgnoresPartlyRemovedFolder(t *testing.T) {
	t.Parallel()
	mem := vfs.NewMem()
	mfs := pebblevfs.NewMem()
	fs := &partialRemoveFS{FS: mem}
	b := crashBroker(t, fs, mfs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := b.Addr().String()
	adm := kadm.NewClient(newClient(t, addr))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	if err := newClient(t, addr).ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("old")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs.armed.Store(true)
	if _, err := adm.DeleteTopics(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	// The recreated topic's partition does not open before the restart.
	pm := filepath.Join("/data", "t-0", partitionMetadataName)
	fs.failOpen.Store(&pm)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	b.Close()

	b = crashBroker(t, mem, mfs)
	defer b.Close()
	part, ok := b.partition("t", 0)
	if !ok {
		t.Fatal("the recreated topic's partition is not open")
	}
	if leo := part.LogEndOffset(); leo != 0 {
		t.Fatalf("the recreated topic holds %d records of the deleted one", leo)
	}
	names, err := mem.List("/data")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if strings.HasSuffix(name, deleteDirSuffix) {
			t.Errorf("start-up left the cut-short removal %s", name)
		}
	}
}
