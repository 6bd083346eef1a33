package server

// Transactions (KIP-98, Kafka 4.x semantics, transaction.version 2
// finalized: KIP-890): the transaction coordinator's home and its APIs.
//
// The coordinator (coordinator.TxnCoordinator) keeps each transactional
// id's state in its partition of __transaction_state, an internal topic
// created on the first FindCoordinator of a transaction key
// (internal_topics.go); the broker that leads a partition loads it
// (coordinatorLoop, cluster_broker.go), like __consumer_offsets for the
// group coordinator. The coordinator writes its markers through
// markerWriter: to a partition this broker leads directly
// (writeMarkerHere), to others with WriteTxnMarkers to their leader, which
// writes the marker through the partition's raft group like any batch;
// a marker written to a __consumer_offsets partition also commits or drops
// the producer's pending transactional offsets in the group coordinator.
//
// APIs: InitProducerId with a transactional id (22_init_producer_id.go
// hands it over), AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn
// (26, v0-v5: v5 bumps the epoch at every end, transaction.version 2),
// WriteTxnMarkers (27), TxnOffsetCommit (28), DescribeProducers (61),
// DescribeTransactions (65), ListTransactions (66).

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sluicemq/sluice/coordinator"
	"github.com/sluicemq/sluice/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	txnAPI(24, 5, func(c *coordinator.TxnCoordinator, ctx context.Context, _ *Broker, req *kmsg.AddPartitionsToTxnRequest) kmsg.Response {
		return c.AddPartitionsToTxn(ctx, req)
	})
	txnAPI(25, 4, func(c *coordinator.TxnCoordinator, ctx context.Context, b *Broker, req *kmsg.AddOffsetsToTxnRequest) kmsg.Response {
		if err := b.ensureOffsetsTopic(); err != nil {
			resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			return resp
		}
		t, _ := b.meta.Topic(offsetsTopic)
		return c.AddOffsetsToTxn(ctx, req, coordinator.TxnPartition{Topic: offsetsTopic, Partition: coordinator.Partition(req.Group, t.Partitions)})
	})
	// EndTxn v5 is transaction.version 2's (an epoch bump at every end,
	// KIP-890 part 2).
	txnAPI(26, 5, func(c *coordinator.TxnCoordinator, ctx context.Context, _ *Broker, req *kmsg.EndTxnRequest) kmsg.Response {
		return c.EndTxn(ctx, req)
	})
	txnAPI(65, 0, func(c *coordinator.TxnCoordinator, ctx context.Context, _ *Broker, req *kmsg.DescribeTransactionsRequest) kmsg.Response {
		return c.DescribeTransactions(ctx, req)
	})
	txnAPI(66, 1, func(c *coordinator.TxnCoordinator, ctx context.Context, _ *Broker, req *kmsg.ListTransactionsRequest) kmsg.Response {
		return c.ListTransactions(ctx, req)
	})
	register(handler{key: 27, minVersion: 0, maxVersion: 2, serve: serveWriteTxnMarkers})
	register(handler{key: 28, minVersion: 0, maxVersion: 5, serve: checkTxnOffsetCommit})
	register(handler{key: 61, minVersion: 0, maxVersion: 0, serve: serveDescribeProducers})
}

// txnAPI registers an API whose whole answer comes from the transaction
// coordinator, once authorized (txnChecks).
func txnAPI[Req kmsg.Request](key, maxVersion int16, fn func(*coordinator.TxnCoordinator, context.Context, *Broker, Req) kmsg.Response) {
	register(handler{key: key, minVersion: 0, maxVersion: maxVersion,
		serve: func(ctx context.Context, b *Broker, cc *clientConn, req kmsg.Request) (kmsg.Response, error) {
			serve := func(req kmsg.Request) kmsg.Response { return fn(b.txn, ctx, b, req.(Req)) }
			if check := txnChecks[key]; check != nil && b.authz != nil && cc != nil {
				return check(b, cc, req, serve), nil // txn_authz.go
			}
			return serve(req), nil
		}})
}

