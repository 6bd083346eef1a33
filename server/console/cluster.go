package console

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file reads the cluster for the overview, topic and alert pages:
// Metadata, ListOffsets, DescribeLogDirs and DescribeConfigs, all through
// kadm, so that the console shows what any Kafka client sees.

type brokerJSON struct {
	ID         int32  `json:"id"`
	Host       string `json:"host"`
	Port       int32  `json:"port"`
	Rack       string `json:"rack,omitempty"`
	Controller bool   `json:"controller"`
	Leaders    int    `json:"leaders"`  // partitions it leads
	Replicas   int    `json:"replicas"` // partition replicas it holds
	Bytes      int64  `json:"bytes"`    // bytes of its log dirs; -1 unknown
	Down       bool   `json:"down"`     // named by a partition's replicas but not in Metadata's brokers; Host and Port are where it was last seen (Port -1: never seen)
}

type overviewJSON struct {
	Cluster         string       `json:"cluster"`
	Controller      int32        `json:"controller"` // -1: none
	Brokers         []brokerJSON `json:"brokers"`
	Topics          int          `json:"topics"`
	Partitions      int          `json:"partitions"`
	UnderReplicated int          `json:"underReplicated"`
	Offline         int          `json:"offline"`
	Healthy         bool         `json:"healthy"`
	Alerts          []Alert      `json:"alerts"`
}

// metadata is a fresh-enough (MetadataMinAge, 500 ms) Metadata of every
// topic, internal ones included.
func (c *Console) metadata(ctx context.Context, topics ...string) (kadm.Metadata, error) {
	adm, err := c.admin(ctx)
	if err != nil {
		return kadm.Metadata{}, err
	}
	return adm.Metadata(ctx, topics...)
}

func (c *Console) overview(ctx context.Context) (any, error) {
	m, err := c.metadata(ctx)
	if err != nil {
		return nil, err
	}
	adm, err := c.admin(ctx)
	if err != nil {
		return nil, err
	}
	bytes := map[int32]int64{}
	if dirs, err := adm.DescribeAllLogDirs(ctx, nil); err == nil || len(dirs) > 0 {
		for id, ds := range dirs {
			var n int64
			for _, d := range ds {
				n += d.Size()
			}
			bytes[id] = n
		}
	}
	out := overviewJSON{Cluster: m.Cluster, Controller: m.Controller, Brokers: []brokerJSON{}}
	idx := map[int32]int{}
	for _, b := range m.Brokers {
		bj := brokerJSON{ID: b.NodeID, Host: b.Host, Port: b.Port, Controller: b.NodeID == m.Controller, Bytes: -1}
		if b.Rack != nil {
			bj.Rack = *b.Rack
		}
		if n, ok := bytes[b.NodeID]; ok {
			bj.Bytes = n
		}
		idx[b.NodeID] = len(out.Brokers)
		out.Brokers = append(out.Brokers, bj)
	}
	c.mu.Lock()
	if c.seen == nil {
		c.seen = map[int32]kadm.BrokerDetail{}
	}
	for _, b := range m.Brokers {
		c.seen[b.NodeID] = b
	}
	seen := maps.Clone(c.seen)
	c.mu.Unlock()
	// A broker Metadata leaves out but a partition names is down (as
	// deriveAlerts says): it keeps its row, marked, so the table still
	// shows what it held.
	for _, t := range m.Topics {
		for _, p := range t.Partitions {
			for _, r := range p.Replicas {
				if _, ok := idx[r]; !ok {
					idx[r] = len(out.Brokers)
					bj := brokerJSON{ID: r, Port: -1, Bytes: -1, Down: true}
					if s, ok := seen[r]; ok {
						bj.Host, bj.Port = s.Host, s.Port
						if s.Rack != nil {
							bj.Rack = *s.Rack
						}
					}
					out.Brokers = append(out.Brokers, bj)
				}
			}
		}
	}
	slices.SortFunc(out.Brokers, func(a, b brokerJSON) int { return int(a.ID) - int(b.ID) })
	for i, b := range out.Brokers {
		idx[b.ID] = i
	}
	for _, t := range m.Topics {
		if t.Err != nil {
			continue
		}
		out.Topics++
		for _, p := range t.Partitions {
			out.Partitions++
			if p.Leader < 0 {
				out.Offline++
			} else if len(p.ISR) < len(p.Replicas) {
				out.UnderReplicated++
			}
			if i, ok := idx[p.Leader]; ok {
				out.Brokers[i].Leaders++
			}
			for _, r := range p.Replicas {
				if i, ok := idx[r]; ok {
					out.Brokers[i].Replicas++
				}
			}
		}
	}
	out.Alerts = c.mergeAlerts(deriveAlerts(m))
	out.Healthy = len(out.Alerts) == 0
	return out, nil
}

