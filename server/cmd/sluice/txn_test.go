package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestTxnUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"txn", "list", "x"}, `unexpected argument "x"`},
		{[]string{"txn", "describe"}, "--transactional-id is required"},
		{[]string{"txn", "describe-producers", "--partition", "0"}, "--topic is required"},
		{[]string{"txn", "describe-producers", "--topic", "t"}, "--partition is required"},
		{[]string{"txn", "describe-producers", "--topic", "t", "--partition", "-1"}, "--partition must be a partition number"},
		{[]string{"txn", "describe-producers", "--topic", "t", "--partition", "0", "--broker-id", "-2"}, "--broker-id -2 is not a broker id"},
		{[]string{"txn", "find-hanging"}, "give --topic or --broker-id"},
		{[]string{"txn", "find-hanging", "--broker-id", "1", "--partition", "0"}, "--partition needs --topic"},
		{[]string{"txn", "find-hanging", "--topic", "t", "--max-transaction-timeout", "-1"}, "--max-transaction-timeout must not be negative"},
		{[]string{"txn", "find-hanging", "--topic", "t", "--max-transaction-timeout", "1.5"}, `invalid argument "1.5"`},
		{[]string{"txn", "abort", "--partition", "0", "--start-offset", "1"}, "--topic is required"},
		{[]string{"txn", "abort", "--topic", "t", "--start-offset", "1"}, "--partition is required"},
		{[]string{"txn", "abort", "--topic", "t", "--partition", "0"}, "either with --start-offset or with --producer-id"},
		{[]string{"txn", "abort", "--topic", "t", "--partition", "0", "--start-offset", "-1"}, "--start-offset must not be negative"},
		{[]string{"txn", "abort", "--topic", "t", "--partition", "0", "--start-offset", "1", "--producer-id", "3"}, "not both"},
		{[]string{"txn", "abort", "--topic", "t", "--partition", "0", "--producer-id", "3"}, "--producer-epoch is required"},
		{[]string{"txn", "abort", "--topic", "t", "--partition", "0", "--producer-id", "3", "--producer-epoch", "1"}, "--coordinator-epoch is required"},
		{[]string{"txn", "abort", "--topic", "t", "--partition", "0", "--producer-epoch", "1", "--coordinator-epoch", "1"}, "--producer-id is required"},
		{[]string{"txn", "abort", "--topic", "t", "--partition", "0", "--producer-id", "3", "--producer-epoch", "40000", "--coordinator-epoch", "1"}, "--producer-epoch must be 0 to 32767"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errOut := sluice(t, append(tc.args, "--bootstrap-server", "127.0.0.1:1")...)
			if code != 2 || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "-h for help") {
				t.Errorf("exit %d, %q; want 2 and %q", code, errOut, tc.want)
			}
		})
	}
	for _, tc := range [][]string{
		{"txn", "a command is required: list, describe, describe-producers, find-hanging or abort"},
		{"txn commit", `unknown command "commit"`},
	} {
		code, _, errOut := sluice(t, strings.Fields(tc[0])...)
		if code != 2 || !strings.Contains(errOut, tc[1]) {
			t.Errorf("sluice %s: exit %d, %q; want 2 and %q", tc[0], code, errOut, tc[1])
		}
	}
	code, out, _ := sluice(t, "txn", "-h")
	if code != 0 {
		t.Errorf("txn -h: exit %d", code)
	}
	wantContains(t, "txn -h", out, "list ", "describe ", "describe-producers ", "find-hanging ", "abort ")
	_, out, _ = sluice(t, "--help")
	wantContains(t, "sluice --help", out, "txn ")
}

// producer is a DescribeProducers answer's producer of orders-0.
func producer(pid int64, epoch int16, coordEpoch int32, start, last int64) kadm.DescribedProducer {
	return kadm.DescribedProducer{Leader: 1, Topic: "orders", Partition: 0, ProducerID: pid, ProducerEpoch: epoch,
		LastSequence: 4, LastTimestamp: last, CoordinatorEpoch: coordEpoch, CurrentTxnStartOffset: start}
}

