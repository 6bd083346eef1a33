package server

// Produce, versions 3-13 served; v0-v2 listed in ApiVersions but a request
// at one closes the connection, as Kafka 4 does (KAFKA-18659: librdkafka
// 2.x disables compression against a broker that does not list Produce
// v0; Kafka's SocketServer refuses versions below the oldest it serves
// before any API sees them). v3 is the first with record batches (magic 2) and
// transactional ids; v5 returns the log start offset; v8 returns
// per-record errors; v9 is flexible; v10 adds the current-leader hint of a
// NOT_LEADER_OR_FOLLOWER answer (KIP-951); v13 names topics by ID. acks=0
// gets no response. acks=all waits at most the request's TimeoutMillis
// from the end of the appends (Kafka's DelayedProduce): a partition not
// acknowledged by then answers REQUEST_TIMED_OUT (its batch may still
// commit). A timeout of 0 or less sets no bound (Kafka expires such a
// request at once).
//
// Kafka's LogValidator rules (one batch per partition, no control or
// delete-horizon bits from clients, max.message.bytes, keys on compacted
// topics, recompression, LogAppendTime) are the partition's
// (replica.Partition.Produce); this file only finds the partitions and
// fills in the answer.

import (
	"context"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/replica"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 0, minVersion: 3, maxVersion: 13, listedFromV0: true, stage: stageProduce})
}

// produced is one partition of a produce request once appended: the
// answer to fill in when its commit completes.
type produced struct {
	topic   string
	part    *replica.Partition
	pending *replica.Pending
	sp      *kmsg.ProduceResponseTopicPartition
	version int16
}

// stageProduce appends every partition of req (phase one: validation and
// the appends, done when it returns, so a later request's appends come
// after this one's) and returns the function that waits for their commits
// and returns the response (phase two; nil for acks=0). A connection
// pipelines produce requests this way (conn.go): phase two of several
// overlaps, phase one runs one request after the other, in request order,
// so an idempotent producer's batches to a partition arrive in sequence
// order.
func stageProduce(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (func() (kmsg.Response, error), error) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	refuse := func(code int16, msg string) {
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = code
				if msg != "" {
					sp.ErrorMessage = kmsg.StringPtr(msg)
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		refuse(kerr.InvalidRequiredAcks.Code, "")
		return ready(resp), nil
	}
	// Kafka's KafkaApis.handleProduceRequest: transactional batches need
	// WRITE on the transactional id, or the whole request fails.
	if hasTransactionalRecords(req) && (req.TransactionID == nil ||
		!b.authorized(cc, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, *req.TransactionID)) {
		refuse(kerr.TransactionalIDAuthorizationFailed.Code, "")
		return ready(resp), nil
	}
	writable := b.authorizer(cc, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic)
	// Partitions are validated and appended concurrently (validation
	// decompresses, recompression compresses); their commits are waited
	// for together.
	var (
		wg       sync.WaitGroup
		outs     []*produced
		panicked atomic.Pointer[panicError] // closes the connection only
	)
	unverified, guards := b.verifyProduce(ctx, req, writable)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		name := rt.Topic
		_, ok := b.meta.Topic(name)
		if req.Version >= 13 {
			var t meta.Topic
			t, ok = b.meta.TopicByID(rt.TopicID)
			name = t.Name
		}
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			sp := &st.Partitions[i]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			var part *replica.Partition
			pok := false
			if ok || req.Version < 13 {
				// Checked before existence: a topic the principal may
				// not write looks the same whether it exists or not.
				if !writable(name) {
					sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
					continue
				}
			}
			if ok {
				part, pok = b.partition(name, rp.Partition)
			}
			if !pok {
				sp.ErrorCode = b.missingPartitionCode(name, rp.Partition)
				if req.Version >= 13 && !ok {
					sp.ErrorCode = kerr.UnknownTopicID.Code
				}
				continue
			}
			if code, failed := unverified[topicPartition{name, rp.Partition}]; failed {
				sp.ErrorCode = code // txn_verify.go
				continue
			}
			out := &produced{topic: name, part: part, sp: sp, version: req.Version}
			outs = append(outs, out)
			wg.Add(1)
			go func(records []byte) {
				defer wg.Done()
				defer func() {
					if r := recover(); r != nil {
						panicked.CompareAndSwap(nil, &panicError{value: r, stack: debug.Stack()})
					}
				}()
				pd, err := part.ProduceWith(records, replica.ProduceOptions{
					Acks:      req.Acks,
					VerifyTxn: b.cfg.TransactionPartitionVerificationEnable && req.TransactionID != nil && *req.TransactionID != "",
					Guard:     guards[topicPartition{name, rp.Partition}],
				})
				if err != nil {
					b.produceFailed(out, err)
					return
				}
				b.metrics.bytesIn(name, len(records))
				out.pending = pd
			}(rp.Records)
		}
		resp.Topics = append(resp.Topics, st)
	}
	wg.Wait()
	if p := panicked.Load(); p != nil {
		return nil, p
	}
	var deadline time.Time
	if req.Acks == -1 && req.TimeoutMillis > 0 {
		deadline = time.Now().Add(time.Duration(req.TimeoutMillis) * time.Millisecond)
	}
	return func() (kmsg.Response, error) {
		wctx := ctx
		if !deadline.IsZero() {
			var cancel context.CancelFunc
			wctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
		for _, out := range outs {
			if out.pending == nil {
				continue
			}
			res, err := out.pending.Wait(wctx)
			if err != nil && ctx.Err() != nil {
				// The connection is closing: no answer goes out (the
				// commit completes without us).
				return nil, err
			}
			if err != nil && wctx.Err() != nil {
				err = kafkaErrorf(kerr.RequestTimedOut, "partition %s-%d: acks=all not satisfied within the request's %d ms (min.insync.replicas=%d, in sync %v); the batch may still be committed",
					out.topic, out.sp.Partition, req.TimeoutMillis, out.part.Config().MinInsyncReplicas, out.part.ISR())
			}
			if err != nil {
				b.produceFailed(out, err)
				continue
			}
			out.sp.BaseOffset, out.sp.LogAppendTime = res.BaseOffset, res.LogAppendTime
			out.sp.LogStartOffset = out.part.LogStartOffset()
		}
		if req.Acks == 0 {
			return nil, nil
		}
		if req.Version >= 10 {
			var ids []int32
			for _, st := range resp.Topics {
				for _, sp := range st.Partitions {
					if sp.ErrorCode == kerr.NotLeaderForPartition.Code {
						ids = append(ids, sp.CurrentLeader.LeaderID)
					}
				}
			}
			for _, e := range b.leaderEndpoints(ids, connListener(cc)) {
				rb := kmsg.NewProduceResponseBroker()
				rb.NodeID, rb.Host, rb.Port, rb.Rack = e.id, e.host, e.port, e.rack
				resp.Brokers = append(resp.Brokers, rb)
			}
		}
		return resp, nil
	}, nil
}