// newTxnCoordinator builds the broker's transaction coordinator from its
// config.
func (b *Broker) newTxnCoordinator() *coordinator.TxnCoordinator {
	c := b.cfg
	partitions := c.TransactionStateLogNumPartitions
	if t, ok := b.meta.Topic(txnTopic); ok {
		// Transactional ids hash onto the topic as it is.
		partitions = t.Partitions
	}
	ms := func(n int32) time.Duration { return time.Duration(n) * time.Millisecond }
	return coordinator.NewTxn(coordinator.TxnConfig{
		Partitions:            partitions,
		MaxTimeout:            ms(c.TransactionMaxTimeoutMs),
		AbortTimedOutInterval: ms(c.TransactionAbortTimedOutTransactionCleanupIntervalMs),
		IDExpiration:          ms(c.TransactionalIDExpirationMs),
		RemoveExpiredInterval: ms(c.TransactionRemoveExpiredTransactionCleanupIntervalMs),
		Clock:                 brokerClock{b.now},
		Logger:                b.logger,
		ProducerIDs:           func() (int64, error) { return b.producerIDs.next(b.allocateProducerIDs) },
		Markers:               markerWriter{b},
		// The next transaction's AddPartitionsToTxn waits for the
		// previous one's markers (a few ms) instead of costing the client
		// its 20 ms back-off.
		ConcurrentWait: 100 * time.Millisecond,
		// A produce's (or TxnOffsetCommit's) add of a transaction.version
		// 2 client waits longer, within verifyTimeout: its retriable
		// answer would put the client's pipelined next batch out of
		// sequence (coordinator.TxnConfig.BrokerAddWait).
		BrokerAddWait: verifyTimeout / 2,
		PartitionExists: func(tp coordinator.TxnPartition) bool {
			t, ok := b.meta.Topic(tp.Topic)
			return ok && tp.Partition >= 0 && tp.Partition < t.Partitions
		},
	})
}

// markerWriter writes the transaction coordinator's markers to the
// partitions' leaders.
type markerWriter struct{ b *Broker }

// WriteMarkers writes m to parts: those this broker leads here, the
// others with one WriteTxnMarkers request per leader, all at once (each
// marker is its own partition's raft round and fsync; one after another
// they added up to most of a commit). A partition without
// a leader answers NOT_LEADER_OR_FOLLOWER (the coordinator retries it); a
// topic or partition that no longer exists, UNKNOWN_TOPIC_OR_PARTITION
// (the coordinator drops it, as Kafka's marker channel does).
func (w markerWriter) WriteMarkers(ctx context.Context, m coordinator.Marker, parts []coordinator.TxnPartition) map[coordinator.TxnPartition]error {
	b := w.b
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs = map[coordinator.TxnPartition]error{}
	)
	setErr := func(tp coordinator.TxnPartition, err error) {
		mu.Lock()
		errs[tp] = err
		mu.Unlock()
	}
	byLeader := map[int32][]coordinator.TxnPartition{}
	for _, tp := range parts {
		t, ok := b.meta.Topic(tp.Topic)
		if !ok || tp.Partition < 0 || tp.Partition >= t.Partitions {
			setErr(tp, kerr.UnknownTopicOrPartition)
			continue
		}
		v := b.partitionView(t, tp.Partition)
		switch {
		case v.leader < 0:
			setErr(tp, kerr.NotLeaderForPartition)
		case v.leader == b.cfg.NodeID:
			wg.Go(func() {
				if err := b.writeMarkerHere(ctx, tp.Topic, tp.Partition, m); err != nil {
					// As a remote leader would answer: the coordinator
					// tells fenced from retriable by the Kafka code.
					setErr(tp, kerr.ErrorForCode(kafkaCode(err)))
				}
			})
		default:
			byLeader[v.leader] = append(byLeader[v.leader], tp)
		}
	}
	for leader, tps := range byLeader {
		wg.Go(func() { w.writeRemote(ctx, leader, m, tps, setErr) })
	}
	wg.Wait()
	for tp, err := range errs {
		// Only this broker's metadata drops a partition (above): a leader
		// answering UNKNOWN_TOPIC_OR_PARTITION for one it has (its log
		// closing in a move, its metadata behind) is retried, as Kafka's
		// marker channel retries it.
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			if t, ok := b.meta.Topic(tp.Topic); ok && tp.Partition >= 0 && tp.Partition < t.Partitions {
				errs[tp] = kerr.NotLeaderForPartition
			}
		}
	}
	return errs
}