type alertsJSON struct {
	Alerts []Alert `json:"alerts"`
}

// alertsResponse is the banner's content: Config.Alerts plus what
// Metadata shows. A cluster that does not answer is itself an alert, not
// an API error.
func (c *Console) alertsResponse(ctx context.Context) (any, error) {
	m, err := c.metadata(ctx)
	if err != nil {
		return alertsJSON{c.mergeAlerts([]Alert{{Severity: "critical", Title: "the cluster does not answer", Detail: err.Error()}})}, nil
	}
	return alertsJSON{c.mergeAlerts(deriveAlerts(m))}, nil
}

// mergeAlerts appends Config.Alerts to derived; one with the title of a
// derived alert replaces it, in its place (the broker knows more than
// Metadata shows: since when a broker is down, its address).
func (c *Console) mergeAlerts(derived []Alert) []Alert {
	out := append([]Alert{}, derived...)
	if c.cfg.Alerts == nil {
		return out
	}
	for _, a := range c.cfg.Alerts() {
		if i := slices.IndexFunc(out, func(b Alert) bool { return b.Title == a.Title }); i >= 0 {
			out[i] = a
		} else {
			out = append(out, a)
		}
	}
	return out
}

// maxNamed is how many partitions an alert names before "...".
const maxNamed = 10

