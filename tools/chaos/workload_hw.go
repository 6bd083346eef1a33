package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The high watermark reader, process "hw-reader" of the queue workload:
// every ~200 ms one OpHighWater, half the time a Fetch of one random
// partition sent to its leader as a fresh Metadata answer names it (the
// answer may come from a broker with a stale view, as a client's does),
// else a ListOffsets latest of every partition (kadm sends each to the
// leader the client's metadata names). The stale-read check compares
// what they return with the acknowledged sends.
//
// A consumer's polls cannot serve: kgo fetches ahead of PollFetches and
// buffers the answer, so a poll's high watermark may come from a request
// sent long before the poll was invoked.

type hwReader struct {
	cl    *kgo.Client
	adm   *kadm.Client
	topic string
	parts int32
}

func newHWReader(seeds []string, id, topic string, parts int32) (*hwReader, error) {
	cl, err := kgo.NewClient(clientOpts(seeds, id)...)
	if err != nil {
		return nil, err
	}
	return &hwReader{cl: cl, adm: kadm.NewClient(cl), topic: topic, parts: parts}, nil
}

func (r *hwReader) close() { r.cl.Close() }

// run records one read every ~interval until ctx ends.
func (r *hwReader) run(ctx context.Context, rec *Recorder, name string, rnd *rand.Rand, interval time.Duration) {
	base := Op{Process: name, Kind: OpHighWater, Topic: r.topic}
	for sleepCtx(ctx, jitter(rnd, interval)) {
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if rnd.IntN(2) == 0 {
			r.fetch(octx, rec, base, rnd.Int32N(r.parts))
		} else {
			op := base
			op.Via = ViaListOffsets
			id := rec.Invoke(op)
			hws, err := r.listOffsets(octx)
			completeHW(rec, id, hws, err)
		}
		cancel()
	}
}

// fetch records one Fetch of partition p from its leader: its
// HighWatermark. A partition whose leader is not known is no operation.
func (r *hwReader) fetch(ctx context.Context, rec *Recorder, base Op, p int32) {
	md, err := r.adm.Metadata(ctx, r.topic)
	if err != nil {
		return
	}
	td, ok := md.Topics[r.topic]
	pd, pok := td.Partitions[p]
	if !ok || !pok || pd.Leader < 0 {
		return
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, 1
	req.SessionID, req.SessionEpoch = 0, -1 // no fetch session
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = r.topic, td.ID
	rp := kmsg.NewFetchRequestTopicPartition()
	// From offset 0 with 1 byte: the first batch (KIP-74) and the
	// partition's high watermark.
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, 0, 1
	rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	op := base
	op.Via, op.Partition = ViaFetch, p
	id := rec.Invoke(op)
	resp, err := req.RequestWith(ctx, r.cl.Broker(int(pd.Leader)))
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	hws := map[int32]int64{}
	if err == nil {
		err = fmt.Errorf("partition %d missing from the Fetch response", p)
		for _, t := range resp.Topics {
			for _, fp := range t.Partitions {
				if fp.Partition != p || (t.Topic != r.topic && t.TopicID != td.ID) {
					continue
				}
				err = kerr.ErrorForCode(fp.ErrorCode)
				if err == nil && fp.HighWatermark >= 0 {
					hws[p] = fp.HighWatermark
				}
			}
		}
	}
	completeHW(rec, id, hws, err)
}

// listOffsets lists every partition's high watermark (ListOffsets
// latest, read uncommitted); partitions answered with an error (or whose
// leader's shard failed) are left out, and the first error is returned
// with the others.
func (r *hwReader) listOffsets(ctx context.Context) (map[int32]int64, error) {
	ls, first := r.adm.ListEndOffsets(ctx, r.topic) // with *kadm.ShardErrors, what the other shards answered
	hws := map[int32]int64{}
	for p, l := range ls[r.topic] {
		if l.Err != nil {
			first = cmp.Or(first, fmt.Errorf("partition %d: %w", p, l.Err))
			continue
		}
		hws[p] = l.Offset
	}
	return hws, first
}

// completeHW completes the read id: OK with the high watermarks read,
// when there are some (with the error of the partitions not read), else
// Fail.
func completeHW(rec *Recorder, id int, hws map[int32]int64, err error) {
	rec.Complete(id, func(op *Op) {
		op.Outcome = OK
		if len(hws) > 0 {
			op.Offsets = maps.Clone(hws)
		} else {
			op.Outcome = Fail
			if err == nil {
				err = errors.New("no partition answered")
			}
		}
		if err != nil {
			op.Err = err.Error()
		}
	})
}