// writeRemote sends one WriteTxnMarkers request with m for tps to their
// leader and reports each partition's error with setErr. The request
// carries the transaction's version (KIP-1228): the peer client sends the
// highest version both ends support, v2 to a leader that lists it, else
// v1, which has no TransactionVersion field (kmsg leaves it out), as
// Kafka's coordinator always sets it and lets the version decide.
func (w markerWriter) writeRemote(ctx context.Context, leader int32, m coordinator.Marker, tps []coordinator.TxnPartition, setErr func(coordinator.TxnPartition, error)) {
	b := w.b
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	rm := kmsg.NewWriteTxnMarkersRequestMarker()
	rm.ProducerID, rm.ProducerEpoch, rm.Committed, rm.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
	rm.TransactionVersion = int8(m.TransactionVersion)
	byTopic := map[string]int{}
	for _, tp := range tps {
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(rm.Topics)
			byTopic[tp.Topic] = i
			rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			rt.Topic = tp.Topic
			rm.Topics = append(rm.Topics, rt)
		}
		rm.Topics[i].Partitions = append(rm.Topics[i].Partitions, tp.Partition)
	}
	req.Markers = append(req.Markers, rm)
	kresp, err := b.cl.brokers.request(ctx, leader, req)
	if err != nil {
		for _, tp := range tps {
			setErr(tp, kerr.NotLeaderForPartition) // unreachable: retried
		}
		return
	}
	resp := kresp.(*kmsg.WriteTxnMarkersResponse)
	answered := map[coordinator.TxnPartition]bool{}
	for _, rm := range resp.Markers {
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				tp := coordinator.TxnPartition{Topic: rt.Topic, Partition: rp.Partition}
				answered[tp] = true
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					setErr(tp, err)
				}
			}
		}
	}
	for _, tp := range tps {
		if !answered[tp] {
			setErr(tp, kerr.UnknownServerError)
		}
	}
}

// writeMarkerHere writes m to a partition this broker leads and, on a
// __consumer_offsets partition, completes the producer's transactional
// offsets in the group coordinator. Errors are kafkaErrors or the
// replica's (kafkaCode maps them).
func (b *Broker) writeMarkerHere(ctx context.Context, topic string, partition int32, m coordinator.Marker) error {
	part, ok := b.partition(topic, partition)
	if !ok {
		if _, known := b.meta.Topic(topic); known {
			return kafkaErrorf(kerr.NotLeaderForPartition, "partition %d of %s is not hosted here", partition, topic)
		}
		return kafkaErrorf(kerr.UnknownTopicOrPartition, "topic %s does not exist", topic)
	}
	if _, err := part.WriteTxnMarker(ctx, replica.TxnMarker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Commit,
		CoordinatorEpoch: m.CoordinatorEpoch, TransactionVersion: m.TransactionVersion}); err != nil {
		return err
	}
	if topic == offsetsTopic {
		b.coord.CompleteTxn(partition, m.ProducerID, m.Commit)
	}
	return nil
}

