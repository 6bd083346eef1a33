package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// codes are a partition's answers to Produce, Fetch and ListOffsets.
type codes struct{ produce, fetch, list *kerr.Error }

func (c codes) String() string {
	return fmt.Sprintf("Produce %v, Fetch %v, ListOffsets %v", c.produce, c.fetch, c.list)
}

// produceOne is an acks=all Produce of one record to topic-p (waiting at
// most 1 s for the replicas).
func produceOne(topic string, p int32) *kmsg.ProduceRequest {
	pr := kmsg.NewPtrProduceRequest()
	pr.Acks, pr.TimeoutMillis = -1, 1000
	prt := kmsg.NewProduceRequestTopic()
	prt.Topic = topic
	prp := kmsg.NewProduceRequestTopicPartition()
	prp.Partition = p
	prp.Records = batch.Build(batch.NewBuildOptions(), []batch.Record{{Value: []byte("v")}})
	prt.Partitions = append(prt.Partitions, prp)
	pr.Topics = append(pr.Topics, prt)
	return pr
}

// partitionCodes sends a raw Produce (v11, with a record), Fetch (v12,
// the last by topic name) and ListOffsets (latest) for topic-p on rc and
// returns their error codes (nil for none).
func partitionCodes(rc *rawConn, topic string, p int32) codes {
	rc.t.Helper()
	presp := rc.recv(rc.sendAt(produceOne(topic, p), 11)).(*kmsg.ProduceResponse)

	fr := kmsg.NewPtrFetchRequest()
	fr.ReplicaID, fr.MaxWaitMillis, fr.MaxBytes, fr.SessionEpoch = -1, 0, 1<<20, -1
	frt := kmsg.NewFetchRequestTopic()
	frt.Topic = topic
	frp := kmsg.NewFetchRequestTopicPartition()
	frp.Partition, frp.PartitionMaxBytes, frp.CurrentLeaderEpoch, frp.LogStartOffset = p, 1<<20, -1, -1
	frt.Partitions = append(frt.Partitions, frp)
	fr.Topics = append(fr.Topics, frt)
	fresp := rc.recv(rc.sendAt(fr, 12)).(*kmsg.FetchResponse)

	lr := kmsg.NewPtrListOffsetsRequest()
	lr.ReplicaID = -1
	lrt := kmsg.NewListOffsetsRequestTopic()
	lrt.Topic = topic
	lrp := kmsg.NewListOffsetsRequestTopicPartition()
	lrp.Partition, lrp.Timestamp, lrp.CurrentLeaderEpoch = p, -1, -1
	lrt.Partitions = append(lrt.Partitions, lrp)
	lr.Topics = append(lr.Topics, lrt)
	lresp := rc.recv(rc.send(lr)).(*kmsg.ListOffsetsResponse)

	return codes{
		kerr.ErrorForCode(presp.Topics[0].Partitions[0].ErrorCode).(*kerr.Error),
		kerr.ErrorForCode(fresp.Topics[0].Partitions[0].ErrorCode).(*kerr.Error),
		kerr.ErrorForCode(lresp.Topics[0].Partitions[0].ErrorCode).(*kerr.Error),
	}
}

// A partition the metadata knows answers Produce, Fetch and ListOffsets
// at a broker that does not lead it as Kafka's ReplicaManager and
// Partition answer (getPartitionOrError, getLocalLog,
// appendRecordsToLeader): NOT_LEADER_OR_FOLLOWER whether another broker
// leads it, the broker hosts no replica of it, or no replica leads it
// (its quorum lost; KIP-951's current leader is then -1), never
// UNKNOWN_TOPIC_OR_PARTITION or LEADER_NOT_AVAILABLE; only a partition
// the metadata does not know is UNKNOWN_TOPIC_OR_PARTITION.
func TestClusterLeaderlessPartitionCodes(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(tc.client())
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "three"); err != nil {
		t.Fatal(err)
	}
	createAssigned(t, ctx, tc, "one", []int32{1}) // its only replica on broker 1
	tc.waitLeaders("three", 3)
	tc.waitLeaders("one", 1)
	nl := kerr.NotLeaderForPartition
	addr3 := fmt.Sprintf("127.0.0.1:%d", tc.cports[2])
	rc := dialRaw(t, addr3)
	if got := partitionCodes(rc, "one", 0); got != (codes{nl, nl, nl}) {
		t.Errorf("a partition broker 3 hosts no replica of: %v, want NOT_LEADER_OR_FOLLOWER", got)
	}
	if got, unk := partitionCodes(rc, "one", 7), kerr.UnknownTopicOrPartition; got != (codes{unk, unk, unk}) {
		t.Errorf("a partition the metadata does not know: %v, want UNKNOWN_TOPIC_OR_PARTITION", got)
	}

	// Brokers 1 and 2 gone, broker 3's replica of "three" finds no
	// leader: it stops being one, or never was.
	tc.crash(0)
	tc.crash(1)
	eventually(t, 30*time.Second, "no leader of three-0 on broker 3", func() error {
		rc := dialRaw(t, addr3) // a leader that lost its quorum holds the produce a while
		defer rc.c.Close()
		sp := rc.recv(rc.sendAt(produceOne("three", 0), 11)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if sp.ErrorCode != nl.Code || sp.CurrentLeader.LeaderID != -1 { // KIP-951's hint: none
			return fmt.Errorf("produce: %v, current leader %d", kerr.ErrorForCode(sp.ErrorCode), sp.CurrentLeader.LeaderID)
		}
		return nil
	})
	rc = dialRaw(t, addr3)
	if got := partitionCodes(rc, "three", 0); got != (codes{nl, nl, nl}) {
		t.Errorf("a partition without a leader: %v, want NOT_LEADER_OR_FOLLOWER", got)
	}
	if got := partitionCodes(rc, "one", 0); got != (codes{nl, nl, nl}) {
		t.Errorf("a partition broker 3 hosts no replica of, its leader down: %v, want NOT_LEADER_OR_FOLLOWER", got)
	}
}
