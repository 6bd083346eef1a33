package main

// fakeCluster is a small in-process Kafka cluster for the command tests:
// one listener that answers for every broker id, with just enough of
// Metadata, ListPartitionReassignments, AlterPartitionReassignments,
// ElectLeaders, IncrementalAlterConfigs and UnregisterBroker, following
// Kafka's semantics (KIP-455: a reassignment lists its full replica set
// while it runs, cancel goes back to the original replicas). franz-go's
// kfake has the first five but never has a reassignment in progress,
// and has no UnregisterBroker, so it cannot show verify's or
// decommission's progress.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type fakePart struct {
	replicas, isr []int32
	leader        int32
}

type fakeMove struct {
	original, target []int32
	listed           int // ListPartitionReassignments calls that saw it
}

type fakeCluster struct {
	t    *testing.T
	ln   net.Listener
	host string
	port int32

	mu       sync.Mutex
	brokers  []int32
	parts    map[tp]*fakePart
	moves    map[tp]*fakeMove
	configs  map[string]map[string]string // "topic:a", "broker:2", "broker:" (cluster default)
	requests []kmsg.Request

	// Knobs the tests set (under mu, before or between commands).
	unsupported  map[int16]bool        // keys left out of ApiVersions
	finishAfter  int                   // a move completes when listed this many times (0: never)
	alterErr     map[tp]*kerr.Error    // AlterPartitionReassignments answers these
	decommission map[int32]bool        // brokers being decommissioned: a move away per Metadata
	conns        map[net.Conn]struct{} // to close them
	// lastFetch are DescribeQuorum's LastFetchTimestamp by broker (ms;
	// a broker left out is -1); fenced are the brokers DescribeCluster
	// marks fenced.
	lastFetch map[int32]int64
	fenced    map[int32]bool
}

// newFakeCluster starts a cluster of brokers and returns it with its
// --bootstrap-server.
func newFakeCluster(t *testing.T, brokers ...int32) (*fakeCluster, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	f := &fakeCluster{
		t: t, ln: ln, host: "127.0.0.1", port: int32(addr.Port),
		brokers: slices.Clone(brokers),
		parts:   map[tp]*fakePart{}, moves: map[tp]*fakeMove{},
		configs: map[string]map[string]string{}, unsupported: map[int16]bool{},
		alterErr: map[tp]*kerr.Error{}, decommission: map[int32]bool{},
		conns: map[net.Conn]struct{}{}, lastFetch: map[int32]int64{}, fenced: map[int32]bool{},
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns[c] = struct{}{}
			f.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				f.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		wg.Wait()
	})
	return f, ln.Addr().String()
}

// addTopic adds topic with one partition per replica list, led by its
// first replica, all in the ISR.
func (f *fakeCluster) addTopic(topic string, replicas ...[]int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, r := range replicas {
		f.parts[tp{topic, int32(i)}] = &fakePart{replicas: slices.Clone(r), isr: slices.Clone(r), leader: r[0]}
	}
}

// startMove puts a reassignment of p to target in progress, as an
// AlterPartitionReassignments would.
func (f *fakeCluster) startMove(p tp, target []int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.move(p, target)
}

func (f *fakeCluster) part(p tp) fakePart {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.parts[p]
}

func (f *fakeCluster) config(resource string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for k, v := range f.configs[resource] {
		out[k] = v
	}
	return out
}

func (f *fakeCluster) setConfig(resource, key, value string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.configs[resource] == nil {
		f.configs[resource] = map[string]string{}
	}
	f.configs[resource][key] = value
}

// requestsOf returns the requests with key received so far.
func (f *fakeCluster) requestsOf(key int16) []kmsg.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []kmsg.Request
	for _, r := range f.requests {
		if r.Key() == key {
			out = append(out, r)
		}
	}
	return out
}

