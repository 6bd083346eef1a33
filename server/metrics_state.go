package server

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicemq/sluice/replica"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// stateCollector reads the broker's state at scrape time (metrics.go).
// Per-partition numbers are Kafka's per-broker ones: a broker reports the
// partitions it holds; under-replicated and under-min-ISR are counted by
// each partition's leader (Kafka's UnderReplicatedPartitions,
// UnderMinIsrPartitionCount); offline partitions cluster-wide by the
// active controller (Kafka's OfflinePartitionsCount; 0 elsewhere); lag by
// the group's coordinator.
type stateCollector struct {
	b *Broker
	m *brokerMetrics

	partitions, leaders, underReplicated, underMinISR, offline *prometheus.Desc
	logStart, logEnd, hw, size                                 *prometheus.Desc
	groups, lag                                                *prometheus.Desc
	bytesIn, bytesOut, recordsOut                              *prometheus.Desc
	connections, controllerActive                              *prometheus.Desc
	registered, fenced, brokerUp, brokerDown                   *prometheus.Desc
	brokerInfo, brokerDownPartitions                           *prometheus.Desc
}

func newStateCollector(b *Broker, m *brokerMetrics) *stateCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	tp := []string{"topic", "partition"}
	return &stateCollector{b: b, m: m,
		partitions:           d("sluice_partitions", "Partitions this broker holds a replica of (open logs; Kafka's PartitionCount)."),
		leaders:              d("sluice_leader_partitions", "Partitions this broker leads (Kafka's LeaderCount)."),
		underReplicated:      d("sluice_under_replicated_partitions", "Partitions this broker leads whose ISR is smaller than their replica list (Kafka's UnderReplicatedPartitions)."),
		underMinISR:          d("sluice_under_min_isr_partitions", "Partitions this broker leads whose ISR is smaller than min.insync.replicas: acks=all produce fails with NOT_ENOUGH_REPLICAS (Kafka's UnderMinIsrPartitionCount)."),
		offline:              d("sluice_offline_partitions", "Partitions of the cluster without a leader, counted by the active controller (Kafka's OfflinePartitionsCount); 0 on every other node. A single node counts its partitions whose log is not open."),
		logStart:             d("sluice_partition_log_start_offset", "A held partition's log start offset (Kafka's LogStartOffset).", tp...),
		logEnd:               d("sluice_partition_log_end_offset", "A held partition's log end offset: the offset of its next record (Kafka's LogEndOffset).", tp...),
		hw:                   d("sluice_partition_high_watermark", "A held partition's high watermark: consumers read below it.", tp...),
		size:                 d("sluice_partition_size_bytes", "A held partition's log size on disk, in bytes (Kafka's Size).", tp...),
		groups:               d("sluice_consumer_groups", "Consumer groups this broker coordinates (those of the __consumer_offsets partitions it leads)."),
		lag:                  d("sluice_consumer_group_lag", "A group's lag on a partition, in records: the partition's high watermark minus the group's committed offset; reported by the group's coordinator for the partitions it holds a replica of.", "group", "topic", "partition"),
		bytesIn:              d("sluice_topic_bytes_in_total", "Record bytes appended to a topic by Produce requests this broker led (Kafka's BytesInPerSec).", "topic"),
		bytesOut:             d("sluice_topic_bytes_out_total", "Record bytes of a topic sent in Fetch responses (Kafka's BytesOutPerSec).", "topic"),
		recordsOut:           d("sluice_topic_records_out_total", "Records (offsets) of a topic sent in Fetch responses from the offsets fetched, as consumers get them (Kafka has no such metric; MessagesInPerSec is its produce side).", "topic"),
		connections:          d("sluice_connections", "Client connections open on the Kafka listeners (Kafka's connection-count)."),
		controllerActive:     d("sluice_controller_active", "1 on the active controller (the metadata log's leader; a single node is its own), else 0 (Kafka's ActiveControllerCount)."),
		registered:           d("sluice_brokers_registered", "Brokers registered in the metadata this node applies, fenced ones included."),
		fenced:               d("sluice_brokers_fenced", "Registered brokers that are fenced: their session expired or they shut down (Kafka's FencedBrokerCount)."),
		brokerUp:             d("sluice_broker_up", "1 for a registered broker that is unfenced, 0 for one that is fenced (down), as this node's metadata shows it.", "broker"),
		brokerDown:           d("sluice_broker_down_seconds", "How long a registered broker has been fenced, as first seen by this node; 0 while it is up.", "broker"),
		brokerInfo:           d("sluice_broker_info", "1 for each registered broker, fenced or not, labelled with its address (the host:port of its registration's first listener).", "broker", "address"),
		brokerDownPartitions: d("sluice_broker_down_under_replicated_partitions", "Per fenced broker and topic, the partitions that have it as a replica and, fenced, not in their ISR: what it leaves under-replicated.", "broker", "topic"),
	}
}

