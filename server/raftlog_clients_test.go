package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Raft's own entries never reach a Kafka client: a log written by three
// raft replicas across several leader changes (internal batches between
// the data of five leader epochs), served by a broker, reads as exactly
// offsets 0..N-1 with the produced values to franz-go, kcat and
// kafka-python, its latest offset is N, and OffsetForLeaderEpoch answers
// each epoch's end where leadership moved.
func TestRaftLogServedToClients(t *testing.T) {
	t.Parallel()
	const topic = "raftlog"
	const rounds, batches, perBatch = 5, 3, 4
	const n = rounds * batches * perBatch
	src := filepath.Join(t.TempDir(), "raft")
	data, base := valueBatches(rounds, batches, perBatch)
	written, internal := raftLog(t, src, data)
	if internal < rounds {
		t.Fatalf("the raft log holds %d entries of raft's own, want at least one per leader epoch (%d)", internal, rounds)
	}
	t.Logf("rounds %+v, %d internal entries", written, internal)

	logDir := t.TempDir()
	b, _ := startBroker(t, logDir)
	if _, err := b.createTopic(topic, 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	tm, _ := b.meta.Topic(topic)
	b.Close()
	installRaftLog(t, logDir, topic, tm.ID, src)
	b, addr := startBroker(t, logDir)
	part, ok := b.partition(topic, 0)
	if !ok {
		t.Fatal("the partition did not open")
	}
	if leo, hw := part.LogEndOffset(), part.HighWatermark(); leo != n || hw != n {
		t.Fatalf("log end offset %d, high watermark %d; want %d", leo, hw, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("%d %s", i, raftLogValue(i))
	}

	t.Run("fetch", func(t *testing.T) {
		// What the broker sends, batch by batch: data batches only, in
		// offset order without a gap, whatever offset a fetch starts at.
		cl := newClient(t, addr)
		tm, _ := b.meta.Topic(topic)
		topicID := tm.ID
		for start := int64(0); start < n; start += 7 {
			next := start
			for next < n {
				req := kmsg.NewPtrFetchRequest()
				req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = -1, 100, 1<<20
				req.SessionEpoch = -1
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic, rt.TopicID = topic, topicID
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = next, 1<<20, -1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, cl)
				if err != nil {
					t.Fatal(err)
				}
				sp := resp.Topics[0].Partitions[0]
				if sp.ErrorCode != 0 || sp.HighWatermark != n {
					t.Fatalf("fetch at %d: error %d, high watermark %d", next, sp.ErrorCode, sp.HighWatermark)
				}
				data := sp.RecordBatches
				if len(data) == 0 {
					t.Fatalf("fetch at %d below the high watermark returned nothing", next)
				}
				for len(data) > 0 {
					h, err := batch.ParseHeader(data)
					if err != nil {
						t.Fatalf("fetch at %d: %v", next, err)
					}
					if h.Control() || h.Attributes&batch.InternalBit != 0 || h.LastOffsetDelta < 0 {
						t.Fatalf("fetch at %d served a control or internal batch at offset %d (attributes %#x)", next, h.BaseOffset, h.Attributes)
					}
					first := h.BaseOffset
					if next > first && next <= h.BaseOffset+int64(h.LastOffsetDelta) {
						first = next // the batch holding the fetch offset
					}
					if first != next {
						t.Fatalf("fetch at %d: batch at %d, want %d (a gap)", start, h.BaseOffset, next)
					}
					next = h.BaseOffset + int64(h.LastOffsetDelta) + 1
					data = data[h.Size():]
				}
			}
		}
	})

	t.Run("franz-go", func(t *testing.T) {
		cl := newClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		var got []string
		for len(got) < n {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("consumed %d of %d records: %v", len(got), n, err)
			}
			if errs := fs.Errors(); len(errs) > 0 {
				t.Fatalf("fetch errors: %v", errs)
			}
			fs.EachRecord(func(r *kgo.Record) {
				got = append(got, fmt.Sprintf("%d %s", r.Offset, r.Value))
			})
		}
		// Nothing after them: a short poll finds no record.
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) { got = append(got, fmt.Sprintf("%d %s", r.Offset, r.Value)) })
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("franz-go consumed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})

	t.Run("ListOffsets", func(t *testing.T) {
		adm := kadm.NewClient(newClient(t, addr))
		end, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		// The broker leads in an epoch of its own (a one-voter raft
		// group: its election is a new term), after every epoch the log
		// was written in, holding no record: the latest offset is N in
		// that epoch, as Kafka's leader answers with the epoch it leads
		// in (its epoch cache's latest, assigned at the log end when it
		// became leader).
		if cur := part.LeaderEpoch(); cur <= written[len(written)-1].epoch {
			t.Fatalf("the broker leads in epoch %d, not after the log's last (%d)", cur, written[len(written)-1].epoch)
		}
		if o, ok := end.Lookup(topic, 0); !ok || o.Err != nil || o.Offset != n || o.LeaderEpoch != part.LeaderEpoch() {
			t.Fatalf("latest offset %+v, want %d in epoch %d", o, n, part.LeaderEpoch())
		}
		start, err := adm.ListStartOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := start.Lookup(topic, 0); !ok || o.Err != nil || o.Offset != 0 || o.LeaderEpoch != written[0].epoch {
			t.Fatalf("earliest offset %+v, want 0 in epoch %d", o, written[0].epoch)
		}
	})

	t.Run("ListOffsets by time", func(t *testing.T) {
		// The time index and the max timestamp know the records only:
		// raft's entries, written later, are in neither.
		adm := kadm.NewClient(newClient(t, addr))
		for _, i := range []int{0, 5, 13, 37, n - 1} {
			lo, err := adm.ListOffsetsAfterMilli(ctx, raftLogTime(base, i), topic)
			if err != nil {
				t.Fatal(err)
			}
			if o, ok := lo.Lookup(topic, 0); !ok || o.Err != nil || o.Offset != int64(i) || o.Timestamp != raftLogTime(base, i) {
				t.Errorf("offset for the time of record %d: %+v", i, o)
			}
		}
		lo, err := adm.ListOffsetsAfterMilli(ctx, raftLogTime(base, n), topic)
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := lo.Lookup(topic, 0); !ok || o.Err != nil || o.Offset != n {
			t.Errorf("offset for a time after every record: %+v, want %d", o, n)
		}
		lo, err = adm.ListMaxTimestampOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := lo.Lookup(topic, 0); !ok || o.Err != nil || o.Offset != n-1 || o.Timestamp != raftLogTime(base, n-1) {
			t.Errorf("max timestamp: %+v, want offset %d", o, n-1)
		}
	})

	t.Run("OffsetForLeaderEpoch", func(t *testing.T) {
		cl := newClient(t, addr)
		ask := func(epoch int32) (int32, int64) {
			t.Helper()
			req := kmsg.NewPtrOffsetForLeaderEpochRequest()
			req.ReplicaID = -1
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.LeaderEpoch, rp.CurrentLeaderEpoch = epoch, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			sp := resp.Topics[0].Partitions[0]
			if sp.ErrorCode != 0 {
				t.Fatalf("epoch %d: error %d", epoch, sp.ErrorCode)
			}
			return sp.LeaderEpoch, sp.EndOffset
		}
		// The broker's own epoch (it leads the one-voter group in a
		// term after the log's last, with no record) follows the last
		// round's.
		cur := part.LeaderEpoch()
		for i, r := range written {
			// Every epoch from this round's to the next round's (those
			// between held no record) ends where the next round began.
			to := cur
			if i+1 < len(written) {
				to = written[i+1].epoch
			}
			for e := r.epoch; e < to; e++ {
				if ge, off := ask(e); ge != r.epoch || off != r.end {
					t.Errorf("epoch %d: epoch %d end offset %d, want epoch %d end offset %d", e, ge, off, r.epoch, r.end)
				}
			}
		}
		// The current epoch ends at the log end (Kafka's answer for the
		// leader's latest epoch).
		if ge, off := ask(cur); ge != cur || off != n {
			t.Errorf("the current epoch %d: epoch %d end offset %d, want epoch %d end offset %d", cur, ge, off, cur, n)
		}
		if ge, off := ask(cur + 1); ge != -1 || off != -1 {
			t.Errorf("an epoch newer than the leader's: epoch %d end offset %d, want -1 -1", ge, off)
		}
	})

	t.Run("DescribeLogDirs", func(t *testing.T) {
		// The size is the segment files' bytes, raft's entries included
		// (Kafka's log size: what the disk holds).
		var files int64
		ents, err := os.ReadDir(filepath.Join(logDir, topic+"-0"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".log") {
				fi, err := e.Info()
				if err != nil {
					t.Fatal(err)
				}
				files += fi.Size()
			}
		}
		adm := kadm.NewClient(newClient(t, addr))
		dirs, err := adm.DescribeAllLogDirs(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var size int64 = -1
		dirs.Each(func(d kadm.DescribedLogDir) {
			if p, ok := d.Topics.Lookup(topic, 0); ok {
				size = p.Size
			}
		})
		if size != files {
			t.Fatalf("DescribeLogDirs size %d, the segment files hold %d bytes", size, files)
		}
	})

	t.Run("kcat", func(t *testing.T) {
		kcat := needTool(t, "kcat")
		out := runTool(t, "", kcat, "-C", "-b", addr, "-t", topic, "-e", "-o", "beginning", "-f", "%o %s\n")
		if got := kcatLines(out); got != strings.Join(want, "\n") {
			t.Fatalf("kcat consumed\n%s\nwant\n%s", got, strings.Join(want, "\n"))
		}
	})

	t.Run("kafka-python", func(t *testing.T) {
		py := pythonWith(t, "kafka")
		out := runTool(t, "", py, "-c", raftLogPythonScript, addr, topic, fmt.Sprint(n))
		if !strings.Contains(out, "ok") {
			t.Fatalf("kafka-python: %s", out)
		}
	})

	t.Run("produce after", func(t *testing.T) {
		// The broker appends after raft's entries; every client reads on.
		cl := newClient(t, addr, kgo.DefaultProduceTopic(topic))
		for i := n; i < n+3; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte(raftLogValue(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			want = append(want, fmt.Sprintf("%d %s", i, raftLogValue(i)))
		}
		if kcat, err := exec.LookPath("kcat"); err == nil {
			out := runTool(t, "", kcat, "-C", "-b", addr, "-t", topic, "-e", "-o", "beginning", "-f", "%o %s\n")
			if got := kcatLines(out); got != strings.Join(want, "\n") {
				t.Fatalf("kcat consumed\n%s\nwant\n%s", got, strings.Join(want, "\n"))
			}
		}
		cc := newClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		var got []string
		for len(got) < len(want) {
			fs := cc.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("consumed %d of %d records: %v", len(got), len(want), err)
			}
			if errs := fs.Errors(); len(errs) > 0 {
				t.Fatalf("fetch errors: %v", errs)
			}
			fs.EachRecord(func(r *kgo.Record) { got = append(got, fmt.Sprintf("%d %s", r.Offset, r.Value)) })
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("franz-go consumed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// kcatLines returns kcat's output without its own messages (stderr lines
// starting with %).
func kcatLines(out string) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "%") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

const raftLogPythonScript = `
import sys
from kafka import KafkaConsumer, TopicPartition
addr, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = KafkaConsumer(bootstrap_servers=addr, consumer_timeout_ms=3000, enable_auto_commit=False, group_id=None)
tp = TopicPartition(topic, 0)
c.assign([tp])
c.seek_to_beginning(tp)
got = [(m.offset, m.value.decode()) for m in c]
want = [(i, 'value-%03d' % i) for i in range(n)]
assert got == want, got
end = c.end_offsets([tp])[tp]
assert end == n, end
print('ok')
`

// The group coordinator reads a raft-written __consumer_offsets partition
// (raft's entries between the commits of several leader epochs) back into
// the committed offsets, and commits after them.
func TestRaftLogConsumerOffsets(t *testing.T) {
	t.Parallel()
	const group, topic = "raft-group", "co"
	const set = "offsets.topic.num.partitions=1"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	commit := func(adm *kadm.Client, p int32, at int64, meta string) {
		t.Helper()
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1, Metadata: meta})
		resp, err := adm.CommitOffsets(ctx, group, os)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// The coordinator's own batches, from a broker that committed them.
	a, addrA := startBroker(t, "", set)
	if _, err := a.createTopic(topic, 2, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	admA := kadm.NewClient(newClient(t, addrA))
	for i := 1; i <= 9; i++ {
		commit(admA, int32(i%2), int64(i*10), fmt.Sprintf("m%d", i))
	}
	offsets, ok := a.partition(offsetsTopic, 0)
	if !ok {
		t.Fatal("no __consumer_offsets partition")
	}
	var batches [][]byte
	for off := int64(0); off < offsets.HighWatermark(); {
		data, rr, err := offsets.ReadBytes(nil, off, 1<<20)
		rr.Release()
		if err != nil || len(data) == 0 {
			t.Fatalf("read __consumer_offsets at %d: %d bytes, %v", off, len(data), err)
		}
		for len(data) > 0 {
			h, err := batch.ParseHeader(data)
			if err != nil {
				t.Fatal(err)
			}
			// As a client sends it: base offset 0 (the CRC does not
			// cover it).
			c := bytes.Clone(data[:h.Size()])
			binary.BigEndian.PutUint64(c, 0)
			batches = append(batches, c)
			data = data[h.Size():]
			off = h.BaseOffset + int64(h.LastOffsetDelta) + 1
		}
	}
	a.Close()
	if len(batches) < 3 {
		t.Fatalf("__consumer_offsets holds %d batches, want at least 3", len(batches))
	}
	third := len(batches) / 3
	src := filepath.Join(t.TempDir(), "raft")
	_, internal := raftLog(t, src, [][][]byte{batches[:third], batches[third : 2*third], batches[2*third:]})
	if internal < 3 {
		t.Fatalf("%d entries of raft's own, want at least 3", internal)
	}

	dir := t.TempDir()
	b, _ := startBroker(t, dir, set)
	if _, err := b.createTopic(topic, 2, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := b.ensureOffsetsTopic(); err != nil {
		t.Fatal(err)
	}
	tm, _ := b.meta.Topic(offsetsTopic)
	b.Close()
	installRaftLog(t, dir, offsetsTopic, tm.ID, src)
	_, addr := startBroker(t, dir, set)
	adm := kadm.NewClient(newClient(t, addr))
	check := func(want map[int32]kadm.Offset) {
		t.Helper()
		resp, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		for p, w := range want {
			got, ok := resp.Lookup(topic, p)
			if !ok || got.At != w.At || got.Metadata != w.Metadata {
				t.Errorf("partition %d: committed %+v, want offset %d metadata %q", p, got.Offset, w.At, w.Metadata)
			}
		}
	}
	check(map[int32]kadm.Offset{0: {At: 80, Metadata: "m8"}, 1: {At: 90, Metadata: "m9"}})
	commit(adm, 0, 100, "m10")
	check(map[int32]kadm.Offset{0: {At: 100, Metadata: "m10"}, 1: {At: 90, Metadata: "m9"}})
}