func (f *fakeCluster) serve(c net.Conn) {
	defer func() {
		c.Close()
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
	}()
	r := bufio.NewReader(c)
	for {
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		rd := kbin.Reader{Src: body}
		key, version, corr := rd.Int16(), rd.Int16(), rd.Int32()
		rd.NullableString() // client id
		req := kmsg.RequestForKey(key)
		if req == nil {
			f.t.Errorf("fake cluster: unknown key %d", key)
			return
		}
		f.mu.Lock()
		unsupported := f.unsupported[key]
		f.mu.Unlock()
		if unsupported {
			return // as a broker does with a key it does not serve
		}
		req.SetVersion(version)
		if req.IsFlexible() {
			kmsg.SkipTags(&rd)
		}
		if err := req.ReadFrom(rd.Src); err != nil {
			f.t.Errorf("fake cluster: %s v%d: %v", kmsg.NameForKey(key), version, err)
			return
		}
		resp, err := f.handle(req)
		if err != nil {
			f.t.Errorf("fake cluster: %s: %v", kmsg.NameForKey(key), err)
			return
		}
		resp.SetVersion(version)
		out := binary.BigEndian.AppendUint32(make([]byte, 4), uint32(corr))
		if resp.IsFlexible() && key != kmsg.ApiVersions.Int16() {
			out = append(out, 0)
		}
		out = resp.AppendTo(out)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

var fakeKeys = []kmsg.Key{kmsg.Metadata, kmsg.ApiVersions, kmsg.ElectLeaders, kmsg.IncrementalAlterConfigs,
	kmsg.AlterPartitionAssignments, kmsg.ListPartitionReassignments, kmsg.UnregisterBroker,
	kmsg.DescribeCluster, kmsg.DescribeQuorum}

func (f *fakeCluster) handle(req kmsg.Request) (kmsg.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.Key() != kmsg.ApiVersions.Int16() {
		f.requests = append(f.requests, req)
	}
	switch req := req.(type) {
	case *kmsg.ApiVersionsRequest:
		resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
		for _, k := range fakeKeys {
			if f.unsupported[k.Int16()] {
				continue
			}
			ak := kmsg.NewApiVersionsResponseApiKey()
			ak.ApiKey, ak.MaxVersion = k.Int16(), kmsg.RequestForKey(k.Int16()).MaxVersion()
			resp.ApiKeys = append(resp.ApiKeys, ak)
		}
		return resp, nil
	case *kmsg.MetadataRequest:
		return f.metadata(req), nil
	case *kmsg.ListPartitionReassignmentsRequest:
		return f.listMoves(req), nil
	case *kmsg.AlterPartitionAssignmentsRequest:
		return f.alterMoves(req), nil
	case *kmsg.ElectLeadersRequest:
		return f.elect(req), nil
	case *kmsg.IncrementalAlterConfigsRequest:
		return f.alterConfigs(req), nil
	case *kmsg.UnregisterBrokerRequest:
		return f.unregister(req), nil
	case *kmsg.DescribeClusterRequest:
		return f.describeCluster(req), nil
	case *kmsg.DescribeQuorumRequest:
		return f.describeQuorum(req), nil
	}
	return nil, fmt.Errorf("not handled")
}

func (f *fakeCluster) metadata(req *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	f.stepDecommission()
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.ControllerID = f.brokers[0]
	for _, b := range f.brokers {
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = b, f.host, f.port
		resp.Brokers = append(resp.Brokers, mb)
	}
	var topics []string
	if req.Topics == nil {
		for p := range f.parts {
			if !slices.Contains(topics, p.Topic) {
				topics = append(topics, p.Topic)
			}
		}
	}
	for _, t := range req.Topics {
		topics = append(topics, *t.Topic)
	}
	for i, t := range topics {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = kmsg.StringPtr(t)
		mt.TopicID[0], mt.TopicID[15] = 1, byte(i+1)
		for _, p := range sortedTPs(f.parts) {
			if p.Topic != t {
				continue
			}
			fp := f.parts[p]
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.Leader = p.Partition, fp.leader
			mp.Replicas, mp.ISR = slices.Clone(fp.replicas), slices.Clone(fp.isr)
			mt.Partitions = append(mt.Partitions, mp)
		}
		if len(mt.Partitions) == 0 {
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}

// move starts (or redirects) the reassignment of p to target.
func (f *fakeCluster) move(p tp, target []int32) {
	fp := f.parts[p]
	m, ok := f.moves[p]
	if !ok {
		m = &fakeMove{original: slices.Clone(fp.replicas)}
		f.moves[p] = m
	}
	m.target = slices.Clone(target)
	all := slices.Clone(target)
	for _, b := range m.original {
		if !slices.Contains(all, b) {
			all = append(all, b)
		}
	}
	fp.replicas = all
}

func (f *fakeCluster) finish(p tp) {
	m := f.moves[p]
	fp := f.parts[p]
	fp.replicas, fp.isr = slices.Clone(m.target), slices.Clone(m.target)
	if !slices.Contains(fp.replicas, fp.leader) {
		fp.leader = fp.replicas[0]
	}
	delete(f.moves, p)
}

func diff(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func (f *fakeCluster) listMoves(req *kmsg.ListPartitionReassignmentsRequest) *kmsg.ListPartitionReassignmentsResponse {
	for _, p := range sortedTPs(f.moves) {
		m := f.moves[p]
		m.listed++
		if f.finishAfter > 0 && m.listed >= f.finishAfter {
			f.finish(p)
		}
	}
	want := func(p tp) bool {
		if req.Topics == nil {
			return true
		}
		for _, t := range req.Topics {
			if t.Topic == p.Topic && slices.Contains(t.Partitions, p.Partition) {
				return true
			}
		}
		return false
	}
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	for _, p := range sortedTPs(f.moves) {
		if !want(p) {
			continue
		}
		m := f.moves[p]
		rt := kmsg.NewListPartitionReassignmentsResponseTopic()
		rt.Topic = p.Topic
		rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		rp.Partition = p.Partition
		rp.Replicas = slices.Clone(f.parts[p].replicas)
		rp.AddingReplicas = diff(m.target, m.original)
		rp.RemovingReplicas = diff(m.original, m.target)
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (f *fakeCluster) alterMoves(req *kmsg.AlterPartitionAssignmentsRequest) *kmsg.AlterPartitionAssignmentsResponse {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, rp := range t.Partitions {
			p := tp{t.Topic, rp.Partition}
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			fail := func(e *kerr.Error, msg string) {
				sp.ErrorCode = e.Code
				if msg != "" {
					sp.ErrorMessage = kmsg.StringPtr(msg)
				}
			}
			if e := f.alterErr[p]; e != nil {
				fail(e, "injected")
			} else if _, ok := f.parts[p]; !ok {
				fail(kerr.UnknownTopicOrPartition, "")
			} else if rp.Replicas == nil {
				if _, moving := f.moves[p]; moving {
					m := f.moves[p]
					f.parts[p].replicas, f.parts[p].isr = m.original, slices.Clone(m.original)
					delete(f.moves, p)
				} else {
					fail(kerr.NoReassignmentInProgress, "")
				}
			} else if msg := f.badReplicas(rp.Replicas); msg != "" {
				fail(kerr.InvalidReplicaAssignment, msg)
			} else if _, moving := f.moves[p]; moving || !slices.Equal(f.parts[p].replicas, rp.Replicas) {
				f.move(p, rp.Replicas)
			}
			rt.Partitions = append(rt.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (f *fakeCluster) badReplicas(rs []int32) string {
	if len(rs) == 0 {
		return "empty replica list"
	}
	for i, b := range rs {
		if !slices.Contains(f.brokers, b) {
			return fmt.Sprintf("broker %d is not registered", b)
		}
		if slices.Contains(rs[:i], b) {
			return fmt.Sprintf("broker %d is listed twice", b)
		}
	}
	return ""
}

func (f *fakeCluster) elect(req *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	var targets []tp
	if req.Topics == nil {
		targets = sortedTPs(f.parts)
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			targets = append(targets, tp{t.Topic, p})
		}
	}
	for _, p := range targets {
		var code int16
		fp, ok := f.parts[p]
		switch {
		case !ok:
			code = kerr.UnknownTopicOrPartition.Code
		case req.ElectionType == 0 && fp.leader == fp.replicas[0]:
			code = kerr.ElectionNotNeeded.Code
		case req.ElectionType == 0 && !slices.Contains(fp.isr, fp.replicas[0]):
			code = kerr.PreferredLeaderNotAvailable.Code
		case req.ElectionType == 0:
			fp.leader = fp.replicas[0]
		case fp.leader >= 0:
			code = kerr.ElectionNotNeeded.Code
		default:
			fp.leader = fp.replicas[0]
		}
		i := slices.IndexFunc(resp.Topics, func(t kmsg.ElectLeadersResponseTopic) bool { return t.Topic == p.Topic })
		if i < 0 {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = p.Topic
			resp.Topics = append(resp.Topics, rt)
			i = len(resp.Topics) - 1
		}
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p.Partition, code
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp
}

var throttleKeys = []string{leaderThrottledReplicas, followerThrottledReplicas, leaderThrottledRate, followerThrottledRate}

func (f *fakeCluster) alterConfigs(req *kmsg.IncrementalAlterConfigsRequest) *kmsg.IncrementalAlterConfigsResponse {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		var resource string
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			resource = "topic:" + r.ResourceName
			if _, ok := f.parts[tp{r.ResourceName, 0}]; !ok {
				rr.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
		case kmsg.ConfigResourceTypeBroker:
			resource = "broker:" + r.ResourceName
			if id, err := strconv.Atoi(r.ResourceName); r.ResourceName != "" && (err != nil || !slices.Contains(f.brokers, int32(id))) {
				rr.ErrorCode = kerr.InvalidRequest.Code
			}
		default:
			rr.ErrorCode = kerr.InvalidRequest.Code
		}
		for _, c := range r.Configs {
			if !slices.Contains(throttleKeys, c.Name) {
				rr.ErrorCode, rr.ErrorMessage = kerr.InvalidConfig.Code, kmsg.StringPtr("unknown config "+c.Name)
			}
		}
		if rr.ErrorCode == 0 {
			if f.configs[resource] == nil {
				f.configs[resource] = map[string]string{}
			}
			for _, c := range r.Configs {
				switch c.Op {
				case kmsg.IncrementalAlterConfigOpSet:
					f.configs[resource][c.Name] = *c.Value
				case kmsg.IncrementalAlterConfigOpDelete:
					delete(f.configs[resource], c.Name)
				}
			}
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

func (f *fakeCluster) unregister(req *kmsg.UnregisterBrokerRequest) *kmsg.UnregisterBrokerResponse {
	resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	id := req.BrokerID
	if !slices.Contains(f.brokers, id) {
		resp.ErrorCode = kerr.BrokerIDNotRegistered.Code
		resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("broker %d is not registered", id))
		return resp
	}
	n := 0
	for _, p := range f.parts {
		if slices.Contains(p.replicas, id) {
			n++
		}
	}
	if n == 0 {
		f.brokers = slices.DeleteFunc(f.brokers, func(b int32) bool { return b == id })
		return resp
	}
	f.decommission[id] = true
	resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("broker %d is being decommissioned: moving its replicas of %d partitions to other brokers; it is fenced once they have moved, and unregistered once stopped", id, n))
	return resp
}

// stepDecommission moves one partition off each broker being
// decommissioned, and fences one that has none left.
func (f *fakeCluster) stepDecommission() {
	for id := range f.decommission {
		moved := false
		for _, p := range sortedTPs(f.parts) {
			fp := f.parts[p]
			if !slices.Contains(fp.replicas, id) {
				continue
			}
			for _, b := range f.brokers {
				if b != id && !slices.Contains(fp.replicas, b) {
					fp.replicas[slices.Index(fp.replicas, id)] = b
					fp.isr = slices.Clone(fp.replicas)
					if fp.leader == id {
						fp.leader = fp.replicas[0]
					}
					moved = true
					break
				}
			}
			if moved {
				break
			}
		}
		if !moved {
			f.brokers = slices.DeleteFunc(f.brokers, func(b int32) bool { return b == id })
			delete(f.decommission, id)
		}
	}
}

// describeCluster lists the brokers, the fenced ones marked when asked
// (v2, KIP-1073); broker 1 is the controller.
func (f *fakeCluster) describeCluster(req *kmsg.DescribeClusterRequest) *kmsg.DescribeClusterResponse {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ClusterID, resp.ControllerID = "fake", 1
	for _, id := range f.brokers {
		if f.fenced[id] && !req.IncludeFencedBrokers {
			continue
		}
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port, b.IsFenced = id, f.host, f.port, f.fenced[id]
		resp.Brokers = append(resp.Brokers, b)
	}
	return resp
}

// describeQuorum answers as a KRaft controller: broker 1 leads, every
// broker is a voter, with its lastFetch.
func (f *fakeCluster) describeQuorum(req *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse {
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	t := kmsg.NewDescribeQuorumResponseTopic()
	t.Topic = "__cluster_metadata"
	p := kmsg.NewDescribeQuorumResponseTopicPartition()
	p.LeaderID, p.LeaderEpoch, p.HighWatermark = 1, 1, 10
	for _, id := range f.brokers {
		r := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		r.ReplicaID, r.LogEndOffset = id, 10
		if ts, ok := f.lastFetch[id]; ok {
			r.LastFetchTimestamp, r.LastCaughtUpTimestamp = ts, ts
		}
		p.CurrentVoters = append(p.CurrentVoters, r)
	}
	t.Partitions = append(t.Partitions, p)
	resp.Topics = append(resp.Topics, t)
	return resp
}