func on(d kadm.DescribedProducer, topic string, partition int32) kadm.DescribedProducer {
	d.Topic, d.Partition = topic, partition
	return d
}

// TestTxnHangingDecision is find-hanging's decision over kadm's answers,
// as Kafka's FindHangingTransactionsCommand makes it.
func TestTxnHangingDecision(t *testing.T) {
	now := time.UnixMilli(10_000_000)
	timeout := 15 * time.Minute
	old := now.Add(-timeout - time.Millisecond).UnixMilli() // wrote nothing for longer than the timeout
	recent := now.Add(-timeout).UnixMilli()                 // exactly the timeout: not a candidate (Kafka: duration > timeout)
	ongoing := func(id string, pid int64, parts kadm.TopicsSet) kadm.DescribedTransaction {
		return kadm.DescribedTransaction{Coordinator: 1, TxnID: id, State: "Ongoing", ProducerID: pid, Topics: parts}
	}
	listed := func(pairs ...any) kadm.ListedTransactions {
		l := kadm.ListedTransactions{}
		for i := 0; i < len(pairs); i += 2 {
			id, pid := pairs[i].(string), int64(pairs[i+1].(int))
			l[id] = kadm.ListedTransaction{Coordinator: 1, TxnID: id, ProducerID: pid, State: "Ongoing"}
		}
		return l
	}
	for _, tc := range []struct {
		name      string
		producers []kadm.DescribedProducer
		listed    kadm.ListedTransactions
		described kadm.DescribedTransactions
		open      []int64 // the candidates' producer ids
		want      []int64 // the hanging ones'
		wantErr   error
	}{
		{name: "no open transaction", producers: []kadm.DescribedProducer{producer(1, 0, 0, -1, old)}},
		{name: "open, but within the timeout", producers: []kadm.DescribedProducer{producer(1, 0, 0, 5, recent)}},
		{
			name:      "open and old, no transactional id has its producer id",
			producers: []kadm.DescribedProducer{producer(1, 0, 0, 5, old)},
			listed:    kadm.ListedTransactions{}, described: kadm.DescribedTransactions{},
			open: []int64{1}, want: []int64{1},
		},
		{
			name:      "the id listed belongs to another producer id",
			producers: []kadm.DescribedProducer{producer(1, 0, 0, 5, old)},
			listed:    listed("other", 2), described: kadm.DescribedTransactions{"other": ongoing("other", 2, kadm.TopicsSet{"orders": {0: {}}})},
			open: []int64{1}, want: []int64{1},
		},
		{
			name:      "the coordinator no longer knows the id",
			producers: []kadm.DescribedProducer{producer(1, 0, 0, 5, old)},
			listed:    listed("tx", 1),
			described: kadm.DescribedTransactions{"tx": {Coordinator: 1, TxnID: "tx", ProducerID: -1, Err: kerr.TransactionalIDNotFound}},
			open:      []int64{1}, want: []int64{1},
		},
		{
			name:      "the id is listed but not described",
			producers: []kadm.DescribedProducer{producer(1, 0, 0, 5, old)},
			listed:    listed("tx", 1), described: kadm.DescribedTransactions{},
			open: []int64{1}, want: []int64{1},
		},
		{
			name:      "an ongoing transaction holds the partition: not hanging",
			producers: []kadm.DescribedProducer{producer(1, 0, 0, 5, old)},
			listed:    listed("tx", 1), described: kadm.DescribedTransactions{"tx": ongoing("tx", 1, kadm.TopicsSet{"orders": {0: {}}})},
			open: []int64{1},
		},
		{
			name:      "a transaction being completed still lacks the partition's marker: not hanging",
			producers: []kadm.DescribedProducer{producer(1, 0, 0, 5, old)},
			listed:    listed("tx", 1),
			described: kadm.DescribedTransactions{"tx": {Coordinator: 1, TxnID: "tx", State: "PrepareAbort", ProducerID: 1, Topics: kadm.TopicsSet{"orders": {0: {}}}}},
			open:      []int64{1},
		},
		{
			name:      "the id's transaction is on other partitions",
			producers: []kadm.DescribedProducer{producer(1, 0, 0, 5, old), on(producer(1, 0, 0, 9, old), "orders", 1)},
			listed:    listed("tx", 1), described: kadm.DescribedTransactions{"tx": ongoing("tx", 1, kadm.TopicsSet{"orders": {1: {}}, "billing": {0: {}}})},
			open: []int64{1, 1}, want: []int64{1},
		},
		{
			name:      "the id's transaction is over (no partitions)",
			producers: []kadm.DescribedProducer{producer(1, 0, 0, 5, old)},
			listed:    listed("tx", 1),
			described: kadm.DescribedTransactions{"tx": {Coordinator: 1, TxnID: "tx", State: "CompleteCommit", ProducerID: 1, StartTimestamp: -1}},
			open:      []int64{1}, want: []int64{1},
		},
		{
			name: "several producers, some hanging",
			producers: []kadm.DescribedProducer{
				producer(3, 0, 0, 20, old), producer(1, 0, 0, 5, old), producer(2, 0, 0, 7, recent), producer(4, 0, 0, -1, old),
				on(producer(5, 0, 0, 2, old), "billing", 0),
			},
			listed:    listed("tx1", 1, "tx3", 3, "unrelated", 9),
			described: kadm.DescribedTransactions{"tx1": ongoing("tx1", 1, kadm.TopicsSet{"orders": {0: {}}}), "tx3": ongoing("tx3", 3, kadm.TopicsSet{"billing": {0: {}}})},
			open:      []int64{3, 1, 5}, want: []int64{5, 3}, // sorted by topic, partition, producer id
		},
		{
			name:      "the coordinator fails to describe the id: nothing is decided",
			producers: []kadm.DescribedProducer{producer(1, 0, 0, 5, old)},
			listed:    listed("tx", 1),
			described: kadm.DescribedTransactions{"tx": {Coordinator: 1, TxnID: "tx", Err: kerr.CoordinatorLoadInProgress}},
			open:      []int64{1}, wantErr: kerr.CoordinatorLoadInProgress,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open := openTransactions(tc.producers, now, timeout)
			var pids []int64
			for _, d := range open {
				pids = append(pids, d.ProducerID)
			}
			if !slices.Equal(pids, tc.open) {
				t.Fatalf("candidates %v, want %v", pids, tc.open)
			}
			hanging, err := hangingTransactions(open, tc.listed, tc.described)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			pids = nil
			for _, d := range hanging {
				pids = append(pids, d.ProducerID)
			}
			if !slices.Equal(pids, tc.want) {
				t.Errorf("hanging %v, want %v", pids, tc.want)
			}
		})
	}
	// No timeout: any open transaction that wrote before now.
	if got := openTransactions([]kadm.DescribedProducer{producer(1, 0, 0, 0, now.UnixMilli()-1), producer(2, 0, 0, 0, now.UnixMilli())}, now, 0); len(got) != 1 || got[0].ProducerID != 1 {
		t.Errorf("--max-transaction-timeout 0: candidates %+v", got)
	}
}

