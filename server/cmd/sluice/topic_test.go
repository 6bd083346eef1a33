package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestTopicLifecycle(t *testing.T) {
	servers(t, func(t *testing.T, bs string) {
		b := []string{"--bootstrap-server", bs}
		out := mustSluice(t, append([]string{"topic", "create", "--topic", "orders", "--partitions", "3", "--replication-factor", "1", "--config", "retention.ms=3600000"}, b...)...)
		wantContains(t, "create", out, "Created topic orders.")
		wantExit(t, 1, append([]string{"topic", "create", "--topic", "orders", "--partitions", "1"}, b...),
			"sluice topic create: topic orders: TOPIC_ALREADY_EXISTS", "hint: the topic exists already")
		wantExit(t, 0, append([]string{"topic", "create", "--topic", "orders", "--if-not-exists"}, b...), "Topic orders exists already.")
		mustSluice(t, append([]string{"topic", "create", "--topic", "audit"}, b...)...)

		out = mustSluice(t, append([]string{"topic", "list"}, b...)...)
		if got := strings.Fields(out); !slices.Equal(got, []string{"audit", "orders"}) {
			t.Errorf("list: %q", got)
		}
		out = mustSluice(t, append([]string{"topic", "list", "--json"}, b...)...)
		var listed []struct {
			Name       string `json:"name"`
			Partitions int    `json:"partitions"`
		}
		if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed) != 2 || listed[1].Name != "orders" || listed[1].Partitions != 3 {
			t.Errorf("list --json: %v %+v", err, listed)
		}

		out = mustSluice(t, append([]string{"topic", "describe", "--topic", "orders"}, b...)...)
		wantContains(t, "describe", out, "Topic: orders", "PartitionCount: 3", "ReplicationFactor: 1", "Configs: retention.ms=3600000",
			"PARTITION  LEADER  LEADER-EPOCH  REPLICAS  ISR")

		mustSluice(t, append([]string{"topic", "alter", "--topic", "orders", "--config", "cleanup.policy=compact", "--delete-config", "retention.ms"}, b...)...)
		out = mustSluice(t, append([]string{"topic", "describe", "--topic", "orders", "--json"}, b...)...)
		var infos []topicInfo
		if err := json.Unmarshal([]byte(out), &infos); err != nil || len(infos) != 1 {
			t.Fatalf("describe --json: %v\n%s", err, out)
		}
		if c := infos[0].Configs; c["cleanup.policy"] != "compact" || c["retention.ms"] != "" {
			t.Errorf("configs after alter: %v", c)
		}
		wantExit(t, 1, append([]string{"topic", "alter", "--topic", "nope", "--config", "retention.ms=1"}, b...), "topic nope: UNKNOWN_TOPIC_OR_PARTITION", "hint: check the topic and partition exist (sluice topic list lists the topics")

		wantContains(t, "add-partitions", mustSluice(t, append([]string{"topic", "add-partitions", "--topic", "orders", "--partitions", "5"}, b...)...), "Topic orders has 5 partitions now (was 3).")
		wantExit(t, 1, append([]string{"topic", "add-partitions", "--topic", "orders", "--partitions", "2"}, b...), "INVALID_PARTITIONS", "hint: partitions only grow")
		out = mustSluice(t, append([]string{"topic", "describe", "--topic", "orders", "--json"}, b...)...)
		infos = nil
		if err := json.Unmarshal([]byte(out), &infos); err != nil || len(infos[0].Partitions) != 5 {
			t.Errorf("after add-partitions: %v %s", err, out)
		}

		wantContains(t, "delete", mustSluice(t, append([]string{"topic", "delete", "--topic", "orders", "--topic", "audit"}, b...)...), "Deleted topic audit.", "Deleted topic orders.")
		wantExit(t, 1, append([]string{"topic", "delete", "--topic", "orders"}, b...), "Topic orders: UNKNOWN_TOPIC_OR_PARTITION", "hint (UNKNOWN_TOPIC_OR_PARTITION)")
		wantExit(t, 0, append([]string{"topic", "delete", "--topic", "orders", "--if-exists"}, b...), "Topic orders does not exist.")
		wantExit(t, 1, append([]string{"topic", "describe", "--topic", "orders"}, b...), "topic orders: UNKNOWN_TOPIC_OR_PARTITION")
	})
}

func TestTopicUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"topic", "create"},
		// Kafka's TopicCommand refuses an explicit count below 1; only an
		// omitted flag means the cluster's default.
		{"topic", "create", "--topic", "t", "--partitions", "0"},
		{"topic", "create", "--topic", "t", "--partitions", "-1"},
		{"topic", "create", "--topic", "t", "--replication-factor", "0"},
		{"topic", "create", "--topic", "t", "--replication-factor", "-1"},
		{"topic", "create", "--topic", "t", "--partitions", "2", "--replica-assignment", "1,1"},
		{"topic", "create", "--topic", "t", "--config", "novalue"},
		{"topic", "create", "--topic", "t", "--replica-assignment", "1:2,1"},
		{"topic", "alter", "--topic", "t"},
		{"topic", "add-partitions", "--topic", "t"},
		{"topic", "delete"},
		{"topic", "frobnicate"},
	} {
		code, _, errOut := sluice(t, append(args, "--bootstrap-server", "127.0.0.1:1")...)
		if code != 2 || !strings.Contains(errOut, "-h for help") {
			t.Errorf("sluice %s: exit %d, %q; want 2 and a usage line", strings.Join(args, " "), code, errOut)
		}
	}
}

// An omitted --partitions or --replication-factor sends -1 in
// CreateTopics (the cluster's num.partitions and
// default.replication.factor, KIP-464), a given one its value.
func TestTopicCreateDefaultsSendMinusOne(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	b := []string{"--bootstrap-server", c.ListenAddrs()[0]}
	var (
		mu   sync.Mutex
		sent [][2]int32 // NumPartitions, ReplicationFactor of each topic asked for
	)
	c.ControlKey(kmsg.CreateTopics.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		for _, rt := range kr.(*kmsg.CreateTopicsRequest).Topics {
			sent = append(sent, [2]int32{rt.NumPartitions, int32(rt.ReplicationFactor)})
		}
		return nil, nil, false // kfake creates the topic
	})
	for i, tc := range []struct {
		flags []string
		want  [2]int32
	}{
		{nil, [2]int32{-1, -1}},
		{[]string{"--partitions", "3"}, [2]int32{3, -1}},
		{[]string{"--replication-factor", "1"}, [2]int32{-1, 1}},
	} {
		mu.Lock()
		sent = nil
		mu.Unlock()
		topic := fmt.Sprintf("t%d", i)
		mustSluice(t, append(append([]string{"topic", "create", "--topic", topic}, tc.flags...), b...)...)
		mu.Lock()
		got := slices.Clone(sent)
		mu.Unlock()
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("sluice topic create %v: sent (partitions, replication factor) %v, want [%v]", tc.flags, got, tc.want)
		}
	}
}

func TestTopicCreateReplicaAssignment(t *testing.T) {
	bs := startSluice(t)
	b := []string{"--bootstrap-server", bs}
	mustSluice(t, append([]string{"topic", "create", "--topic", "placed", "--replica-assignment", "1,1"}, b...)...)
	out := mustSluice(t, append([]string{"topic", "describe", "--topic", "placed", "--json"}, b...)...)
	var infos []topicInfo
	if err := json.Unmarshal([]byte(out), &infos); err != nil || len(infos) != 1 || len(infos[0].Partitions) != 2 {
		t.Fatalf("describe: %v %s", err, out)
	}
	for _, p := range infos[0].Partitions {
		if !slices.Equal(p.Replicas, []int32{1}) || p.Leader != 1 {
			t.Errorf("partition %d: replicas %v leader %d, want [1] 1", p.Partition, p.Replicas, p.Leader)
		}
	}
	// Broker 7 does not exist.
	wantExit(t, 1, append([]string{"topic", "create", "--topic", "misplaced", "--replica-assignment", "7"}, b...), "topic misplaced: INVALID_REPLICA_ASSIGNMENT", "hint:")
}

func TestTopicDescribeGolden(t *testing.T) {
	bs := startSluice(t)
	b := []string{"--bootstrap-server", bs}
	mustSluice(t, append([]string{"topic", "create", "--topic", "orders", "--partitions", "2", "--config", "retention.ms=3600000", "--config", "cleanup.policy=delete"}, b...)...)
	mustSluice(t, append([]string{"topic", "create", "--topic", "audit", "--partitions", "1"}, b...)...)
	produceRecords(t, bs, "orders", 0, "a", "bb", "ccc")
	produceRecords(t, bs, "orders", 1, "dddd")
	out := mustSluice(t, append([]string{"topic", "describe"}, b...)...)
	golden(t, "topic_describe", topicIDRe.ReplaceAllString(out, "TopicId: <id>"))
}

