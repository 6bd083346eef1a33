package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetches leave OS-backed log bytes in the files (sendfile) and the client
// still reads the same records.
func TestFetchUsesFileRanges(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newClient(t, addr, kgo.DefaultProduceTopic("zc"), kgo.AllowAutoTopicCreation())
	for i := 0; i < 5; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("zero-copy")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	tp, _ := b.meta.Topic("zc")
	parts := []*fetchPartition{{topic: "zc", topicID: tp.ID, partition: 0, maxBytes: 1 << 20, lastHW: -2, lastLogStart: -2, leaderEpoch: -1}}
	var splices []splice
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 16
	n := b.fetchOnce(16, false, parts, 1<<20, resp, false, nil, &splices).bytes
	defer releaseSplices(splices)
	if n == 0 || len(splices) != 1 {
		t.Fatalf("fetched %d bytes, %d splices", n, len(splices))
	}
	if got := resp.Topics[0].Partitions[0].RecordBatches; len(got) != markerLen {
		t.Fatalf("records field holds %d bytes, want the %d-byte marker", len(got), markerLen)
	}
	recs := consumeN(t, ctx, addr, "zc", kgo.NewOffset().AtStart(), 5)
	for i, r := range recs {
		if r.Offset != int64(i) || string(r.Value) != "zero-copy" {
			t.Fatalf("record %d: offset %d value %q", i, r.Offset, r.Value)
		}
	}
}