func TestTxnAbortSpecAt(t *testing.T) {
	p := tp{"orders", 0}
	producers := []kadm.DescribedProducer{producer(1, 2, 7, -1, 0), producer(2, 3, -1, 10, 0), producer(3, 4, 5, 20, 0)}
	for _, tc := range []struct {
		offset int64
		want   abortSpec
	}{
		{10, abortSpec{p, 2, 3, 0}}, // no marker yet: coordinator epoch 0, as Kafka's tool
		{20, abortSpec{p, 3, 4, 5}},
	} {
		got, err := abortSpecAt(p, producers, tc.offset)
		if err != nil || got != tc.want {
			t.Errorf("offset %d: %+v, %v; want %+v", tc.offset, got, err, tc.want)
		}
	}
	for _, off := range []int64{-1, 0, 15} {
		if _, err := abortSpecAt(p, producers, off); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("could not find any open transaction starting at offset %d on partition orders-0", off)) {
			t.Errorf("offset %d: %v", off, err)
		}
	}
}

// TestTxnOutput: the tables print kafka-transactions.sh's columns.
func TestTxnOutput(t *testing.T) {
	now := time.UnixMilli(1_764_583_260_000)
	var b bytes.Buffer
	printTxnList(&b, []txnListed{{"payments", 1, 4001, "Ongoing"}, {"tx-a", 3, 12, "CompleteCommit"}})
	want := `TransactionalId  Coordinator  ProducerId  TransactionState
payments         1            4001        Ongoing
tx-a             3            12          CompleteCommit
`
	if b.String() != want {
		t.Errorf("list:\n%s\nwant:\n%s", b.String(), want)
	}

	b.Reset()
	d := describedTxn(kadm.DescribedTransaction{Coordinator: 2, TxnID: "payments", State: "Ongoing", TimeoutMillis: 60000, StartTimestamp: 1_764_583_200_000,
		ProducerID: 4001, ProducerEpoch: 3, Topics: kadm.TopicsSet{"orders": {1: {}, 0: {}}, "billing": {2: {}}}}, now)
	printTxnDescribe(&b, d)
	want = `CoordinatorId  TransactionalId  ProducerId  ProducerEpoch  TransactionState  TransactionTimeoutMs  CurrentTransactionStartTimeMs  TransactionDurationMs  TopicPartitions
2              payments         4001        3              Ongoing           60000                 1764583200000                  60000                  billing-2,orders-0,orders-1
`
	if b.String() != want {
		t.Errorf("describe:\n%s\nwant:\n%s", b.String(), want)
	}
	js, _ := json.Marshal(d)
	if got := string(js); got != `{"coordinator":2,"transactional_id":"payments","producer_id":4001,"producer_epoch":3,"state":"Ongoing","transaction_timeout_ms":60000,"start_time_ms":1764583200000,"duration_ms":60000,"topic_partitions":[{"topic":"billing","partition":2},{"topic":"orders","partition":0},{"topic":"orders","partition":1}]}` {
		t.Errorf("describe --json: %s", got)
	}

	b.Reset()
	printTxnDescribe(&b, describedTxn(kadm.DescribedTransaction{Coordinator: 2, TxnID: "idle", State: "Empty", TimeoutMillis: 60000, StartTimestamp: -1, ProducerID: 7}, now))
	want = `CoordinatorId  TransactionalId  ProducerId  ProducerEpoch  TransactionState  TransactionTimeoutMs  CurrentTransactionStartTimeMs  TransactionDurationMs  TopicPartitions
2              idle             7           0              Empty             60000                 None                           None                   
`
	if b.String() != want {
		t.Errorf("describe without a transaction:\n%q\nwant:\n%q", b.String(), want)
	}

	b.Reset()
	printTxnProducers(&b, []txnProducer{producerRow(producer(4001, 3, 5, 120, 1_764_583_200_000)), producerRow(producer(4002, 0, -1, -1, 1_764_583_100_000))})
	want = `ProducerId  ProducerEpoch  LatestCoordinatorEpoch  LastSequence  LastTimestamp  CurrentTransactionStartOffset
4001        3              5                       4             1764583200000  120
4002        0              -1                      4             1764583100000  None
`
	if b.String() != want {
		t.Errorf("describe-producers:\n%s\nwant:\n%s", b.String(), want)
	}

	b.Reset()
	r := producerRow(producer(4001, 3, -1, 120, 1_764_580_000_000))
	mins := int64(54)
	r.DurationMin = &mins
	printHanging(&b, []txnProducer{r})
	want = `Topic   Partition  ProducerId  ProducerEpoch  CoordinatorEpoch  StartOffset  LastTimestamp  Duration(min)
orders  0          4001        3              -1                120          1764580000000  54
`
	if b.String() != want {
		t.Errorf("find-hanging:\n%s\nwant:\n%s", b.String(), want)
	}
}