// TestTopicThreeBrokers places partitions explicitly on a three-node
// Sluice cluster, at create and when adding partitions, and describes
// the cluster and the topic (replicas, ISR, sizes from each leader).
func TestTopicThreeBrokers(t *testing.T) {
	bs := startSluiceCluster(t, 3)
	b := []string{"--bootstrap-server", bs}
	// The brokers register with the controller as they start, fenced
	// until they caught up (DescribeCluster v2 lists them meanwhile).
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, out, _ := sluice(t, append([]string{"cluster", "describe"}, b...)...)
		if strings.Contains(out, "Brokers: 3") && strings.Contains(out, "Fenced brokers: none") {
			wantContains(t, "cluster describe", out, "Controller: ", "\n1   127.0.0.1", "\n2   127.0.0.1", "\n3   127.0.0.1")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster describe:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	mustSluice(t, append([]string{"topic", "create", "--topic", "placed", "--replica-assignment", "1:2,2:3,3:1"}, b...)...)
	mustSluice(t, append([]string{"topic", "add-partitions", "--topic", "placed", "--partitions", "4", "--replica-assignment", "3:2"}, b...)...)
	want := [][]int32{{1, 2}, {2, 3}, {3, 1}, {3, 2}}
	var infos []topicInfo
	for {
		out := mustSluice(t, append([]string{"topic", "describe", "--topic", "placed", "--json"}, b...)...)
		infos = nil // Unmarshal would keep fields the JSON leaves out
		if err := json.Unmarshal([]byte(out), &infos); err != nil || len(infos) != 1 {
			t.Fatalf("describe: %v %s", err, out)
		}
		// Leaders are elected, and followers join the ISR, as they start.
		ready := len(infos[0].Partitions) == len(want)
		for _, p := range infos[0].Partitions {
			ready = ready && len(p.ISR) == 2 && p.Error == "" && p.Size >= 0
		}
		if ready || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if infos[0].ReplicationFactor != 2 || len(infos[0].Partitions) != len(want) {
		t.Fatalf("describe: %+v", infos[0])
	}
	for i, p := range infos[0].Partitions {
		if !slices.Equal(p.Replicas, want[i]) || !slices.Contains(p.Replicas, p.Leader) || len(p.ISR) != 2 || p.Size < 0 || p.Error != "" {
			t.Errorf("partition %d: %+v, want replicas %v, one of them leading, an ISR of 2, a size and no error", i, p, want[i])
		}
	}
	wantExit(t, 2, append([]string{"topic", "add-partitions", "--topic", "placed", "--partitions", "6", "--replica-assignment", "1:2"}, b...),
		"--replica-assignment lists 1 partitions, but growing placed from 4 to 6 adds 2")
	wantExit(t, 1, append([]string{"topic", "create", "--topic", "misplaced", "--replica-assignment", "1:9"}, b...), "INVALID_REPLICA_ASSIGNMENT")
}

// TestTopicListInternal: internal topics are listed, as kafka-topics.sh
// lists them, unless --exclude-internal.
func TestTopicListInternal(t *testing.T) {
	bs := startSluice(t)
	b := []string{"--bootstrap-server", bs}
	mustSluice(t, append([]string{"topic", "create", "--topic", "t", "--partitions", "1"}, b...)...)
	// A group's first commit creates __consumer_offsets.
	mustSluice(t, append([]string{"group", "reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--execute"}, b...)...)
	if got := strings.Fields(mustSluice(t, append([]string{"topic", "list"}, b...)...)); !slices.Equal(got, []string{"__consumer_offsets", "t"}) {
		t.Errorf("list: %q", got)
	}
	if got := strings.Fields(mustSluice(t, append([]string{"topic", "list", "--exclude-internal"}, b...)...)); !slices.Equal(got, []string{"t"}) {
		t.Errorf("list --exclude-internal: %q", got)
	}
	out := mustSluice(t, append([]string{"topic", "describe"}, b...)...)
	wantContains(t, "describe", out, "Topic: __consumer_offsets", "Internal: true", "Topic: t ")
	if out := mustSluice(t, append([]string{"topic", "describe", "--exclude-internal"}, b...)...); strings.Contains(out, "__consumer_offsets") {
		t.Errorf("describe --exclude-internal:\n%s", out)
	}
}
