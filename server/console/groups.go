package console

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// This file reads consumer groups: ListGroups, DescribeGroups (classic
// groups) or ConsumerGroupDescribe (KIP-848 groups), OffsetFetch, and
// ListOffsets for the end offsets that lag is measured against (lag =
// high watermark - committed offset, as kafka-consumer-groups.sh shows).

type assignmentJSON struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

type memberJSON struct {
	MemberID   string           `json:"memberId"`
	InstanceID string           `json:"instanceId,omitempty"`
	ClientID   string           `json:"clientId"`
	Host       string           `json:"host"`
	Assignment []assignmentJSON `json:"assignment"`
}

type groupOffsetJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"` // -1: no commit
	End       int64  `json:"end"`       // high watermark; -1 unknown
	Lag       int64  `json:"lag"`       // -1 unknown
	Member    string `json:"member,omitempty"`
}

type groupJSON struct {
	Group        string            `json:"group"`
	Type         string            `json:"type"` // "classic" or "consumer" (KIP-848), if the broker says
	State        string            `json:"state"`
	ProtocolType string            `json:"protocolType"`
	Protocol     string            `json:"protocol"` // assignor
	Coordinator  int32             `json:"coordinator"`
	Members      []memberJSON      `json:"members"`
	Offsets      []groupOffsetJSON `json:"offsets"`
	Lag          int64             `json:"lag"` // sum of the known partition lags
	Error        string            `json:"error,omitempty"`
}

// maxGroupsListed bounds the groups one list request describes.
const maxGroupsListed = 500

func (c *Console) groups(ctx context.Context) (any, error) {
	adm, err := c.admin(ctx)
	if err != nil {
		return nil, err
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil && len(listed) == 0 {
		return nil, err
	}
	out, err := c.describeGroups(ctx, listed.Sorted())
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Offsets = nil // the list shows totals only
	}
	return out, nil
}

func (c *Console) group(ctx context.Context, id string) (any, error) {
	if id == "" || len(id) > 1024 {
		return nil, badRequest("invalid group id")
	}
	adm, err := c.admin(ctx)
	if err != nil {
		return nil, err
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil && len(listed) == 0 {
		return nil, err
	}
	g, ok := listed[id]
	if !ok {
		return nil, notFound("no group %q", id)
	}
	out, err := c.describeGroups(ctx, []kadm.ListedGroup{g})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// describeGroups describes the listed groups with their members,
// committed offsets and lag, in the order given.
func (c *Console) describeGroups(ctx context.Context, listed []kadm.ListedGroup) ([]groupJSON, error) {
	adm, err := c.admin(ctx)
	if err != nil {
		return nil, err
	}
	if len(listed) > maxGroupsListed {
		listed = listed[:maxGroupsListed]
	}
	out := make([]groupJSON, 0, len(listed))
	if len(listed) == 0 {
		return out, nil
	}
	var classic, consumer, all []string
	for _, g := range listed {
		all = append(all, g.Group)
		if g.GroupType == "consumer" {
			consumer = append(consumer, g.Group)
		} else {
			classic = append(classic, g.Group)
		}
	}
	var described kadm.DescribedGroups
	if len(classic) > 0 {
		described, _ = adm.DescribeGroups(ctx, classic...) // partial on shard errors
	}
	var described848 kadm.DescribedConsumerGroups
	if len(consumer) > 0 {
		described848, _ = adm.DescribeConsumerGroups(ctx, consumer...)
	}
	fetched := adm.FetchManyOffsets(ctx, all...)
	var topics []string
	for _, f := range fetched {
		for t := range f.Fetched {
			if !slices.Contains(topics, t) {
				topics = append(topics, t)
			}
		}
	}
	var ends kadm.ListedOffsets
	if len(topics) > 0 {
		ends, _ = adm.ListEndOffsets(ctx, topics...)
	}
	for _, lg := range listed {
		g := groupJSON{Group: lg.Group, Type: lg.GroupType, State: lg.State, ProtocolType: lg.ProtocolType,
			Coordinator: lg.Coordinator, Members: []memberJSON{}, Offsets: []groupOffsetJSON{}}
		owner := map[string]map[int32]string{} // topic -> partition -> member
		assign := func(member, topic string, p int32) {
			if owner[topic] == nil {
				owner[topic] = map[int32]string{}
			}
			owner[topic][p] = member
		}
		if d, ok := described[lg.Group]; ok {
			g.State, g.Protocol, g.Coordinator = d.State, d.Protocol, d.Coordinator.NodeID
			if d.Err != nil {
				g.Error = d.Err.Error()
			}
			for _, m := range d.Members {
				mj := memberJSON{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assignment: []assignmentJSON{}}
				if m.InstanceID != nil {
					mj.InstanceID = *m.InstanceID
				}
				if a, ok := m.Assigned.AsConsumer(); ok {
					for _, t := range a.Topics {
						ps := slices.Clone(t.Partitions)
						slices.Sort(ps)
						mj.Assignment = append(mj.Assignment, assignmentJSON{t.Topic, ps})
						for _, p := range ps {
							assign(m.MemberID, t.Topic, p)
						}
					}
				}
				g.Members = append(g.Members, mj)
			}
		}
		if d, ok := described848[lg.Group]; ok {
			g.State, g.Protocol, g.Coordinator = d.State, d.AssignorName, d.Coordinator.NodeID
			if d.Err != nil {
				g.Error = d.Err.Error()
			}
			for _, m := range d.Members {
				mj := memberJSON{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assignment: []assignmentJSON{}}
				if m.InstanceID != nil {
					mj.InstanceID = *m.InstanceID
				}
				for _, t := range m.Assignment.Sorted() {
					mj.Assignment = append(mj.Assignment, assignmentJSON{t.Topic, t.Partitions})
					for _, p := range t.Partitions {
						assign(m.MemberID, t.Topic, p)
					}
				}
				g.Members = append(g.Members, mj)
			}
		}
		f := fetched[lg.Group]
		if f.Err != nil && g.Error == "" {
			g.Error = f.Err.Error()
		}
		seen := map[string]map[int32]bool{}
		for _, o := range f.Fetched.Sorted() {
			if o.Err != nil {
				continue
			}
			if seen[o.Topic] == nil {
				seen[o.Topic] = map[int32]bool{}
			}
			seen[o.Topic][o.Partition] = true
			oj := groupOffsetJSON{Topic: o.Topic, Partition: o.Partition, Committed: o.At,
				End: offsetOf(ends, o.Topic, o.Partition), Lag: -1, Member: owner[o.Topic][o.Partition]}
			if oj.Committed >= 0 && oj.End >= 0 {
				oj.Lag = max(0, oj.End-oj.Committed)
				g.Lag += oj.Lag
			}
			g.Offsets = append(g.Offsets, oj)
		}
		// Assigned partitions without a commit yet.
		for t, ps := range owner {
			for p, m := range ps {
				if !seen[t][p] {
					g.Offsets = append(g.Offsets, groupOffsetJSON{Topic: t, Partition: p, Committed: -1, End: -1, Lag: -1, Member: m})
				}
			}
		}
		slices.SortFunc(g.Offsets, func(a, b groupOffsetJSON) int {
			if c := strings.Compare(a.Topic, b.Topic); c != 0 {
				return c
			}
			return int(a.Partition - b.Partition)
		})
		out = append(out, g)
	}
	return out, nil
}
