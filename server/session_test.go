package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-227: a session's incremental fetches answer only partitions with
// something new; wrong epochs and unknown sessions are refused.
func TestFetchSessions(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	topic, err := b.createTopic("sess", 2, 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, addr, kgo.DefaultProduceTopic("sess"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	fetch := func(id, epoch int32, withParts bool, offsets ...int64) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes, req.MinBytes, req.MaxWaitMillis = -1, 1<<20, 0, 0
		req.SessionID, req.SessionEpoch = id, epoch
		if withParts {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = "sess", topic.ID
			for p, off := range offsets {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = int32(p), off, 1<<20, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	count := func(resp *kmsg.FetchResponse) int {
		n := 0
		for _, t := range resp.Topics {
			n += len(t.Partitions)
		}
		return n
	}
	full := fetch(0, 0, true, 0, 0)
	if full.SessionID == 0 || count(full) != 2 {
		t.Fatalf("new session: id %d, %d partitions", full.SessionID, count(full))
	}
	if inc := fetch(full.SessionID, 1, false); inc.ErrorCode != 0 || count(inc) != 0 {
		t.Fatalf("incremental with nothing new: code %d, %d partitions", inc.ErrorCode, count(inc))
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	inc := fetch(full.SessionID, 2, false)
	if count(inc) != 1 || inc.Topics[0].Partitions[0].Partition != 1 || len(inc.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Fatalf("incremental after a produce: %+v", inc.Topics)
	}
	if bad := fetch(full.SessionID, 7, false); bad.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("wrong epoch: code %d", bad.ErrorCode)
	}
	if bad := fetch(12345, 1, false); bad.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: code %d", bad.ErrorCode)
	}
}
