package server

import (
	"context"
	"net"
	"time"

	"github.com/sluicemq/sluice/coordinator"
	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The group coordinator's home: __consumer_offsets, a real compacted topic
// created on first use (FindCoordinator for a group, or Metadata naming it)
// with offsets.topic.num.partitions partitions, Kafka's name and Kafka's
// record schemas (package coordinator). A single node leads every
// partition, so it loads all of them into the coordinator: at start-up
// when the topic exists, else when it creates it.

// newCoordinator builds the broker's coordinator from its config.
func (b *Broker) newCoordinator() *coordinator.Coordinator {
	c := b.cfg
	partitions := c.OffsetsTopicNumPartitions
	if t, ok := b.meta.Topic(offsetsTopic); ok {
		// Groups hash onto the topic as it is (Kafka's rule): the setting
		// counts only when the topic is created.
		partitions = t.Partitions
	}
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	return coordinator.New(coordinator.Config{
		Partitions:                    partitions,
		InitialRebalanceDelay:         ms(int64(c.GroupInitialRebalanceDelayMs)),
		MinSessionTimeout:             ms(int64(c.GroupMinSessionTimeoutMs)),
		MaxSessionTimeout:             ms(int64(c.GroupMaxSessionTimeoutMs)),
		GroupMaxSize:                  c.GroupMaxSize,
		OffsetsRetention:              time.Duration(c.OffsetsRetentionMinutes) * time.Minute,
		OffsetsRetentionCheckInterval: ms(c.OffsetsRetentionCheckIntervalMs),
		OffsetMetadataMaxBytes:        int(c.OffsetMetadataMaxBytes),
		ConsumerHeartbeatInterval:     ms(int64(c.GroupConsumerHeartbeatIntervalMs)),
		ConsumerSessionTimeout:        ms(int64(c.GroupConsumerSessionTimeoutMs)),
		ConsumerMaxSize:               c.GroupConsumerMaxSize,
		Topics:                        brokerTopics{b},
		Logger:                        b.logger,
		Clock:                         brokerClock{b.now},
		Suspect:                       b.coordinatorSuspect, // readlease.go
	})
}

// ensureOffsetsTopic creates __consumer_offsets if it does not exist yet
// (ensureInternalTopic).
func (b *Broker) ensureOffsetsTopic() error { return b.ensureInternalTopic(b.offsetsTopicSpec()) }

// ensureInternalTopic creates an internal topic if it does not exist yet;
// the brokers that lead its partitions then load them. Errors are
// kafkaErrors (COORDINATOR_NOT_AVAILABLE while it cannot be created, as
// Kafka answers).
func (b *Broker) ensureInternalTopic(it internalTopic) error {
	if _, ok := b.meta.Topic(it.name); ok {
		return nil
	}
	if !b.cl.isController() {
		return b.ensureInternalTopicRemote(it)
	}
	// The replication factor (Kafka's default 3) is capped by the
	// cluster's size (a single node: 1; a cluster: its voters or its
	// registered brokers, whichever are more), so a small cluster still
	// gets its groups and transactions; but never by how many brokers
	// happen to be up now: until that many are, the answer is
	// COORDINATOR_NOT_AVAILABLE (retriable), as Kafka answers until the
	// topic can be created.
	rf := max(min(it.rf, int16(b.clusterSize())), 1)
	if n := b.usableBrokerCount(); n < int(rf) {
		return kafkaErrorf(kerr.CoordinatorNotAvailable, "%s needs %d brokers (its replication factor, capped by the cluster size) and %d are up", it.name, rf, n)
	}
	_, err := b.createTopic(it.name, it.partitions, rf, it.configs(rf), false)
	switch {
	case errIs(err, kerr.TopicAlreadyExists):
		return nil // created concurrently
	case err != nil:
		b.logger.Error("sluice: creating "+it.name, "err", err)
		return kafkaErrorf(kerr.CoordinatorNotAvailable, "%s cannot be created: %v", it.name, err)
	}
	return nil
}

// ensureInternalTopicRemote has the active controller create an internal
// topic: a FindCoordinator of the topic's key type sent to it creates the
// topic there (clients may not create internal topics, so CreateTopics
// cannot), and this broker waits, bounded, until its own metadata has it.
func (b *Broker) ensureInternalTopicRemote(it internalTopic) error {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = it.keyType
	// The key in both forms: v0-3 carry CoordinatorKey, v4+ (what the
	// controller's client negotiates) only CoordinatorKeys; without it the
	// controller has no key to look up and creates nothing.
	req.CoordinatorKey, req.CoordinatorKeys = "sluice-internal", []string{"sluice-internal"}
	ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
	defer cancel()
	if _, err := b.cl.ctrl.request(ctx, req); err != nil {
		return kafkaErrorf(kerr.CoordinatorNotAvailable, "%s cannot be created: the controller is not reachable: %v", it.name, err)
	}
	b.awaitLocalMetadata(ctx, func() bool { _, ok := b.meta.Topic(it.name); return ok })
	if _, ok := b.meta.Topic(it.name); !ok {
		return kafkaErrorf(kerr.CoordinatorNotAvailable, "%s is being created", it.name)
	}
	return nil
}

// brokerClock is the coordinator's clock: the broker's wall clock
// (Options.Now) and real timers.
type brokerClock struct{ now func() time.Time }

func (c brokerClock) Now() time.Time { return c.now() }

func (brokerClock) AfterFunc(d time.Duration, f func()) func() bool {
	return coordinator.RealClock{}.AfterFunc(d, f)
}

// offsetsLog is a __consumer_offsets (or __transaction_state) partition
// as a coordinator uses it: its appends are made in the leader epoch the
// coordinator loaded it in (replica.AppendOptions.InLeaderEpoch).
type offsetsLog struct {
	p     *replica.Partition
	now   func() time.Time // the broker's wall clock (Options.Now)
	epoch int32            // the leader epoch the coordinator loaded the partition in
}

// opts are the options of the coordinator's appends.
func (l offsetsLog) opts() replica.AppendOptions {
	return replica.AppendOptions{InLeaderEpoch: true, LeaderEpoch: l.epoch}
}

// Append writes recs as one batch stamped with the current time and
// returns once the partition committed it (replica.AppendRecords).
func (l offsetsLog) Append(ctx context.Context, recs []coordinator.Record) error {
	_, err := l.p.AppendRecords(ctx, l.now().UnixMilli(), l.opts(), records(recs))
	return err
}

// AppendAsync is Append without waiting for the commit
// (coordinator.AsyncLog): offset commits to one partition overlap.
func (l offsetsLog) AppendAsync(recs []coordinator.Record) (func(context.Context) error, error) {
	pd, err := l.p.AppendRecordsAsync(l.now().UnixMilli(), l.opts(), records(recs))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		_, err := pd.Wait(ctx)
		return err
	}, nil
}

