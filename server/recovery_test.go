package server

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kgo"
)

// After an unclean shutdown a broker that recovers many partitions logs
// one line for them all (count, bytes, time), not one per partition.
func TestRecoveryLogsOneSummaryLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg, err := config.Load("", []string{"listeners=PLAINTEXT://127.0.0.1:0", "log.dirs=" + dir, "num.partitions=6"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	awaitServing(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newClient(t, b.Addr().String(), kgo.DefaultProduceTopic("many"), kgo.AllowAutoTopicCreation(), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i := range 12 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	b.Close()
	// No checkpoint: each log recovers as after a crash.
	var removed int
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == segment.CheckpointName && strings.Contains(p, "many-") {
			removed++
			return os.Remove(p)
		}
		return nil
	})
	if removed != 6 {
		t.Fatalf("removed %d checkpoints, want 6", removed)
	}
	var logs logBuffer
	b, err = New(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if got := logs.lines("segment: recovered"); len(got) != 0 {
		t.Errorf("per-partition lines:\n%s", strings.Join(got, "\n"))
	}
	got := logs.lines("sluice: recovered logs after an unclean shutdown")
	if len(got) != 1 || !strings.Contains(got[0], "partitions=6 ") || !strings.Contains(got[0], "took=") {
		t.Errorf("summary lines %q, want one with partitions=6", got)
	}
}