// hasTransactionalRecords reports whether a partition's records of req
// start with a transactional batch (Kafka's
// RequestUtils.hasTransactionalRecords; a request's batches are all
// transactional or none).
func hasTransactionalRecords(req *kmsg.ProduceRequest) bool {
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if h, err := batch.ParseHeader(rp.Records); err == nil && h.Transactional() {
				return true
			}
		}
	}
	return false
}

// produceFailed puts err into a partition's answer.
func (b *Broker) produceFailed(out *produced, err error) {
	if ferr := out.part.Failed(); ferr != nil {
		// The log's writes failed (an IO error, a full disk): raft's
		// storage failure takes the group off the host, so the append
		// reads as a lost leadership; the cause is this replica's log
		// dir, KAFKA_STORAGE_ERROR as Kafka's offline log dir answers
		// until the reconciler reopens it (faults.go).
		err = kafkaErrorf(kerr.KafkaStorageError, "partition %s-%d: its log failed: %v", out.topic, out.sp.Partition, ferr)
	}
	out.sp.ErrorCode = kafkaCode(err)
	out.sp.ErrorMessage = errMessage(err)
	out.sp.LogStartOffset = out.part.LogStartOffset()
	if out.sp.ErrorCode == kerr.NotLeaderForPartition.Code && out.version >= 10 {
		// KIP-951: the leader this replica knows, so the client need not
		// wait for a metadata refresh; its endpoint goes into the
		// response's NodeEndpoints.
		if id, epoch, ok := currentLeader(err); ok {
			out.sp.CurrentLeader.LeaderID, out.sp.CurrentLeader.LeaderEpoch = id, epoch
		}
	}
	if out.sp.ErrorCode == kerr.KafkaStorageError.Code {
		// Clients retry these every ~100 ms: one line per interval.
		b.produceErrs.note("topic", out.topic, "partition", out.sp.Partition, "err", err)
	}
}