// WriteTxnMarkers, versions 0-2 (v1 is flexible; v2 adds each marker's
// TransactionVersion, KIP-1228, Kafka 4.2): from a transaction
// coordinator, the markers to write to partitions this broker leads. Each
// partition answers on its own: NOT_LEADER_OR_FOLLOWER,
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH,
// TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch than the
// producer's last marker's), as Kafka's ReplicaManager answers. INVALID_PRODUCER_EPOCH is the epoch rule of the
// marker's transaction version (replica.Partition.WriteTxnMarker): below
// 2 (and at v0-1, which do not say), an epoch older than the partition's
// producer state's; from 2 on (the coordinator bumped the epoch as it
// ended the transaction, KIP-890), an epoch not above it, except an equal
// one with no transaction ongoing, the same marker sent again (Kafka's
// ProducerAppendInfo.checkProducerEpoch, KIP-1228 and KAFKA-19999).
func serveWriteTxnMarkers(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	// Kafka's KafkaApis: ALTER or CLUSTER_ACTION on the cluster (a
	// transaction coordinator's request), else every partition answers
	// CLUSTER_AUTHORIZATION_FAILED.
	allowed := b.authorized(cc, kmsg.ACLOperationAlter, kmsg.ACLResourceTypeCluster, clusterResource) || b.clusterAction(cc)
	for _, rm := range req.Markers {
		m := coordinator.Marker{ProducerID: rm.ProducerID, ProducerEpoch: rm.ProducerEpoch, Commit: rm.Committed, CoordinatorEpoch: rm.CoordinatorEpoch}
		if req.Version >= 2 {
			m.TransactionVersion = int16(rm.TransactionVersion)
		}
		om := kmsg.NewWriteTxnMarkersResponseMarker()
		om.ProducerID = rm.ProducerID
		for _, rt := range rm.Topics {
			ot := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			ot.Topic = rt.Topic
			for _, p := range rt.Partitions {
				op := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				op.Partition = p
				op.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				if allowed {
					op.ErrorCode = kafkaCode(b.writeMarkerHere(ctx, rt.Topic, p, m))
				}
				ot.Partitions = append(ot.Partitions, op)
			}
			om.Topics = append(om.Topics, ot)
		}
		resp.Markers = append(resp.Markers, om)
	}
	return resp, nil
}

// TxnOffsetCommit, versions 0-5: the group coordinator's
// (coordinator.Coordinator.TxnOffsetCommit), after the same read lease
// wait as the other group APIs, once the group's __consumer_offsets
// partition is verified in the producer's transaction (v5, sent by
// clients of transaction.version 2 without AddOffsetsToTxn: added to it),
// as Kafka's GroupCoordinator verifies before it writes.
func serveTxnOffsetCommit(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	if t, ok := b.meta.Topic(offsetsTopic); ok && req.TransactionalID != "" && b.cfg.TransactionPartitionVerificationEnable {
		p := coordinator.Partition(req.Group, t.Partitions)
		// Verification is started (a guard taken) on this broker's
		// replica of the group's partition, as for a produce: a marker
		// written before the offsets voids it (txn_verify.go).
		// Not leading it here, the group's coordinator is not here
		// either: the write answers NOT_COORDINATOR.
		// A guard voided while the coordinator answered (by the
		// producer's previous transaction's marker, which the
		// coordinator waits for before it adds the partition) is taken
		// and verified again, as reverifyVoided does for a produce.
		var failed map[int]int16
		tb := []txnBatch{{topic: offsetsTopic, partition: p, pid: req.ProducerID, epoch: req.ProducerEpoch}}
		part, ok := b.partition(offsetsTopic, p)
		if !ok || !part.IsLeader() {
			failed = b.verifyTxn(ctx, req.TransactionalID, tb, req.Version >= 5, 11)
		} else {
			var guard replica.TxnGuard
			rounds := 1 // reverifyVoided's rule: transaction.version 2 only
			if req.Version >= 5 {
				rounds += reverifyRounds
			}
			for range rounds {
				g, need := part.StartTxnVerification(req.ProducerID, req.ProducerEpoch)
				if !need {
					break // ongoing: the append needs no guard
				}
				guard = g
				if failed = b.verifyTxn(ctx, req.TransactionalID, tb, req.Version >= 5, 11); len(failed) > 0 ||
					part.TxnGuardHeld(req.ProducerID, req.ProducerEpoch, guard) {
					break
				}
			}
			ctx = context.WithValue(ctx, txnGuardKey{}, txnGuardValue{guard: guard})
		}
		if len(failed) > 0 {
			resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
			for _, rt := range req.Topics {
				ot := kmsg.NewTxnOffsetCommitResponseTopic()
				ot.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					op := kmsg.NewTxnOffsetCommitResponseTopicPartition()
					op.Partition, op.ErrorCode = rp.Partition, txnOffsetVerifyCode(failed[0])
					ot.Partitions = append(ot.Partitions, op)
				}
				resp.Topics = append(resp.Topics, ot)
			}
			return resp, nil
		}
	}
	b.awaitReadLeases(ctx, b.groupPartitions(req))
	return b.coord.TxnOffsetCommit(b.groupContext(ctx, cc), req), nil
}