// Describe sends every descriptor.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.partitions, c.leaders, c.underReplicated, c.underMinISR, c.offline,
		c.logStart, c.logEnd, c.hw, c.size, c.groups, c.lag, c.bytesIn, c.bytesOut, c.recordsOut,
		c.connections, c.controllerActive, c.registered, c.fenced, c.brokerUp, c.brokerDown,
		c.brokerInfo, c.brokerDownPartitions} {
		ch <- d
	}
}

// Collect reads the state.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	now := time.Now()

	// Partitions held, led, under-replicated, under min ISR; offsets.
	b.mu.RLock()
	held := make(map[topicPartition]*replica.Partition, len(b.parts))
	for tp, p := range b.parts {
		held[tp] = p
	}
	b.mu.RUnlock()
	var leaders, under, underMin int
	for tp, p := range held {
		ps := strconv.Itoa(int(tp.partition))
		gauge(c.logStart, float64(p.LogStartOffset()), tp.topic, ps)
		gauge(c.logEnd, float64(p.LogEndOffset()), tp.topic, ps)
		gauge(c.hw, float64(p.HighWatermark()), tp.topic, ps)
		gauge(c.size, float64(p.Size()), tp.topic, ps)
		if !p.IsLeader() {
			continue
		}
		leaders++
		t, ok := b.meta.Topic(tp.topic)
		if !ok {
			continue
		}
		v := b.partitionView(t, tp.partition)
		if len(v.isr) < len(v.replicas) {
			under++
		}
		if len(v.isr) < p.Config().MinInsyncReplicas {
			underMin++
		}
	}
	gauge(c.partitions, float64(len(held)))
	gauge(c.leaders, float64(leaders))
	gauge(c.underReplicated, float64(under))
	gauge(c.underMinISR, float64(underMin))

	active := b.cl.isController()
	offline := 0
	if active {
		for _, t := range b.meta.Topics() {
			for p := range t.Partitions {
				if v := b.partitionView(t, p); v.leader < 0 {
					offline++
				}
			}
		}
	}
	gauge(c.offline, float64(offline))
	gauge(c.controllerActive, boolFloat(active))

	// Brokers.
	var fenced int
	states := b.brokerStates(now)
	for _, st := range states {
		id := strconv.Itoa(int(st.id))
		down := 0.0
		if st.fenced {
			fenced++
			down = now.Sub(st.since).Seconds()
		}
		gauge(c.brokerUp, boolFloat(!st.fenced), id)
		gauge(c.brokerDown, down, id)
		gauge(c.brokerInfo, 1, id, st.addr)
	}
	if fenced > 0 {
		for _, d := range b.downOf(states) {
			perTopic := map[string]int{}
			for _, tp := range d.underReplicated {
				perTopic[tp.topic]++
			}
			for topic, n := range perTopic {
				gauge(c.brokerDownPartitions, float64(n), strconv.Itoa(int(d.id)), topic)
			}
		}
	}
	gauge(c.registered, float64(len(states)))
	gauge(c.fenced, float64(fenced))

	// Connections.
	b.connMu.Lock()
	conns := len(b.conns)
	b.connMu.Unlock()
	gauge(c.connections, float64(conns))

	// Bytes per topic, for the topics that exist (a deleted topic's
	// counters are dropped).
	c.m.topics.Range(func(k, v any) bool {
		name := k.(string)
		if _, ok := b.meta.Topic(name); !ok {
			c.m.topics.Delete(name)
			return true
		}
		tb := v.(*topicBytes)
		ch <- prometheus.MustNewConstMetric(c.bytesIn, prometheus.CounterValue, float64(tb.in.Load()), name)
		ch <- prometheus.MustNewConstMetric(c.bytesOut, prometheus.CounterValue, float64(tb.out.Load()), name)
		ch <- prometheus.MustNewConstMetric(c.recordsOut, prometheus.CounterValue, float64(tb.offsetsOut.Load()), name)
		return true
	})

	c.collectGroups(ch, held)
}

// collectGroups reports the groups this broker coordinates and their lag,
// through the coordinator's own ListGroups and OffsetFetch.
func (c *stateCollector) collectGroups(ch chan<- prometheus.Metric, held map[topicPartition]*replica.Partition) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 5
	groups := c.b.coord.ListGroups(ctx, lg)
	ch <- prometheus.MustNewConstMetric(c.groups, prometheus.GaugeValue, float64(len(groups.Groups)))
	if len(groups.Groups) == 0 {
		return
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 8
	for _, g := range groups.Groups {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group, rg.MemberEpoch, rg.Topics = g.Group, -1, nil // every partition
		of.Groups = append(of.Groups, rg)
	}
	resp := c.b.coord.OffsetFetch(ctx, of)
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			continue
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				part, ok := held[topicPartition{t.Topic, p.Partition}]
				if p.ErrorCode != 0 || p.Offset < 0 || !ok {
					continue
				}
				lag := max(0, part.HighWatermark()-p.Offset)
				ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(lag), g.Group, t.Topic, strconv.Itoa(int(p.Partition)))
			}
		}
	}
}

func boolFloat(v bool) float64 {
	if v {
		return 1
	}
	return 0
}
