package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// joinGroup starts a classic consumer group member of group on topic,
// waits until it has consumed want records, commits offsets, and returns
// it (running: the group stays active until it is closed).
func joinGroup(t *testing.T, bs, group, topic string, want int, commits map[int32]int64) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bs), kgo.ClientID("app-1"), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// A long poll in flight holds the broker's Close back.
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx := testCtx(t)
	for got := 0; got < want; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", got, want, err)
		}
		got += fs.NumRecords()
	}
	offsets := map[string]map[int32]kgo.EpochOffset{topic: {}}
	for p, o := range commits {
		offsets[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	var commitErr error
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 && commitErr == nil {
					commitErr = kafkaErr(p.ErrorCode, nil)
				}
			}
		}
	})
	if commitErr != nil {
		t.Fatalf("commit: %v", commitErr)
	}
	return cl
}

// waitGroupState polls until group is in state.
func waitGroupState(t *testing.T, adm *kadm.Client, group, state string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ds, err := adm.DescribeGroups(testCtx(t), group)
		if err == nil && ds[group].State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s: state %q, %v; want %s", group, ds[group].State, err, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// committed is a group's committed offsets of topic.
func committed(t *testing.T, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	os, err := adm.FetchOffsets(testCtx(t), group)
	if err != nil {
		t.Fatalf("FetchOffsets %s: %v", group, err)
	}
	out := map[int32]int64{}
	for p, o := range os[topic] {
		if o.Err == nil && o.At >= 0 {
			out[p] = o.At
		}
	}
	return out
}

func wantCommitted(t *testing.T, adm *kadm.Client, group, topic string, want map[int32]int64) {
	t.Helper()
	got := committed(t, adm, group, topic)
	if len(got) != len(want) {
		t.Errorf("group %s commits %v, want %v", group, got, want)
		return
	}
	for p, o := range want {
		if got[p] != o {
			t.Errorf("group %s commits %v, want %v", group, got, want)
			return
		}
	}
}

// TestGroupCommands runs list, describe, reset-offsets, delete-offsets
// and delete against Sluice and kfake, with the same golden files.
func TestGroupCommands(t *testing.T) {
	servers(t, func(t *testing.T, bs string) {
		b := []string{"--bootstrap-server", bs}
		adm := adminClient(t, bs)
		mustSluice(t, append([]string{"topic", "create", "--topic", "orders", "--partitions", "2"}, b...)...)
		produceRecords(t, bs, "orders", 0, "a", "b", "c", "d", "e")
		produceRecords(t, bs, "orders", 1, "x", "y", "z")

		member := joinGroup(t, bs, "g1", "orders", 8, map[int32]int64{0: 3, 1: 1})
		out := mustSluice(t, append([]string{"group", "describe", "--group", "g1"}, b...)...)
		wantContains(t, "describe", out, "app-1")
		golden(t, "group_describe_active", replaceColumn(replaceColumn(out, "CONSUMER-ID", "<member>"), "HOST", "<host>"))
		out = mustSluice(t, append([]string{"group", "describe", "--group", "g1", "--members"}, b...)...)
		wantContains(t, "describe --members", out, "GROUP  CONSUMER-ID", "#PARTITIONS  ASSIGNMENT", "app-1", "2            orders(0,1)")
		out = mustSluice(t, append([]string{"group", "describe", "--group", "g1", "--state"}, b...)...)
		wantContains(t, "describe --state", out, "ASSIGNMENT-STRATEGY", "Stable", " 1\n")

		// Kafka resets only an inactive group, dry run or not.
		wantExit(t, 1, append([]string{"group", "reset-offsets", "--group", "g1", "--topic", "orders", "--to-earliest", "--execute"}, b...),
			"sluice group reset-offsets: group g1: assignments can only be reset if the group 'g1' is inactive, but the current state is Stable", "hint: stop the group's consumers")
		wantCommitted(t, adm, "g1", "orders", map[int32]int64{0: 3, 1: 1})

		member.Close()
		waitGroupState(t, adm, "g1", "Empty")
		out = mustSluice(t, append([]string{"group", "describe", "--group", "g1"}, b...)...)
		golden(t, "group_describe_empty", out)

		out = wantExit(t, 0, append([]string{"group", "reset-offsets", "--group", "g1", "--topic", "orders", "--to-earliest"}, b...), "Dry run: no offsets were changed")
		golden(t, "group_reset_plan", out)
		wantCommitted(t, adm, "g1", "orders", map[int32]int64{0: 3, 1: 1})

		// To an offset beyond the end: kept within the log (Kafka's
		// checkOffsetsRange), and said per partition.
		wantExit(t, 0, append([]string{"group", "reset-offsets", "--group", "g1", "--topic", "orders", "--to-offset", "100", "--execute"}, b...),
			"Group g1, orders-0: offset 100 is past the log end offset: set to 5.", "Group g1, orders-1: offset 100 is past the log end offset: set to 3.")
		wantCommitted(t, adm, "g1", "orders", map[int32]int64{0: 5, 1: 3})
		out = wantExit(t, 0, append([]string{"group", "reset-offsets", "--group", "g1", "--topic", "orders", "--shift-by", "-4"}, b...),
			"Group g1, orders-1: offset -1 is below the log start offset: set to 0.")
		if strings.Contains(out, "orders-0:") {
			t.Errorf("a reset within the log is said to be clamped:\n%s", out)
		}
		out = mustSluice(t, append([]string{"group", "reset-offsets", "--group", "g1", "--topic", "orders:0", "--shift-by", "-2", "--execute"}, b...)...)
		wantContains(t, "shift-by", out, "g1     orders  0          3")
		wantCommitted(t, adm, "g1", "orders", map[int32]int64{0: 3, 1: 3})
		// Every record is stamped 2025-12-01T10:00:00Z.
		mustSluice(t, append([]string{"group", "reset-offsets", "--group", "g1", "--all-topics", "--to-datetime", "2025-12-01T09:59:00Z", "--execute"}, b...)...)
		wantCommitted(t, adm, "g1", "orders", map[int32]int64{0: 0, 1: 0})
		mustSluice(t, append([]string{"group", "reset-offsets", "--group", "g1", "--all-topics", "--by-duration", "PT1H", "--execute"}, b...)...)
		wantCommitted(t, adm, "g1", "orders", map[int32]int64{0: 5, 1: 3})
		mustSluice(t, append([]string{"group", "reset-offsets", "--group", "g1", "--all-topics", "--to-current", "--execute"}, b...)...)
		wantCommitted(t, adm, "g1", "orders", map[int32]int64{0: 5, 1: 3})

		// A group that does not exist yet can be given offsets.
		mustSluice(t, append([]string{"group", "reset-offsets", "--group", "g2", "--topic", "orders:1", "--to-offset", "1", "--execute"}, b...)...)
		wantCommitted(t, adm, "g2", "orders", map[int32]int64{1: 1})
		out = mustSluice(t, append([]string{"group", "list"}, b...)...)
		wantContains(t, "list", out, "GROUP  STATE  PROTOCOL-TYPE", "g1", "g2")
		var listed []struct{ Group string }
		if err := json.Unmarshal([]byte(mustSluice(t, append([]string{"group", "list", "--json"}, b...)...)), &listed); err != nil || len(listed) != 2 {
			t.Errorf("list --json: %v %+v", err, listed)
		}
		mustSluice(t, append([]string{"group", "reset-offsets", "--all-groups", "--topic", "orders", "--to-earliest", "--execute"}, b...)...)
		wantCommitted(t, adm, "g1", "orders", map[int32]int64{0: 0, 1: 0})
		wantCommitted(t, adm, "g2", "orders", map[int32]int64{0: 0, 1: 0})
		wantExit(t, 1, append([]string{"group", "reset-offsets", "--group", "g1", "--topic", "orders:7", "--to-earliest"}, b...), "orders-7: UNKNOWN_TOPIC_OR_PARTITION")

		out = mustSluice(t, append([]string{"group", "delete-offsets", "--group", "g1", "--topic", "orders:1"}, b...)...)
		wantContains(t, "delete-offsets", out, "TOPIC   PARTITION  STATUS", "orders  1          Successful")
		wantCommitted(t, adm, "g1", "orders", map[int32]int64{0: 0})

		wantExit(t, 1, append([]string{"group", "delete", "--group", "g1", "--group", "nope"}, b...), "Deleted group g1.", "Group nope: GROUP_ID_NOT_FOUND", "hint (GROUP_ID_NOT_FOUND)")
		out = wantExit(t, 1, append([]string{"group", "describe", "--group", "g1"}, b...), "sluice group describe: group g1: GROUP_ID_NOT_FOUND", "hint (GROUP_ID_NOT_FOUND): no such group")
		if strings.Contains(out, "Error:") {
			t.Errorf("describe's error is not in every command's format:\n%s", out)
		}
	})
}

// TestGroupDeleteActive: Kafka refuses to delete a group with members,
// and to delete the offsets of a topic its members subscribe to.
func TestGroupDeleteActive(t *testing.T) {
	bs := startSluice(t)
	b := []string{"--bootstrap-server", bs}
	mustSluice(t, append([]string{"topic", "create", "--topic", "orders", "--partitions", "1"}, b...)...)
	produceRecords(t, bs, "orders", 0, "a")
	joinGroup(t, bs, "g1", "orders", 1, map[int32]int64{0: 1})
	wantExit(t, 1, append([]string{"group", "delete", "--group", "g1"}, b...), "Group g1: NON_EMPTY_GROUP", "hint (NON_EMPTY_GROUP): the group has active members")
	wantExit(t, 1, append([]string{"group", "delete-offsets", "--group", "g1", "--topic", "orders"}, b...), "GROUP_SUBSCRIBED_TO_TOPIC", "hint (GROUP_SUBSCRIBED_TO_TOPIC)")
}

func TestGroupUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"group", "describe"},
		{"group", "describe", "--group", "g", "--all-groups"},
		{"group", "reset-offsets", "--group", "g", "--topic", "t"},
		{"group", "reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--to-latest"},
		{"group", "reset-offsets", "--group", "g", "--to-earliest"},
		{"group", "reset-offsets", "--group", "g", "--topic", "t", "--all-topics", "--to-earliest"},
		{"group", "reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--dry-run", "--execute"},
		{"group", "reset-offsets", "--group", "g", "--topic", "t", "--to-datetime", "yesterday"},
		{"group", "reset-offsets", "--group", "g", "--topic", "t", "--by-duration", "P"},
		{"group", "reset-offsets", "--group", "g", "--topic", "t:x", "--to-earliest"},
		{"group", "delete-offsets", "--group", "g"},
		{"group", "delete"},
	} {
		code, _, errOut := sluice(t, append(args, "--bootstrap-server", "127.0.0.1:1")...)
		if code != 2 || !strings.Contains(errOut, "-h for help") {
			t.Errorf("sluice %s: exit %d, %q; want 2 and a usage line", strings.Join(args, " "), code, errOut)
		}
	}
}

