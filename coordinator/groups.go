package coordinator

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups lists the groups of every loaded partition (ListGroups v0-v5):
// state filters (v4+, KIP-518) and type filters (v5+, KIP-848) match case
// insensitively; COORDINATOR_LOAD_IN_PROGRESS while a partition replays, as
// Kafka answers.
func (c *Coordinator) ListGroups(ctx context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	match := func(filter []string, v string) bool {
		if len(filter) == 0 {
			return true
		}
		for _, f := range filter {
			if strings.EqualFold(f, v) {
				return true
			}
		}
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.shards {
		if s.loading {
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			continue
		}
		for _, g := range s.groups {
			state, ptype := g.stateName(), g.protocolType()
			if !match(req.StatesFilter, state) || !match(req.TypesFilter, g.typeName()) {
				continue
			}
			lg := kmsg.NewListGroupsResponseGroup()
			lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.id, ptype, state, g.typeName()
			resp.Groups = append(resp.Groups, lg)
		}
	}
	slices.SortFunc(resp.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return cmp.Compare(a.Group, b.Group) })
	return resp
}

// stateName is the group state as ListGroups and DescribeGroups name it.
func (g *group) stateName() string {
	switch {
	case g.consumer != nil:
		return g.consumer.stateName()
	case g.classic != nil:
		return g.classic.stateName()
	}
	return "Empty"
}

// protocolType is "consumer" for KIP-848 groups, the members' protocol type
// for classic groups, and "" for groups known only by their offsets.
func (g *group) protocolType() string {
	switch {
	case g.consumer != nil:
		return "consumer"
	case g.classic != nil:
		return g.classic.protocolType()
	}
	return ""
}

// DescribeGroups describes groups (DescribeGroups v0-v6). A group that does
// not exist is reported in state Dead (v6+: with GROUP_ID_NOT_FOUND, as
// Kafka 4 does).
func (c *Coordinator) DescribeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range req.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = id
		g, code := c.groupLocked(id, false)
		switch {
		case code != 0:
			dg.ErrorCode = code
		case g == nil:
			dg.State = "Dead"
			if req.Version >= 6 {
				dg.ErrorCode = kerr.GroupIDNotFound.Code
				msg := "Group " + id + " not found."
				dg.ErrorMessage = &msg
			}
		case g.consumer != nil:
			dg = c.consumerDescribeClassicLocked(g, req.Version)
		default:
			dg = c.classicDescribeLocked(g, req.Version)
		}
		dg.Group = id
		if !req.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = -2147483648
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// DeleteGroups deletes groups without members (DeleteGroups v0-v2):
// GROUP_ID_NOT_FOUND for an unknown group, NON_EMPTY_GROUP for one with
// members. Deleting writes tombstones for the group's offsets and metadata;
// as in Kafka's deleteAllOffsets, a partition with only a pending
// transactional offset gets a tombstone too, which drops it (pending
// offsets do not keep a group from being deleted).
func (c *Coordinator) DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		rg.ErrorCode = c.deleteGroup(ctx, id)
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

func (c *Coordinator) deleteGroup(ctx context.Context, id string) int16 {
	g, code := c.lookupGroup(id)
	if code != 0 {
		return code
	}
	if g == nil {
		return kerr.GroupIDNotFound.Code
	}
	s := g.shard
	var pending map[string][]int32
	check := func() ([]Record, int16) {
		g := s.groups[id]
		switch {
		case g == nil:
			return nil, kerr.GroupIDNotFound.Code
		case !g.isEmptyLocked():
			return nil, kerr.NonEmptyGroup.Code
		}
		var recs []Record
		for _, topic := range sortedKeys(g.offsets) {
			for _, p := range sortedKeys(g.offsets[topic]) {
				recs = append(recs, Record{Key: offsetKey(id, topic, p)})
			}
		}
		pending = s.pendingPartitionsLocked(id)
		for _, topic := range sortedKeys(pending) {
			for _, p := range pending[topic] {
				if g.offset(topic, p) == nil {
					recs = append(recs, Record{Key: offsetKey(id, topic, p)})
				}
			}
		}
		return append(recs, c.groupTombstonesLocked(g)...), 0
	}
	apply := func() {
		for topic, ps := range pending {
			for _, p := range ps {
				s.tombstoneLocked(id, topic, p)
			}
		}
		if g := s.groups[id]; g != nil {
			c.removeLocked(g)
		}
	}
	return c.write(ctx, s, check, apply)
}

// sortedKeys returns m's keys in order, for deterministic output.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