// txnOffsetVerifyCode is TxnOffsetCommit's error for a failed
// verification: the coordinator-side retriable errors stay what they are
// (a TxnOffsetCommit client retries them), NOT_ENOUGH_REPLICAS (the
// produce translation) becomes COORDINATOR_NOT_AVAILABLE.
func txnOffsetVerifyCode(code int16) int16 {
	if code == kerr.NotEnoughReplicas.Code {
		return kerr.CoordinatorNotAvailable.Code
	}
	return code
}

// DescribeProducers, version 0 (KIP-664): the producer state of the
// partitions this broker hosts, leader or follower (Kafka's
// ReplicaManager.activeProducerState: a follower answers too, which
// kafka-transactions.sh find-hanging --broker-id relies on;
// NOT_LEADER_OR_FOLLOWER for a partition not hosted here,
// UNKNOWN_TOPIC_OR_PARTITION for an unknown one). READ on the topic,
// else TOPIC_AUTHORIZATION_FAILED (Kafka's KafkaApis).
func serveDescribeProducers(_ context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	readable := b.authorizer(cc, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic)
	for _, rt := range req.Topics {
		ot := kmsg.NewDescribeProducersResponseTopic()
		ot.Topic = rt.Topic
		for _, p := range rt.Partitions {
			op := kmsg.NewDescribeProducersResponseTopicPartition()
			op.Partition = p
			part, ok := b.partition(rt.Topic, p)
			switch {
			case !readable(rt.Topic):
				op.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !ok:
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
				if _, known := b.meta.Topic(rt.Topic); known {
					op.ErrorCode = kerr.NotLeaderForPartition.Code
				}
			default:
				for _, pi := range part.Producers() {
					ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap.ProducerID, ap.ProducerEpoch = pi.ProducerID, int32(pi.ProducerEpoch)
					ap.LastSequence, ap.LastTimestamp = pi.LastSequence, pi.LastTimestamp
					ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.CoordinatorEpoch, pi.CurrentTxnStartOffset
					op.ActiveProducers = append(op.ActiveProducers, ap)
				}
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}

// AppendTxn writes recs as one transactional batch of the producer and
// returns once committed (coordinator.TxnLog), with the verification
// guard serveTxnOffsetCommit put in ctx (txnGuardKey), if any.
func (l offsetsLog) AppendTxn(ctx context.Context, producerID int64, producerEpoch int16, recs []coordinator.Record) error {
	opts := l.opts()
	if v, ok := ctx.Value(txnGuardKey{}).(txnGuardValue); ok {
		opts.VerifyTxn, opts.Guard = true, v.guard
	}
	_, err := l.p.AppendRecordsAs(ctx, l.now().UnixMilli(), replica.ProducerTag{ID: producerID, Epoch: producerEpoch, Transactional: true}, opts, records(recs))
	return err
}

// txnGuardKey is the context key of a TxnOffsetCommit's verification
// guard (txnGuardValue): the group coordinator's write of the request's
// offsets carries it to the __consumer_offsets partition, as Kafka's
// GroupCoordinator hands its VerificationGuard to the append.
type txnGuardKey struct{}

type txnGuardValue struct{ guard replica.TxnGuard }

// ReplayBatches hands fn every batch from the log start offset to the
// high watermark, control batches included (coordinator.TxnLog).
func (l offsetsLog) ReplayBatches(fn func(coordinator.ReplayBatch) error) error {
	_, _, err := l.p.ScanBatches(nil, l.p.LogStartOffset(), l.p.HighWatermark(), func(sb *replica.ScannedBatch) error {
		rb := coordinator.ReplayBatch{ProducerID: sb.Producer.ID, Transactional: sb.Producer.Transactional, Control: sb.Control, Commit: sb.Commit}
		if !sb.Producer.Transactional {
			rb.ProducerID = -1
		}
		for _, r := range sb.Records {
			rb.Records = append(rb.Records, coordinator.Record{Key: r.Key, Value: r.Value})
		}
		return fn(rb)
	})
	return err
}

var _ coordinator.TxnLog = offsetsLog{}