// openTxn starts a transaction of txnID on topic's partition 0 with
// values, and leaves it open.
func openTxn(t *testing.T, bs, txnID, topic string, values ...string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bs), kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(testCtx(t), &kgo.Record{Partition: 0, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %q in a transaction: %v", v, err)
		}
	}
	return cl
}

// wantHeader checks the columns of the table out starts with.
func wantHeader(t *testing.T, what, out, cols string) {
	t.Helper()
	first, _, _ := strings.Cut(out, "\n")
	if strings.Join(strings.Fields(first), " ") != cols {
		t.Errorf("%s: header %q, want the columns %s", what, first, cols)
	}
}

// leaderOf is the leader of topic's partition.
func leaderOf(t *testing.T, adm *kadm.Client, topic string, p int32) int32 {
	t.Helper()
	m, err := adm.Metadata(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	return m.Topics[topic].Partitions[p].Leader
}

// TestTxnCommands runs every txn command against Sluice and kfake with a
// transaction left open. (Sluice needs the transaction coordinator:
// InitProducerId with a transactional id, AddPartitionsToTxn,
// ListTransactions, DescribeTransactions, DescribeProducers and
// WriteTxnMarkers.)
func TestTxnCommands(t *testing.T) {
	servers(t, func(t *testing.T, bs string) {
		b := []string{"--bootstrap-server", bs}
		adm := adminClient(t, bs)
		mustSluice(t, append([]string{"topic", "create", "--topic", "orders", "--partitions", "2"}, b...)...)
		openTxn(t, bs, "tx-orders", "orders", "a", "b")

		out := mustSluice(t, append([]string{"txn", "list"}, b...)...)
		wantHeader(t, "list", out, "TransactionalId Coordinator ProducerId TransactionState")
		wantContains(t, "list", out, "tx-orders", "Ongoing")
		var listed []txnListed
		if err := json.Unmarshal([]byte(mustSluice(t, append([]string{"txn", "list", "--json"}, b...)...)), &listed); err != nil || len(listed) != 1 {
			t.Fatalf("list --json: %v %+v", err, listed)
		}
		pid := listed[0].ProducerID
		if listed[0].TransactionalID != "tx-orders" || listed[0].State != "Ongoing" || pid < 0 {
			t.Errorf("list --json: %+v", listed[0])
		}
		out = mustSluice(t, append([]string{"txn", "list", "--duration-filter", "3600000"}, b...)...)
		if strings.Contains(out, "tx-orders") {
			t.Errorf("list --duration-filter 1h lists a transaction a second old:\n%s", out)
		}

		out = mustSluice(t, append([]string{"txn", "describe", "--transactional-id", "tx-orders"}, b...)...)
		wantHeader(t, "describe", out, "CoordinatorId TransactionalId ProducerId ProducerEpoch TransactionState TransactionTimeoutMs CurrentTransactionStartTimeMs TransactionDurationMs TopicPartitions")
		wantContains(t, "describe", out, "tx-orders", "Ongoing", "orders-0\n")
		var d txnDescribed
		if err := json.Unmarshal([]byte(mustSluice(t, append([]string{"txn", "describe", "--transactional-id", "tx-orders", "--json"}, b...)...)), &d); err != nil {
			t.Fatal(err)
		}
		if d.ProducerID != pid || d.State != "Ongoing" || d.StartTimeMs < 0 || d.DurationMs < 0 || !slices.Equal(d.Partitions, []txnPartition{{"orders", 0}}) {
			t.Errorf("describe --json: %+v", d)
		}
		wantExit(t, 1, append([]string{"txn", "describe", "--transactional-id", "nope"}, b...),
			"sluice txn describe: transactional id nope: TRANSACTIONAL_ID_NOT_FOUND", "hint: the coordinator knows no such transactional id")

		out = mustSluice(t, append([]string{"txn", "describe-producers", "--topic", "orders", "--partition", "0"}, b...)...)
		wantHeader(t, "describe-producers", out, "ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence LastTimestamp CurrentTransactionStartOffset")
		wantContains(t, "describe-producers", out, fmt.Sprint(pid))
		var ps []txnProducer
		leader := leaderOf(t, adm, "orders", 0)
		if err := json.Unmarshal([]byte(mustSluice(t, append([]string{"txn", "describe-producers", "--topic", "orders", "--partition", "0", "--broker-id", fmt.Sprint(leader), "--json"}, b...)...)), &ps); err != nil || len(ps) != 1 {
			t.Fatalf("describe-producers --json: %v %+v", err, ps)
		}
		if ps[0].ProducerID != pid || ps[0].ProducerEpoch != d.ProducerEpoch || ps[0].CurrentTxnStartOffset != 0 || ps[0].LastSequence != 1 {
			t.Errorf("describe-producers --json: %+v (the transaction is producer %d epoch %d from offset 0)", ps[0], pid, d.ProducerEpoch)
		}
		out = mustSluice(t, append([]string{"txn", "describe-producers", "--topic", "orders", "--partition", "1"}, b...)...)
		if strings.Count(out, "\n") != 1 {
			t.Errorf("describe-producers of a partition no transaction wrote:\n%s", out)
		}
		wantExit(t, 1, append([]string{"txn", "describe-producers", "--topic", "orders", "--partition", "9"}, b...), "orders-9", "UNKNOWN_TOPIC_OR_PARTITION")

		// The open transaction is a candidate (no timeout), but its
		// coordinator holds it: nothing hangs.
		time.Sleep(5 * time.Millisecond)
		const header = "Topic  Partition  ProducerId  ProducerEpoch  CoordinatorEpoch  StartOffset  LastTimestamp  Duration(min)\n"
		for _, args := range [][]string{
			{"--topic", "orders", "--max-transaction-timeout", "0"},
			{"--topic", "orders", "--partition", "0", "--max-transaction-timeout", "0"},
			{"--broker-id", fmt.Sprint(leader), "--max-transaction-timeout", "0"},
			{"--topic", "orders"},
		} {
			if out := mustSluice(t, append(append([]string{"txn", "find-hanging"}, args...), b...)...); out != header {
				t.Errorf("find-hanging %v:\n%s", args, out)
			}
		}
		if out := mustSluice(t, append([]string{"txn", "find-hanging", "--topic", "orders", "--max-transaction-timeout", "0", "--json"}, b...)...); out != "[]\n" {
			t.Errorf("find-hanging --json: %q", out)
		}
		wantExit(t, 1, append([]string{"txn", "find-hanging", "--topic", "nope"}, b...), "UNKNOWN_TOPIC_OR_PARTITION")

		wantExit(t, 1, append([]string{"txn", "abort", "--topic", "orders", "--partition", "0", "--start-offset", "7"}, b...),
			"could not find any open transaction starting at offset 7 on partition orders-0")
		out = mustSluice(t, append([]string{"txn", "abort", "--topic", "orders", "--partition", "0", "--start-offset", "0"}, b...)...)
		wantContains(t, "abort", out, fmt.Sprintf("Aborted the transaction of producer %d (epoch %d, coordinator epoch 0) on orders-0.", pid, d.ProducerEpoch))
		end, err := adm.ListEndOffsets(testCtx(t), "orders")
		if err != nil || end["orders"][0].Offset != 3 {
			t.Fatalf("log end offset %+v, %v; want 3 (two records and the abort marker)", end["orders"][0], err)
		}
		if out := mustSluice(t, append([]string{"consume", "--topic", "orders", "--read-committed", "-e"}, b...)...); out != "" {
			t.Errorf("read_committed reads the aborted records: %q", out)
		}
	})
}

// TestTxnFindHangingAbort finds and aborts a hanging transaction on
// kfake: its DescribeProducers is made to answer with a producer no
// transactional id has, beside the open transaction of a live one, both
// silent for an hour; ListTransactions and DescribeTransactions are
// kfake's own.
func TestTxnFindHangingAbort(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("kfake-txn"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	bs := c.ListenAddrs()[0]
	b := []string{"--bootstrap-server", bs}
	adm := adminClient(t, bs)
	mustSluice(t, append([]string{"topic", "create", "--topic", "orders", "--partitions", "1"}, b...)...)
	openTxn(t, bs, "tx-live", "orders", "a")
	ds, err := adm.DescribeTransactions(testCtx(t), "tx-live")
	if err != nil {
		t.Fatal(err)
	}
	live := ds["tx-live"]
	hourAgo := time.Now().Add(-time.Hour).UnixMilli()
	const ghost = 987654
	c.ControlKey(kmsg.DescribeProducers.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.DescribeProducersRequest)
		resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewDescribeProducersResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewDescribeProducersResponseTopicPartition()
				sp.Partition = p
				if rt.Topic == "orders" && p == 0 {
					for _, ap := range []struct {
						pid        int64
						epoch      int32
						coordEpoch int32
						start      int64
					}{{live.ProducerID, int32(live.ProducerEpoch), 0, 0}, {ghost, 4, -1, 1}} {
						a := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
						a.ProducerID, a.ProducerEpoch, a.CoordinatorEpoch, a.CurrentTxnStartOffset = ap.pid, ap.epoch, ap.coordEpoch, ap.start
						a.LastSequence, a.LastTimestamp = 0, hourAgo
						sp.ActiveProducers = append(sp.ActiveProducers, a)
					}
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	var markers []kmsg.WriteTxnMarkersRequestMarker
	c.ControlKey(kmsg.WriteTxnMarkers.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		markers = append(markers, kr.(*kmsg.WriteTxnMarkersRequest).Markers...)
		return nil, nil, false // kfake writes it
	})

	out := mustSluice(t, append([]string{"txn", "find-hanging", "--topic", "orders"}, b...)...)
	want := fmt.Sprintf(`Topic   Partition  ProducerId  ProducerEpoch  CoordinatorEpoch  StartOffset  LastTimestamp  Duration(min)
orders  0          %d      4              -1                1            %d  60
`, ghost, hourAgo)
	if out != want {
		t.Errorf("find-hanging:\n%s\nwant:\n%s", out, want)
	}
	var rows []txnProducer
	if err := json.Unmarshal([]byte(mustSluice(t, append([]string{"txn", "find-hanging", "--broker-id", "0", "--json"}, b...)...)), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("find-hanging --broker-id --json: %v %+v", err, rows)
	}
	if r := rows[0]; r.ProducerID != ghost || r.CurrentTxnStartOffset != 1 || r.DurationMin == nil || *r.DurationMin != 60 {
		t.Errorf("find-hanging --json: %+v", r)
	}
	// With a timeout above the hour, nothing is a candidate.
	if out := mustSluice(t, append([]string{"txn", "find-hanging", "--topic", "orders", "--max-transaction-timeout", "61"}, b...)...); strings.Count(out, "\n") != 1 {
		t.Errorf("find-hanging --max-transaction-timeout 61:\n%s", out)
	}

	wantExit(t, 0, append([]string{"txn", "abort", "--topic", "orders", "--partition", "0", "--start-offset", "1"}, b...),
		fmt.Sprintf("Aborted the transaction of producer %d (epoch 4, coordinator epoch 0) on orders-0.", ghost))
	wantExit(t, 0, append([]string{"txn", "abort", "--topic", "orders", "--partition", "0", "--producer-id", "55", "--producer-epoch", "2", "--coordinator-epoch", "-1"}, b...),
		"Aborted the transaction of producer 55 (epoch 2, coordinator epoch 0) on orders-0.")
	if len(markers) != 2 {
		t.Fatalf("WriteTxnMarkers markers %+v, want 2", markers)
	}
	for i, want := range []struct {
		pid   int64
		epoch int16
	}{{ghost, 4}, {55, 2}} {
		m := markers[i]
		if m.ProducerID != want.pid || m.ProducerEpoch != want.epoch || m.Committed || m.CoordinatorEpoch != 0 ||
			len(m.Topics) != 1 || m.Topics[0].Topic != "orders" || !slices.Equal(m.Topics[0].Partitions, []int32{0}) {
			t.Errorf("marker %d: %+v, want an abort of producer %d epoch %d, coordinator epoch 0, on orders-0", i, m, want.pid, want.epoch)
		}
	}
}
