package server

// Fetch, versions 4-16. v4 is the first with record batches and the
// isolation level; v5 returns the log start offset; v7 adds fetch sessions
// (KIP-227); v11 the rack (preferred read replica); v12 is flexible and
// tags a NOT_LEADER_OR_FOLLOWER partition with its current leader
// (KIP-951); v13 names topics by ID. Sessions: epoch -1 fetches without a
// session, epoch 0 creates one (closing the one named), later epochs are
// incremental and answer only partitions with records or a changed high
// watermark or log start offset (see fetch_session.go).

import (
	"context"
	"math"
	"time"

	"github.com/sluicemq/sluice/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 1, minVersion: 4, maxVersion: 16, serve: serveFetch})
}

// maxFetchWait bounds a Fetch long poll (clients use 500 ms by default).
const maxFetchWait = time.Minute

// maxFetchRecordBytes bounds a response's record bytes whatever
// fetch.max.bytes says, leaving room under the int32 frame size for the
// rest of the response (write refuses a larger frame).
const maxFetchRecordBytes = math.MaxInt32 - 16<<20

// fetchBudget is the record bytes a Fetch may return (Kafka's
// ReplicaManager): the smaller of the request's MaxBytes and
// fetch.max.bytes. A MaxBytes of 0 or below leaves only KIP-74's first
// batch, as in Kafka; it is never "unlimited".
func (b *Broker) fetchBudget(maxBytes int32) int64 {
	return max(0, min(int64(maxBytes), int64(b.cfg.FetchMaxBytes), maxFetchRecordBytes))
}

// fetchPartition is one partition a fetch reads.
type fetchPartition struct {
	topic     string
	topicID   [16]byte
	partition int32
	offset    int64
	maxBytes  int32
	// leaderEpoch is the client's current leader epoch, -1 for none
	// (checked against the partition's, KIP-320).
	leaderEpoch int32
	// last* are what the session last told the client (incremental
	// fetches leave out partitions where nothing changed).
	lastHW, lastLogStart int64
	sentHW, sentLogStart int64 // set by the latest pass, applied when sent
	sentBytes            int64 // record bytes of the latest pass (metrics)
	// sentOffsets are the offsets the latest pass sent from offset on
	// (a batch's records before it, which the client skips, are not
	// counted): the records a consumer gets, for the console's
	// consume rate.
	sentOffsets int64
}

// sentOffsets are the offsets res holds from offset on.
func sentOffsets(offset int64, res *segment.ReadResult) int64 {
	return max(0, res.NextOffset-max(offset, res.FirstOffset))
}

// remember records what the response actually sent told the client.
func remember(parts []*fetchPartition) {
	for _, fp := range parts {
		fp.lastHW, fp.lastLogStart = fp.sentHW, fp.sentLogStart
	}
}

func serveFetch(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	parts, sess, code := b.sessions.resolve(b, req)
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	if sess != nil {
		defer sess.mu.Unlock()
		resp.SessionID = sess.id
	}
	incremental := sess != nil && req.SessionEpoch > 0
	// Kafka's KafkaApis.handleFetchRequest: a consumer needs READ on each
	// topic, a follower (a replica id) CLUSTER_ACTION on the cluster.
	readable := b.authorizer(cc, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic)
	if fetchReplicaID(req) >= 0 && !b.authorized(cc, kmsg.ACLOperationClusterAction, kmsg.ACLResourceTypeCluster, clusterResource) {
		readable = func(string) bool { return false }
	}
	// A long poll waits at most maxFetchWait, whatever the client asks: a
	// client that asked for days and went away must not pin a goroutine.
	deadline := time.Now().Add(min(time.Duration(req.MaxWaitMillis)*time.Millisecond, maxFetchWait))
	for {
		b.awaitFetchLeases(ctx, parts)
		releaseSplices(cc.splices) // a pass that waited is not sent
		cc.splices = cc.splices[:0]
		pass := b.fetchOnce(req.Version, req.IsolationLevel == 1, parts, b.fetchBudget(req.MaxBytes), resp, incremental, readable, &cc.splices)
		// Kafka's ReplicaManager.fetchMessages answers at once when the
		// client does not wait, no partition can be waited on, the bytes
		// reach MinBytes or a partition failed to read; else DelayedFetch
		// waits for new data or MaxWaitMs.
		if pass.bytes >= int64(req.MinBytes) || pass.failed || req.MaxWaitMillis <= 0 || len(pass.waitOn) == 0 || time.Until(deadline) <= 0 {
			if cc.fetchThrottled(resp) {
				return resp, nil // answered empty, the session as it was
			}
			remember(parts)
			b.metrics.fetched(parts)
			b.fetchEndpoints(resp, connListener(cc))
			return resp, nil
		}
		waitStart := time.Now()
		b.polling.Add(1)
		woke := waitAny(ctx, b.pollsEnd, pass.waitOn, time.Until(deadline))
		b.polling.Add(-1)
		cc.fetchWaited += time.Since(waitStart) // not request time (quota_conn.go)
		if !woke {
			resp.Topics = nil
			b.awaitFetchLeases(ctx, parts)
			releaseSplices(cc.splices)
			cc.splices = cc.splices[:0]
			b.fetchOnce(req.Version, req.IsolationLevel == 1, parts, b.fetchBudget(req.MaxBytes), resp, incremental, readable, &cc.splices)
			if cc.fetchThrottled(resp) {
				return resp, nil // answered empty, the session as it was
			}
			remember(parts)
			b.metrics.fetched(parts)
			b.fetchEndpoints(resp, connListener(cc))
			return resp, nil
		}
		resp.Topics = nil
	}
}

