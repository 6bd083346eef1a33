package server

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
	"github.com/sluicemq/sluice/segment/vfs"
	"github.com/sluicemq/sluice/server/config"
	"github.com/sluicemq/sluice/server/faultinject"
	"github.com/twmb/franz-go/pkg/kadm"
)

// A clustered broker whose metadata log cannot be written stops: Fatal
// receives (Kafka halts a broker whose metadata log dir fails, KIP-858),
// rather than serving metadata that no longer moves.
func TestClusterMetadataLogFailureIsFatal(t *testing.T) {
	t.Parallel()
	ports := freePorts(t, 2)
	cfg, err := config.Load("", []string{"metrics.listen=", "node.id=1", "log.dirs=/data", "process.roles=broker,controller",
		fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", ports[0], ports[1]),
		fmt.Sprintf("controller.quorum.voters=1@127.0.0.1:%d", ports[1]),
		"default.replication.factor=1", "offsets.topic.num.partitions=1"})
	if err != nil {
		t.Fatal(err)
	}
	f := faultinject.New()
	b, err := NewWithOptions(cfg, Options{FS: f.FS(vfs.NewMem()), MetaFS: f.MetaFS(pebblevfs.NewMem()),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		b.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	adm := kadm.NewClient(newClient(t, b.Addr().String()))
	eventually(t, 20*time.Second, "a topic created before the fault", func() error {
		_, err := adm.CreateTopic(t.Context(), 1, 1, nil, "before")
		return err
	})
	select {
	case err := <-b.Fatal():
		t.Fatalf("fatal before any fault: %v", err)
	default:
	}

	f.Set(faultinject.State{FailWrites: true})
	// A metadata write: the controller appends a TopicRecord to the
	// metadata log, which fails.
	go adm.CreateTopic(t.Context(), 1, 1, nil, "during") // its answer does not matter
	select {
	case err := <-b.Fatal():
		t.Logf("fatal: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the metadata log's writes failed and the broker did not stop within 20 s")
	}
}
