package server

// Fetch, versions 4-16. v4 is the first with record batches and the
// isolation level; v5 returns the log start offset; v7 adds fetch sessions
// (KIP-227); v11 the rack (preferred read replica); v12 is flexible; v13
// names topics by ID. Sluice answers every fetch in full and declines
// sessions (session id 0), which KIP-227 allows: clients then keep sending
// full fetch requests.

import (
	"context"
	"time"

	"github.com/sluicemq/sluice/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 1, minVersion: 4, maxVersion: 16, serve: serveFetch})
}

func serveFetch(ctx context.Context, b *Broker, _ *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FetchRequest)
	if req.SessionID != 0 || req.SessionEpoch > 0 {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp, nil
	}
	deadline := time.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	for {
		resp, bytes, waitOn := b.fetchOnce(req)
		if bytes >= int64(req.MinBytes) || req.MaxWaitMillis <= 0 || len(waitOn) == 0 {
			return resp, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return resp, nil
		}
		if !waitAny(ctx, waitOn, left) {
			// Timed out or shutting down: answer with what there is.
			resp, _, _ = b.fetchOnce(req)
			return resp, nil
		}
	}
}

// waitAny waits until one channel is closed (true) or the time is up or
// ctx is done (false).
func waitAny(ctx context.Context, chans []<-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	woke := make(chan struct{}, 1)
	stop := make(chan struct{})
	defer close(stop)
	for _, c := range chans {
		go func(c <-chan struct{}) {
			select {
			case <-c:
				select {
				case woke <- struct{}{}:
				default:
				}
			case <-stop:
			}
		}(c)
	}
	select {
	case <-woke:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// fetchOnce reads every requested partition once. It returns the response,
// the record bytes in it, and the channels that signal new data for the
// partitions that could have more.
func (b *Broker) fetchOnce(req *kmsg.FetchRequest) (*kmsg.FetchResponse, int64, []<-chan struct{}) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.SessionID = 0
	budget := int64(req.MaxBytes)
	if budget <= 0 {
		budget = 1 << 62
	}
	var total int64
	var waitOn []<-chan struct{}
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var (
			t  meta.Topic
			ok bool
		)
		if req.Version >= 13 {
			t, ok = b.meta.TopicByID(rt.TopicID)
		} else {
			t, ok = b.meta.Topic(rt.Topic)
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			sp.RecordBatches = []byte{}
			part, pok := b.partition(t.Name, rp.Partition)
			if !ok || !pok {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				if req.Version >= 13 && !ok {
					sp.ErrorCode = kerr.UnknownTopicID.Code
				}
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			changed := part.Changed() // before reading: no wake-up is missed
			hw := part.HighWatermark()
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = hw, hw, part.LogStartOffset()
			limit := min(int64(rp.PartitionMaxBytes), budget-total)
			if limit > 0 || total == 0 {
				res, err := part.Read(rp.FetchOffset, int(max(limit, 1)))
				switch {
				case err != nil:
					sp.ErrorCode = kafkaCode(err)
				case res.Bytes > 0:
					data, err := res.AppendTo(make([]byte, 0, res.Bytes))
					if err != nil {
						sp.ErrorCode = kerr.KafkaStorageError.Code
						b.logger.Error("sluice: fetch read failed", "topic", t.Name, "partition", rp.Partition, "err", err)
						break
					}
					sp.RecordBatches = data
					total += res.Bytes
				}
			}
			if sp.ErrorCode == 0 && rp.FetchOffset >= hw {
				waitOn = append(waitOn, changed)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, total, waitOn
}