// waitAny waits until one of chans is closed (true) or the time is up,
// ctx is done or end is closed (false).
func waitAny(ctx context.Context, end <-chan struct{}, chans []<-chan struct{}, d time.Duration) bool {
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
	case <-end:
	}
	return false
}

// fetchPass is what one read of a fetch's partitions found.
type fetchPass struct {
	bytes int64 // record bytes read
	// waitOn signals new data for each partition read without error.
	waitOn []<-chan struct{}
	// failed is set when a partition the broker knows failed to read
	// (not the leader, a fenced or unknown leader epoch, an offset out of
	// range, a storage error): Kafka's errorReadingData, which answers at
	// once. Partitions of unknown topics, IDs or partition numbers do
	// not count (Kafka's KafkaApis leaves them out of the read).
	failed bool
}

// fetchOnce reads every partition once into resp (grouped by topic, in
// order), at most budget record bytes and each partition's own MaxBytes,
// except that the first batch of the first partition with records is
// returned whole (KIP-74). incremental leaves out partitions with nothing
// new for the client. A partition of a topic readable denies answers
// TOPIC_AUTHORIZATION_FAILED whether the topic exists or not (nil: all
// readable).
//
// With splices non-nil, records that can be sent with sendfile are left in
// the files: the partition's records field holds a marker and splices
// says which file ranges replace it when the response is written.
//
// readCommitted (isolation level 1, read_committed) reads up to the last
// stable offset and answers the aborted transactions of the range read
// (replica.Partition.FetchCommitted); read_uncommitted reads up to the
// high watermark, aborted records included.
func (b *Broker) fetchOnce(version int16, readCommitted bool, parts []*fetchPartition, budget int64, resp *kmsg.FetchResponse, incremental bool, readable func(topic string) bool, splices *[]splice) fetchPass {
	var total int64
	var waitOn []<-chan struct{}
	failed := false
	for _, fp := range parts {
		fp.sentHW, fp.sentLogStart = fp.lastHW, fp.lastLogStart // unless sent below
		fp.sentBytes, fp.sentOffsets = 0, 0
		if version >= 13 {
			// Resolve the ID on every fetch: a session may outlive its
			// topic (deleted, or recreated under the same name).
			fp.topic = ""
			if t, ok := b.meta.TopicByID(fp.topicID); ok {
				fp.topic = t.Name
			}
		}
		sp := kmsg.NewFetchResponseTopicPartition()
		sp.Partition = fp.partition
		sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
		sp.RecordBatches = []byte{}
		denied := readable != nil && fp.topic != "" && !readable(fp.topic)
		part, ok := b.partition(fp.topic, fp.partition)
		ok = ok && !denied
		var epochErr error
		if ok {
			epochErr = part.CheckLeaderEpoch(fp.leaderEpoch)
		}
		if ok && epochErr == nil {
			epochErr = b.notLeader(part, "fetch")
		}
		if epochErr != nil {
			sp.ErrorCode = kafkaCode(epochErr)
			if id, epoch, ok := currentLeader(epochErr); ok && version >= 12 && sp.ErrorCode == kerr.NotLeaderForPartition.Code {
				// KIP-951's hint; its endpoint goes into the
				// response's NodeEndpoints (fetchEndpoints).
				sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = id, epoch
			}
		} else if denied {
			sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
		} else if !ok {
			sp.ErrorCode = b.missingPartitionCode(fp.topic, fp.partition)
			if version >= 13 && fp.topic == "" {
				sp.ErrorCode = kerr.UnknownTopicID.Code
			}
		} else {
			limit := min(int64(fp.maxBytes), budget-total)
			want := 0
			if limit > 0 || total == 0 {
				want = int(max(limit, 1))
			}
			// The records, the offsets and the wake-up channel from one
			// view of the partition (no wake-up missed, no record beyond
			// the high watermark answered).
			fetch := part.Fetch
			if readCommitted {
				fetch = part.FetchCommitted
			}
			fr, err := fetch(fp.offset, want)
			changed, res := fr.Changed, fr.Records
			for _, at := range fr.AbortedTransactions {
				a := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				a.ProducerID, a.FirstOffset = at.ProducerID, at.FirstOffset
				sp.AbortedTransactions = append(sp.AbortedTransactions, a)
			}
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = fr.HighWatermark, fr.LastStableOffset, fr.LogStartOffset
			// The lease again, now that the view is taken (a pause since
			// the first check shows here; readlease.go). What was read is
			// committed whatever happens.
			if lerr := part.CheckReadLease(); lerr != nil {
				res.Release()
				res, err = segment.ReadResult{}, nil
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
				sp.ErrorCode = kafkaCode(lerr)
			}
			if sp.ErrorCode == 0 && want > 0 {
				if err == nil && total > 0 && res.Bytes > limit {
					// KIP-74: only the first partition with records may
					// exceed the limits; later ones wait for a next fetch.
					res.Release()
					res = segment.ReadResult{}
				}
				switch {
				case err != nil:
					sp.ErrorCode = kafkaCode(err)
				case res.Bytes > 0:
					if splices != nil {
						if s, ok := newSplice(&res); ok {
							*splices = append(*splices, s)
							sp.RecordBatches = (*splices)[len(*splices)-1].marker[:]
							total += res.Bytes
							fp.sentBytes, fp.sentOffsets = res.Bytes, sentOffsets(fp.offset, &res)
							break
						}
					}
					data, err := res.AppendTo(make([]byte, 0, res.Bytes))
					res.Release()
					if err != nil {
						sp.ErrorCode = kerr.KafkaStorageError.Code
						b.logger.Error("sluice: fetch read failed", "topic", fp.topic, "partition", fp.partition, "err", err)
						break
					}
					sp.RecordBatches = data
					total += res.Bytes
					fp.sentBytes, fp.sentOffsets = res.Bytes, sentOffsets(fp.offset, &res)
				}
			}
			if sp.ErrorCode == 0 {
				// Kafka's DelayedFetch completes early only once the
				// bytes reach MinBytes: any partition's new data may.
				waitOn = append(waitOn, changed)
			}
		}
		if sp.ErrorCode != 0 && sp.ErrorCode != kerr.UnknownTopicOrPartition.Code && sp.ErrorCode != kerr.UnknownTopicID.Code && !denied {
			failed = true
		}
		if incremental && sp.ErrorCode == 0 && len(sp.RecordBatches) == 0 &&
			sp.HighWatermark == fp.lastHW && sp.LogStartOffset == fp.lastLogStart {
			continue
		}
		// What the client is told, once this pass's response is the one
		// sent (serveFetch applies it).
		fp.sentHW, fp.sentLogStart = sp.HighWatermark, sp.LogStartOffset
		n := len(resp.Topics)
		if n == 0 || resp.Topics[n-1].Topic != fp.topic || resp.Topics[n-1].TopicID != fp.topicID {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = fp.topic, fp.topicID
			resp.Topics = append(resp.Topics, st)
			n++
		}
		resp.Topics[n-1].Partitions = append(resp.Topics[n-1].Partitions, sp)
	}
	return fetchPass{bytes: total, waitOn: waitOn, failed: failed}
}

// fetchReplicaID is the replica id a Fetch names: -1 for a consumer, a
// broker id for a follower (v15 moved it into ReplicaState).
func fetchReplicaID(req *kmsg.FetchRequest) int32 {
	if req.Version >= 15 {
		return req.ReplicaState.ID
	}
	return req.ReplicaID
}

// fetchEndpoints fills Fetch v16+'s NodeEndpoints (KIP-951) with the
// leaders named in the partitions' CurrentLeader hints.
func (b *Broker) fetchEndpoints(resp *kmsg.FetchResponse, listener string) {
	if resp.Version < 16 {
		return
	}
	var ids []int32
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			if sp.ErrorCode == kerr.NotLeaderForPartition.Code {
				ids = append(ids, sp.CurrentLeader.LeaderID)
			}
		}
	}
	for _, e := range b.leaderEndpoints(ids, listener) {
		rb := kmsg.NewFetchResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack = e.id, e.host, e.port, e.rack
		resp.Brokers = append(resp.Brokers, rb)
	}
}
