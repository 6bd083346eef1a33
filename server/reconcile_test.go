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
// other partitions serve, the broken one answers LEADER_NOT_AVAILABLE,
// and once the fault clears the reconciler's retry opens it.
func TestReconcilerRetriesFailedOpen(t *testing.T) {
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