func namePartitions(ps []string) string {
	if len(ps) > maxNamed {
		return strings.Join(ps[:maxNamed], ", ") + ", ..."
	}
	return strings.Join(ps, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// deriveAlerts is what Metadata alone shows is wrong: a replica id that a
// partition names but the brokers list lacks is a broker that is down
// (fenced or unregistered, as Kafka's Metadata omits fenced brokers); a
// partition without a leader is offline; a partition whose ISR is smaller
// than its replica set with every replica's broker up is catching up; no
// controller is an alert of its own.
func deriveAlerts(m kadm.Metadata) []Alert {
	up := map[int32]bool{}
	for _, b := range m.Brokers {
		up[b.NodeID] = true
	}
	down := map[int32][]TopicPartitions{} // broker -> its partitions, by topic
	nDown := map[int32]int{}
	var offline, lagging []string
	for _, t := range m.Topics.Sorted() {
		if t.Err != nil {
			continue
		}
		for _, p := range t.Partitions.Sorted() {
			name := fmt.Sprintf("%s-%d", t.Topic, p.Partition)
			missing := false
			for _, r := range p.Replicas {
				if !up[r] {
					ts := down[r]
					if len(ts) == 0 || ts[len(ts)-1].Topic != t.Topic {
						ts = append(ts, TopicPartitions{Topic: t.Topic, Internal: t.IsInternal})
					}
					ts[len(ts)-1].Partitions = append(ts[len(ts)-1].Partitions, p.Partition)
					down[r] = ts
					nDown[r]++
					missing = true
				}
			}
			switch {
			case p.Leader < 0:
				offline = append(offline, name)
			case !missing && (len(p.ISR) < len(p.Replicas) || len(p.OfflineReplicas) > 0):
				lagging = append(lagging, name)
			}
		}
	}
	var out []Alert
	if m.Controller < 0 {
		out = append(out, Alert{Severity: "critical", Title: "no active controller", Detail: "Metadata names no controller: topics cannot be created and leaders cannot move"})
	}
	ids := make([]int32, 0, len(down))
	for id := range down {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		out = append(out, Alert{
			Severity: "warning",
			Title:    fmt.Sprintf("broker %d is down", id),
			Detail:   fmt.Sprintf("%s under-replicated: %s", plural(nDown[id], "partition", "partitions"), PartitionsByTopic(down[id])),
		})
	}
	if len(offline) > 0 {
		out = append(out, Alert{
			Severity: "critical",
			Title:    plural(len(offline), "partition is", "partitions are") + " offline",
			Detail:   "no leader: " + namePartitions(offline),
		})
	}
	if len(lagging) > 0 {
		out = append(out, Alert{
			Severity: "warning",
			Title:    plural(len(lagging), "partition is", "partitions are") + " under-replicated",
			Detail:   "ISR smaller than the replica set: " + namePartitions(lagging),
		})
	}
	return out
}

type topicSummaryJSON struct {
	Name              string `json:"name"`
	Internal          bool   `json:"internal"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replicationFactor"`
	Records           int64  `json:"records"` // sum of log end - log start offsets; -1 unknown
	Bytes             int64  `json:"bytes"`   // sum of the leaders' log sizes; -1 unknown
	UnderReplicated   int    `json:"underReplicated"`
	Offline           int    `json:"offline"`
	Error             string `json:"error,omitempty"`
}

// offsetsAndSizes are the log start and end offsets and leader log sizes
// of the topics' partitions; missing entries are unknown.
type offsetsAndSizes struct {
	start, end kadm.ListedOffsets
	dirs       kadm.DescribedAllLogDirs
}

func (c *Console) readOffsetsAndSizes(ctx context.Context, m kadm.Metadata, topics []string) offsetsAndSizes {
	var o offsetsAndSizes
	adm, err := c.admin(ctx)
	if err != nil || len(topics) == 0 {
		return o
	}
	o.start, _ = adm.ListStartOffsets(ctx, topics...) // partial results on shard errors
	o.end, _ = adm.ListEndOffsets(ctx, topics...)
	set := kadm.TopicsSet{}
	for _, t := range topics {
		for _, p := range m.Topics[t].Partitions {
			set.Add(t, p.Partition)
		}
	}
	o.dirs, _ = adm.DescribeAllLogDirs(ctx, set)
	return o
}

func offsetOf(l kadm.ListedOffsets, t string, p int32) int64 {
	if o, ok := l.Lookup(t, p); ok && o.Err == nil {
		return o.Offset
	}
	return -1
}

// size is the log size of partition t-p on broker b, or -1.
func (o offsetsAndSizes) size(b int32, t string, p int32) int64 {
	for _, d := range o.dirs[b] {
		if dp, ok := d.Topics.Lookup(t, p); ok {
			return dp.Size
		}
	}
	return -1
}

func (c *Console) topics(ctx context.Context) (any, error) {
	m, err := c.metadata(ctx)
	if err != nil {
		return nil, err
	}
	names := m.Topics.Names()
	slices.Sort(names)
	o := c.readOffsetsAndSizes(ctx, m, names)
	out := []topicSummaryJSON{}
	for _, name := range names {
		t := m.Topics[name]
		ts := topicSummaryJSON{Name: name, Internal: t.IsInternal, Partitions: len(t.Partitions)}
		if t.Err != nil {
			ts.Error = t.Err.Error()
		}
		for _, p := range t.Partitions {
			ts.ReplicationFactor = max(ts.ReplicationFactor, len(p.Replicas))
			if p.Leader < 0 {
				ts.Offline++
			} else if len(p.ISR) < len(p.Replicas) {
				ts.UnderReplicated++
			}
			start, end := offsetOf(o.start, name, p.Partition), offsetOf(o.end, name, p.Partition)
			if start < 0 || end < 0 || ts.Records < 0 {
				ts.Records = -1
			} else {
				ts.Records += end - start
			}
			size := o.size(p.Leader, name, p.Partition)
			if size < 0 || ts.Bytes < 0 {
				ts.Bytes = -1
			} else {
				ts.Bytes += size
			}
		}
		out = append(out, ts)
	}
	return out, nil
}

type partitionJSON struct {
	Partition       int32   `json:"partition"`
	Leader          int32   `json:"leader"` // -1: offline
	LeaderEpoch     int32   `json:"leaderEpoch"`
	Replicas        []int32 `json:"replicas"`
	ISR             []int32 `json:"isr"`
	OfflineReplicas []int32 `json:"offlineReplicas"`
	DownReplicas    []int32 `json:"downReplicas"` // replicas whose broker is not in Metadata
	StartOffset     int64   `json:"startOffset"`  // log start offset; -1 unknown
	EndOffset       int64   `json:"endOffset"`    // high watermark; -1 unknown
	Bytes           int64   `json:"bytes"`        // the leader's log size; -1 unknown
	Error           string  `json:"error,omitempty"`
}

type configJSON struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Source    string `json:"source"`
	Sensitive bool   `json:"sensitive"`
}

type topicJSON struct {
	Name       string          `json:"name"`
	ID         string          `json:"id"`
	Internal   bool            `json:"internal"`
	Partitions []partitionJSON `json:"partitions"`
	Configs    []configJSON    `json:"configs"` // those not at their default (kadm's config source)
	Error      string          `json:"error,omitempty"`
}

// topicID is a topic ID as Kafka prints it (Uuid.toString: URL-safe
// base64 without padding); the zero ID is "".
func topicID(id kadm.TopicID) string {
	if id == (kadm.TopicID{}) {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// validTopic reports whether name may be a Kafka topic name (Kafka's
// Topic.validate: 1 to 249 of [a-zA-Z0-9._-]).
func validTopic(name string) bool {
	if name == "" || len(name) > 249 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// topicMetadata is Metadata of one existing topic; a missing topic is a
// 404.
func (c *Console) topicMetadata(ctx context.Context, name string) (kadm.Metadata, kadm.TopicDetail, error) {
	if !validTopic(name) {
		return kadm.Metadata{}, kadm.TopicDetail{}, badRequest("invalid topic name %q", name)
	}
	m, err := c.metadata(ctx, name)
	if err != nil {
		return m, kadm.TopicDetail{}, err
	}
	t, ok := m.Topics[name]
	if !ok || t.Err != nil && len(t.Partitions) == 0 {
		return m, t, notFound("no topic %q", name)
	}
	return m, t, nil
}

func (c *Console) topic(ctx context.Context, name string) (any, error) {
	m, t, err := c.topicMetadata(ctx, name)
	if err != nil {
		return nil, err
	}
	up := map[int32]bool{}
	for _, b := range m.Brokers {
		up[b.NodeID] = true
	}
	o := c.readOffsetsAndSizes(ctx, m, []string{name})
	out := topicJSON{Name: name, ID: topicID(t.ID), Internal: t.IsInternal, Partitions: []partitionJSON{}, Configs: []configJSON{}}
	if t.Err != nil {
		out.Error = t.Err.Error()
	}
	for _, p := range t.Partitions.Sorted() {
		pj := partitionJSON{
			Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR), OfflineReplicas: nonNil(p.OfflineReplicas), DownReplicas: []int32{},
			StartOffset: offsetOf(o.start, name, p.Partition), EndOffset: offsetOf(o.end, name, p.Partition),
			Bytes: o.size(p.Leader, name, p.Partition),
		}
		for _, r := range p.Replicas {
			if !up[r] {
				pj.DownReplicas = append(pj.DownReplicas, r)
			}
		}
		if p.Err != nil {
			pj.Error = p.Err.Error()
		}
		out.Partitions = append(out.Partitions, pj)
	}
	adm, err := c.admin(ctx)
	if err != nil {
		return nil, err
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, name)
	if err == nil {
		for _, rc := range rcs {
			if rc.Err != nil {
				continue
			}
			for _, cf := range rc.Configs {
				if cf.Source == kmsg.ConfigSourceDefaultConfig {
					continue
				}
				cj := configJSON{Name: cf.Key, Source: cf.Source.String(), Sensitive: cf.Sensitive}
				if cf.Value != nil {
					cj.Value = *cf.Value
				}
				out.Configs = append(out.Configs, cj)
			}
		}
		slices.SortFunc(out.Configs, func(a, b configJSON) int { return strings.Compare(a.Name, b.Name) })
	}
	return out, nil
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}