// TestGroupConsumerProtocol: a KIP-848 consumer group is described with
// ConsumerGroupDescribe (DescribeGroups does not know it), and is reset
// only once its members are gone.
func TestGroupConsumerProtocol(t *testing.T) {
	bs := startSluice(t)
	b := []string{"--bootstrap-server", bs}
	adm := adminClient(t, bs)
	mustSluice(t, append([]string{"topic", "create", "--topic", "orders", "--partitions", "2"}, b...)...)
	produceRecords(t, bs, "orders", 0, "a", "b")
	cl, err := kgo.NewClient(kgo.SeedBrokers(bs), kgo.ClientID("next-gen"), kgo.ConsumerGroup("g848"), kgo.ConsumeTopics("orders"),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for n := 0; n < 2; {
		n += cl.PollFetches(testCtx(t)).NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	out := mustSluice(t, append([]string{"group", "describe", "--group", "g848"}, b...)...)
	golden(t, "group_describe_consumer_protocol", replaceColumn(replaceColumn(out, "CONSUMER-ID", "<member>"), "HOST", "<host>"))
	out = mustSluice(t, append([]string{"group", "describe", "--group", "g848", "--members"}, b...)...)
	wantContains(t, "--members", out, "next-gen", "2            orders(0,1)")
	wantExit(t, 1, append([]string{"group", "reset-offsets", "--group", "g848", "--topic", "orders", "--to-earliest"}, b...), "is inactive, but the current state is Stable")

	cl.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out = mustSluice(t, append([]string{"group", "describe", "--group", "g848", "--state"}, b...)...)
		if strings.Contains(out, "Empty") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group did not become Empty:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mustSluice(t, append([]string{"group", "reset-offsets", "--group", "g848", "--topic", "orders", "--to-earliest", "--execute"}, b...)...)
	wantCommitted(t, adm, "g848", "orders", map[int32]int64{0: 0, 1: 0})
}
