package server

// Produce, versions 3-13. v3 is the first with record batches (magic 2)
// and transactional ids; v5 returns the log start offset; v8 returns
// per-record errors; v9 is flexible; v13 names topics by ID. acks=0 gets
// no response.

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sluicemq/sluice/replica"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 0, minVersion: 3, maxVersion: 13, stage: stageProduce})
}

// stageProduce is a produce in two phases, so that a connection can
// pipeline them (conn.go). The first, before it returns, validates and
// appends every partition's batch: the connection's next produce starts
// appending only after this one has, so an idempotent producer's batches
// to one partition arrive in sequence order. The second, started here and
// awaited by finish, waits for each partition's commit (its group-commit
// fsync), one goroutine per partition so the fsyncs of different logs
// overlap, and those of several requests of the connection too.
func stageProduce(ctx context.Context, b *Broker, _ *clientConn, kreq kmsg.Request) (func() (kmsg.Response, error), error) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.InvalidRequiredAcks.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return func() (kmsg.Response, error) { return resp, nil }, nil
	}
	var (
		commits  sync.WaitGroup
		panicked atomic.Pointer[panicError] // a commit goroutine's panic
	)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		name := rt.Topic
		t, ok := b.meta.Topic(name)
		if req.Version >= 13 {
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
			if ok {
				part, pok = b.partition(name, rp.Partition)
			}
			if pok && name == offsetsTopic {
				// Only the group coordinator writes there (Kafka's rule).
				sp.ErrorCode = kerr.InvalidTopicException.Code
				sp.ErrorMessage = kmsg.StringPtr("Cannot append to internal topic " + offsetsTopic)
				continue
			}
			if !pok {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				if req.Version >= 13 && !ok {
					sp.ErrorCode = kerr.UnknownTopicID.Code
				}
				continue
			}
			fail := func(err error) {
				sp.BaseOffset, sp.LogAppendTime = -1, -1
				sp.ErrorCode = kafkaCode(err)
				sp.ErrorMessage = errMessage(err)
				if sp.ErrorCode == kerr.KafkaStorageError.Code {
					b.logger.Error("sluice: produce failed", "topic", name, "partition", sp.Partition, "err", err)
				}
				sp.LogStartOffset = part.LogStartOffset()
			}
			commit, err := b.appendOne(part, t.Configs, rp.Records, sp)
			if err != nil {
				fail(err)
				continue
			}
			commits.Add(1)
			go func() {
				defer commits.Done()
				defer func() {
					if r := recover(); r != nil {
						panicked.CompareAndSwap(nil, &panicError{value: r, stack: debug.Stack()})
					}
				}()
				produceCommitHook()
				if err := commit(); err != nil {
					fail(err)
					return
				}
				sp.LogStartOffset = part.LogStartOffset()
			}()
		}
		resp.Topics = append(resp.Topics, st)
	}
	return func() (kmsg.Response, error) {
		commits.Wait()
		if p := panicked.Load(); p != nil {
			return nil, p
		}
		if req.Acks == 0 {
			return nil, nil
		}
		return resp, nil
	}, nil
}

// produceCommitHook runs as each partition's commit starts waiting (tests
// count them).
var produceCommitHook = func() {}

// codecs maps compression.type values to codecs ("producer" is absent).
var codecs = map[string]batch.Codec{
	"uncompressed": batch.CodecNone, "gzip": batch.CodecGzip, "snappy": batch.CodecSnappy,
	"lz4": batch.CodecLZ4, "zstd": batch.CodecZstd,
}

// appendOne validates and appends one partition's records (exactly one
// record batch of magic 2: Kafka refuses more than one per partition) and
// returns the wait for their commit.
func (b *Broker) appendOne(part *replica.Partition, configs map[string]string, records []byte, sp *kmsg.ProduceResponseTopicPartition) (commit func() error, err error) {
	if len(records) < batch.HeaderSize {
		return nil, kafkaErrorf(kerr.CorruptMessage, "records of %d bytes hold no record batch", len(records))
	}
	h, err := batch.ParseHeader(records)
	if err != nil {
		return nil, kafkaErrorf(kerr.UnsupportedForMessageFormat, "%v", err)
	}
	if h.Size() != len(records) {
		return nil, kafkaErrorf(kerr.InvalidRecord, "records hold %d bytes, the first batch %d: one batch per partition", len(records), h.Size())
	}
	switch {
	case h.Control():
		// Control records (transaction markers, raft's own entries)
		// come from the broker, never from clients (Kafka's rule).
		return nil, kafkaErrorf(kerr.InvalidRecord, "Clients are not allowed to write control records")
	case h.Attributes&batch.DeleteHorizonBit != 0:
		// The delete horizon (KIP-534) is the log cleaner's mark: from a
		// client it could make a tombstone expire at once.
		return nil, kafkaErrorf(kerr.InvalidRecord, "the delete horizon attribute is set by the log cleaner, not by clients")
	}
	maxBytes, _ := strconv.Atoi(b.topicConfigValue(configs, "max.message.bytes"))
	if len(records) > maxBytes {
		return nil, kafkaErrorf(kerr.MessageTooLarge, "batch of %d bytes exceeds max.message.bytes=%d", len(records), maxBytes)
	}
	if strings.Contains(b.topicConfigValue(configs, "cleanup.policy"), "compact") {
		if err := checkKeys(records); err != nil {
			return nil, err
		}
	}
	if codec, ok := codecs[b.topicConfigValue(configs, "compression.type")]; ok && h.Codec() != codec {
		// A topic whose compression.type names a codec stores batches
		// with it; "producer" keeps what the producer sent. The log
		// validates the recompressed batch (records included) on append.
		if records, err = batch.Recompress(records, codec); err != nil {
			return nil, err
		}
	}
	lat := b.topicConfigValue(configs, "message.timestamp.type") == "LogAppendTime"
	res, commit, err := part.AppendNoWait(records, replica.AppendOptions{LogAppendTime: lat})
	if err != nil {
		return nil, fmt.Errorf("append: %w", err)
	}
	sp.BaseOffset = res.BaseOffset
	sp.LogAppendTime = res.LogAppendTime
	return commit, nil
}

// errNoKey stops checkKeys at the first record without a key.
var errNoKey = errors.New("record without a key")

// checkKeys refuses a batch for a compacted topic that holds a record
// without a key, as Kafka's LogValidator does (INVALID_RECORD): compaction
// keeps the last record per key, so a keyless one has no meaning there.
func checkKeys(records []byte) error {
	_, err := batch.Iterate(records, func(r *batch.Record) error {
		if r.Key == nil {
			return errNoKey
		}
		return nil
	})
	switch {
	case errors.Is(err, errNoKey):
		return kafkaErrorf(kerr.InvalidRecord, "Compacted topic cannot accept message without key.")
	case err != nil:
		return kafkaErrorf(kerr.CorruptMessage, "%v", err)
	}
	return nil
}
