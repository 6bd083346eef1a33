package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commitRound is BenchmarkOffsetCommitE2E's round: this many commits to
// Sluice, then as many to kfake (or the other way round), all committers
// together.
const commitRound = 256

// BenchmarkOffsetCommitE2E measures the group coordinator end to end: one
// op is one OffsetCommitRequest (generation -1, no member: a group that
// only commits, as kadm.CommitOffsets and simple consumers send) carrying
// an offset for each of the 16 partitions of a topic, sent by a franz-go
// client (kgo.Client.Request, which finds the coordinator) over TCP to a
// Sluice broker started in the process, and answered without error for
// every partition. The offsets grow by one with each commit.
//
// Sub-benchmarks:
//
//   - fsync: Sluice's default config (log.flush.interval.messages=1, an
//     fsync of the __consumer_offsets partition before the reply; commits
//     arriving together share one), against kfake with kfake.SyncWrites,
//     which appends each partition's commit to its groups.log with an
//     fsync of its own (16 fsyncs an op).
//   - pagecache: Sluice with log.flush.interval.messages=9223372036854775807
//     (Kafka's behaviour: the reply once the commit is in the page cache),
//     against kfake persisting without fsync. fsync's ns/op over
//     pagecache's is the price of the fsync.
//   - groups-1: one client commits for one group, one request at a time.
//   - groups-8: eight clients, one goroutine each, commit for eight groups
//     at once, b.N commits in all; the groups hash onto
//     __consumer_offsets partitions (offsets.topic.num.partitions, 50 by
//     default), mostly different ones, so this measures how commits to
//     different partitions of the same broker overlap (and, with fsync,
//     whether their fsyncs do).
//
// Each side's clients are created, and commit once for each group, before
// the timer starts (coordinator lookup, connection, creating
// __consumer_offsets). The commits then run in rounds of 256, Sluice's
// (the timed region) and kfake's in turn, the first of the two alternating.
// Custom metrics: commits/s (Sluice, one op per second of the timed
// region), kfake-commits/s, and ratio = commits/s / kfake-commits/s.
//
// Measure with a fixed count (-benchtime 2000x): kfake's time is outside
// the timer. With -benchtime 1x (CI) each side commits once per group.
func BenchmarkOffsetCommitE2E(b *testing.B) {
	for _, mode := range []struct {
		name      string
		sluice    []string
		kfakeSync bool
	}{
		{"fsync", nil, true},
		{"pagecache", []string{"log.flush.interval.messages=9223372036854775807"}, false},
	} {
		for _, groups := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/groups-%d", mode.name, groups), func(b *testing.B) {
				benchmarkOffsetCommit(b, mode.sluice, mode.kfakeSync, groups)
			})
		}
	}
}

func benchmarkOffsetCommit(b *testing.B, sluiceConfig []string, kfakeSync bool, groups int) {
	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	sluiceAddr := startSluice(b, filepath.Join(b.TempDir(), "sluice"), sluiceConfig...)
	kfakeAddr := startKfake(b, filepath.Join(b.TempDir(), "kfake"), kfakeSync)
	var sides [2][]*committer // Sluice, kfake
	for i, addr := range []string{sluiceAddr, kfakeAddr} {
		if err := createE2ETopic(ctx, addr); err != nil {
			b.Fatal(err)
		}
		cs, err := newCommitters(ctx, b, addr, groups)
		if err != nil {
			b.Fatal(err)
		}
		sides[i] = cs
	}

	var kfakeTime time.Duration
	run := [2]func(n int) error{
		func(n int) error { // Sluice: the timed region
			b.StartTimer()
			err := commitAll(ctx, sides[0], n)
			b.StopTimer()
			if err != nil {
				return fmt.Errorf("sluice: %w", err)
			}
			return nil
		},
		func(n int) error {
			d, err := timeIt(func() error { return commitAll(ctx, sides[1], n) })
			kfakeTime += d
			if err != nil {
				return fmt.Errorf("kfake: %w", err)
			}
			return nil
		},
	}
	b.ResetTimer()
	b.StopTimer()
	for round, done := 0, 0; done < b.N; round, done = round+1, done+commitRound {
		n := min(commitRound, b.N-done)
		for i := range run {
			if err := run[(round+i)%len(run)](n); err != nil {
				b.Fatal(err)
			}
		}
	}
	rate := float64(b.N) / b.Elapsed().Seconds()
	kfakeRate := float64(b.N) / kfakeTime.Seconds()
	b.ReportMetric(rate, "commits/s")
	b.ReportMetric(kfakeRate, "kfake-commits/s")
	b.ReportMetric(rate/kfakeRate, "ratio")
}

// committer commits offsets for all partitions of the e2e topic for one
// group, with a client of its own.
type committer struct {
	cl     *kgo.Client
	req    *kmsg.OffsetCommitRequest
	offset int64 // the last offset committed
}

// newCommitters returns one committer per group ("bench-group-<i>") for
// the broker at addr, each having committed once; their clients are closed
// when the benchmark ends.
func newCommitters(ctx context.Context, b *testing.B, addr string, groups int) ([]*committer, error) {
	b.Helper()
	var id [16]byte
	cs := make([]*committer, groups)
	for g := range cs {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			return nil, err
		}
		b.Cleanup(cl.Close)
		if g == 0 { // OffsetCommit v10 names topics by ID
			td, err := kadm.NewClient(cl).ListTopics(ctx, e2eTopic)
			if err == nil {
				err = td.Error()
			}
			if err != nil {
				return nil, fmt.Errorf("list topics on %s: %w", addr, err)
			}
			id = td[e2eTopic].ID
		}
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group = fmt.Sprintf("bench-group-%d", g)
		req.Generation = -1
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic, t.TopicID = e2eTopic, id
		for p := range int32(e2ePartitions) {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition = p
			rp.LeaderEpoch = -1
			t.Partitions = append(t.Partitions, rp)
		}
		req.Topics = append(req.Topics, t)
		cs[g] = &committer{cl: cl, req: req}
		if err := cs[g].commit(ctx); err != nil {
			return nil, fmt.Errorf("first commit to %s: %w", addr, err)
		}
	}
	return cs, nil
}

// commit sends one OffsetCommitRequest, each partition at the next offset,
// and checks that every partition was committed.
func (c *committer) commit(ctx context.Context) error {
	c.offset++
	ps := c.req.Topics[0].Partitions
	for i := range ps {
		ps[i].Offset = c.offset
	}
	kresp, err := c.req.RequestWith(ctx, c.cl)
	if err != nil {
		return err
	}
	n := 0
	for _, t := range kresp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("group %s partition %d: %w", c.req.Group, p.Partition, err)
			}
			n++
		}
	}
	if n != len(ps) {
		return fmt.Errorf("group %s: %d partitions answered, %d committed", c.req.Group, n, len(ps))
	}
	return nil
}

// commitAll makes n commits in all, spread evenly over the committers, each
// committing from a goroutine of its own, one request at a time.
func commitAll(ctx context.Context, cs []*committer, n int) error {
	if len(cs) == 1 {
		for range n {
			if err := cs[0].commit(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, len(cs))
	for i, c := range cs {
		k := n / len(cs)
		if i < n%len(cs) {
			k++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range k {
				if errs[i] = c.commit(ctx); errs[i] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