// records is recs as the replica's records.
func records(recs []coordinator.Record) []replica.Record {
	rs := make([]replica.Record, len(recs))
	for i, r := range recs {
		rs[i] = replica.Record{Key: r.Key, Value: r.Value}
	}
	return rs
}

// Replay hands fn every record of the partition's data batches from its
// log start offset to its high watermark (replica.ScanRecords).
func (l offsetsLog) Replay(fn func(coordinator.Record) error) error {
	_, _, err := l.p.ScanRecords(nil, l.p.LogStartOffset(), l.p.HighWatermark(), func(_ int64, recs []replica.Record) error {
		for _, r := range recs {
			if err := fn(coordinator.Record{Key: r.Key, Value: r.Value}); err != nil {
				return err
			}
		}
		return nil
	})
	return err
}

// brokerTopics is the coordinator's view of the topics.
type brokerTopics struct{ b *Broker }

func info(t meta.Topic) coordinator.TopicInfo {
	return coordinator.TopicInfo{Name: t.Name, ID: t.ID, Partitions: t.Partitions}
}

func (bt brokerTopics) All() []coordinator.TopicInfo {
	ts := bt.b.meta.Topics()
	out := make([]coordinator.TopicInfo, len(ts))
	for i, t := range ts {
		out[i] = info(t)
	}
	return out
}

func (bt brokerTopics) ByName(name string) (coordinator.TopicInfo, bool) {
	t, ok := bt.b.meta.Topic(name)
	return info(t), ok
}

func (bt brokerTopics) ByID(id [16]byte) (coordinator.TopicInfo, bool) {
	t, ok := bt.b.meta.TopicByID(id)
	return info(t), ok
}

// coordinated registers a group API whose whole answer comes from the
// coordinator: the request is decoded by kmsg, authorized (groupChecks),
// served by fn, and answered.
func coordinated[Req kmsg.Request, Resp kmsg.Response](key, maxVersion int16, fn func(*coordinator.Coordinator, context.Context, Req) Resp) {
	register(handler{key: key, minVersion: 0, maxVersion: maxVersion,
		serve: func(ctx context.Context, b *Broker, cc *clientConn, req kmsg.Request) (kmsg.Response, error) {
			b.awaitReadLeases(ctx, b.groupPartitions(req)) // readlease.go
			serve := func(req kmsg.Request) kmsg.Response {
				resp := fn(b.coord, b.groupContext(ctx, cc), req.(Req))
				if of, ok := any(req).(*kmsg.OffsetFetchRequest); ok {
					b.recheckOffsetFetch(of, any(resp).(*kmsg.OffsetFetchResponse))
				}
				return resp
			}
			if check := groupChecks[key]; check != nil && (b.authz != nil || fillsOperations[key]) && cc != nil {
				return check(b, cc, req, serve), nil // groups_authz.go
			}
			return serve(req), nil
		}})
}

// groupContext is ctx carrying the client's id and host, which the
// coordinator reports for members (DescribeGroups).
// Kafka shows the host as "/" and the client's IP address.
func (b *Broker) groupContext(ctx context.Context, cc *clientConn) context.Context {
	host := cc.conn.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return coordinator.WithClient(ctx, cc.clientID, "/"+host)
}
