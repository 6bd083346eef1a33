package server

import (
	"crypto/sha256"
	"encoding/base64"
	"slices"
	"strings"

	"github.com/sluicemq/sluice/controller"
	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// What Metadata, DescribeCluster and FindCoordinator say about brokers and
// partitions, whatever the cluster's size (a single node is a one-voter
// cluster: its only broker and controller). The brokers are
// the registered, unfenced ones (KRaft's Metadata leaves fenced brokers
// out), each at its advertised endpoint of the listener the request came
// in on; a partition's leader is this broker's own raft view when it holds
// a replica (the freshest: it changes within an election), else the
// leader's last report in the metadata.

// clusterIDFor is the cluster id: "sluice-single-node" for a single node
// (the quorum synthesized, config.SoloQuorum: the id clients saw before);
// in a cluster one derived from controller.quorum.voters, the same on
// every node (22 characters, as Kafka prints a Uuid).
func clusterIDFor(cfg *config.Config) string {
	if cfg.SoloQuorum() {
		return clusterID
	}
	var ids []string
	for _, v := range cfg.QuorumVoters {
		ids = append(ids, v.Addr())
	}
	slices.Sort(ids)
	sum := sha256.Sum256([]byte("sluice-cluster:" + strings.Join(ids, ",")))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// clientBroker is a broker as Metadata lists it.
type clientBroker struct {
	id   int32
	host string
	port int32
	rack *string
}

// liveBrokers are the brokers clients of the named listener are told
// about, by id.
func (b *Broker) liveBrokers(listener string) []clientBroker {
	var out []clientBroker
	for _, br := range b.meta.Brokers() {
		if br.Fenced {
			continue
		}
		if cb, ok := endpointFor(br, listener); ok {
			out = append(out, cb)
		}
	}
	return out
}

// fencedBrokers are the registered brokers that are fenced, as the clients
// of listener would reach them (DescribeCluster v2, KIP-1073); a single
// node has none.
func (b *Broker) fencedBrokers(listener string) []clientBroker {
	var out []clientBroker
	for _, br := range b.meta.Brokers() {
		if !br.Fenced {
			continue
		}
		if cb, ok := endpointFor(br, listener); ok {
			out = append(out, cb)
		}
	}
	return out
}

// endpointFor is broker br as the clients of listener reach it (its first
// endpoint when it has none of that name).
func endpointFor(br meta.Broker, listener string) (clientBroker, bool) {
	if len(br.Listeners) == 0 {
		return clientBroker{}, false
	}
	ep := br.Listeners[0]
	for _, l := range br.Listeners {
		if l.Name == listener {
			ep = l
		}
	}
	cb := clientBroker{id: br.NodeID, host: ep.Host, port: ep.Port}
	if br.Rack != "" {
		rack := br.Rack
		cb.rack = &rack
	}
	return cb, true
}

// brokerEndpoint is where clients of listener reach broker id; ok is false
// for a broker not registered or fenced.
func (b *Broker) brokerEndpoint(id int32, listener string) (host string, port int32, ok bool) {
	br, ok := b.meta.Broker(id)
	if !ok || br.Fenced {
		return "", 0, false
	}
	cb, ok := endpointFor(br, listener)
	return cb.host, cb.port, ok
}

// controllerForClients is the controller id clients are given: the active
// controller when it is a live broker (combined roles), else this broker
// (KRaft brokers answer clients with a live broker: admin requests sent
// to it are forwarded), so the id is always one of Metadata's brokers.
func (b *Broker) controllerForClients() int32 {
	if id := b.cl.controllerID(); id >= 0 {
		if br, ok := b.meta.Broker(id); ok && !br.Fenced {
			return id
		}
	}
	if br, ok := b.meta.Broker(b.cfg.NodeID); ok && !br.Fenced {
		return b.cfg.NodeID
	}
	return -1
}

// partitionView is what Metadata says about partition p of t.
type partitionView struct {
	leader, epoch          int32
	replicas, isr, offline []int32
	err                    *kerr.Error // LEADER_NOT_AVAILABLE, or nil
}

func (b *Broker) partitionView(t meta.Topic, p int32) partitionView {
	v := partitionView{leader: -1, epoch: -1}
	if int(p) < len(t.Assignments) {
		v.replicas = slices.Clone(t.Assignments[p])
	}
	if int(p) < len(t.Leaders) {
		l := t.Leaders[p]
		v.leader, v.epoch, v.isr = l.Leader, l.LeaderEpoch, slices.Clone(l.ISR)
		if l.LeaderEpoch < 0 {
			// Never reported (a new partition electing its first
			// leader): every replica is in sync, as Kafka starts a
			// partition's ISR.
			v.isr = slices.Clone(v.replicas)
		}
	}
	if part, ok := b.partition(t.Name, p); ok {
		if lead, epoch, known := part.Leader(); known {
			v.leader, v.epoch = int32(lead), epoch
			if part.IsLeader() {
				v.isr = raftIDs(part.ISR())
			}
		} else {
			v.leader = -1
		}
	} else if b.hosts(t, p) {
		// This broker's replica is not open (being opened, or its open
		// failed and is retried): it leads nothing, and one whose log
		// could not be opened is offline, as Kafka reports a replica in
		// an offline log dir.
		if v.leader == b.cfg.NodeID {
			v.leader = -1
		}
		b.mu.RLock()
		_, off := b.offline[topicPartition{t.Name, p}]
		b.mu.RUnlock()
		if off {
			v.offline = append(v.offline, b.cfg.NodeID)
		}
	}
	// A fenced broker leaves every ISR and every leadership, as Kafka's
	// controller takes it out when its session expires (raft progress
	// alone keeps a silent follower in sync for replica.lag.time.max.ms);
	// so does this broker's replica whose log could not be opened.
	off := v.offline
	v.offline, v.isr, v.leader = controller.FenceOut(v.replicas, v.isr, v.leader, func(id int32) bool {
		if slices.Contains(off, id) {
			return false
		}
		br, ok := b.meta.Broker(id)
		return ok && !br.Fenced
	})
	if v.leader < 0 {
		v.err = kerr.LeaderNotAvailable
	}
	return v
}

// metadataBrokers fills a Metadata response's brokers.
func (b *Broker) metadataBrokers(listener string) []kmsg.MetadataResponseBroker {
	var out []kmsg.MetadataResponseBroker
	for _, cb := range b.liveBrokers(listener) {
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port, mb.Rack = cb.id, cb.host, cb.port, cb.rack
		out = append(out, mb)
	}
	return out
}

// leaderEndpoints are the endpoints of the distinct known brokers among
// ids (KIP-951's NodeEndpoints; ids < 0 are skipped), for listener.
func (b *Broker) leaderEndpoints(ids []int32, listener string) []clientBroker {
	if len(ids) == 0 {
		return nil // the common answer: nothing to add, nothing allocated
	}
	var out []clientBroker
	seen := map[int32]bool{}
	for _, id := range ids {
		if id < 0 || seen[id] {
			continue
		}
		seen[id] = true
		host, port, ok := b.brokerEndpoint(id, listener)
		if !ok {
			continue
		}
		cb := clientBroker{id: id, host: host, port: port}
		if br, ok := b.meta.Broker(id); ok && br.Rack != "" {
			rack := br.Rack
			cb.rack = &rack
		}
		out = append(out, cb)
	}
	return out
}
