package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// FinalRead reads every partition of topic from its log start offset to
// its high watermark with a fresh client, retrying within ctx until it
// got every partition. It returns the records per partition in offset
// order and each partition's log start offset.
func FinalRead(ctx context.Context, seeds []string, topic string) (map[int32][]Record, map[int32]int64, error) {
	return finalRead(ctx, seeds, topic, false)
}

// FinalReadCommitted is FinalRead with read_committed, for a topic with
// transactions: it first waits, within ctx, until every partition's last
// stable offset reached its high watermark (every transaction in it
// decided; an error names the partitions where one stayed open), then
// reads every partition from its log start offset to its high watermark,
// returning the records a read_committed consumer gets (no aborted
// records, no transaction markers).
func FinalReadCommitted(ctx context.Context, seeds []string, topic string) (map[int32][]Record, map[int32]int64, error) {
	return finalRead(ctx, seeds, topic, true)
}

func finalRead(ctx context.Context, seeds []string, topic string, committed bool) (map[int32][]Record, map[int32]int64, error) {
	adm, err := kgo.NewClient(clientOpts(seeds, "final-read-admin")...)
	if err != nil {
		return nil, nil, err
	}
	defer adm.Close()
	var starts, ends map[int32]int64
	if committed {
		starts, ends, err = listStable(ctx, kadm.NewClient(adm), topic)
	} else {
		starts, ends, err = listBounds(ctx, kadm.NewClient(adm), topic)
	}
	if err != nil {
		return nil, nil, err
	}
	out := map[int32][]Record{}
	for p := range ends {
		out[p] = nil
	}
	// One client at a time; a client that stalls (a fetch session gone
	// bad) is replaced after a while, and the read goes on from where it
	// got to.
	next := maps.Clone(starts)
	var last error
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		last = readRange(rctx, seeds, topic, committed, next, ends, func(r Record) { out[r.Partition] = append(out[r.Partition], r) })
		cancel()
		if last == nil {
			return out, starts, nil
		}
	}
	return out, starts, fmt.Errorf("chaos: final read of %s: %w (last: %v)", topic, ctx.Err(), last)
}

// listBounds lists every partition's log start offset and high watermark,
// retrying within ctx until one listing answered for all of them.
func listBounds(ctx context.Context, adm *kadm.Client, topic string) (starts, ends map[int32]int64, err error) {
	for {
		starts, ends, err = listBoundsOnce(ctx, adm, topic)
		if err == nil {
			return starts, ends, nil
		}
		if !sleepCtx(ctx, 250*time.Millisecond) {
			return nil, nil, fmt.Errorf("chaos: listing the offsets of %s: %w (last: %v)", topic, ctx.Err(), err)
		}
	}
}

// listStable is listBounds once every partition's last stable offset
// (ListOffsets latest with read_committed) equals its high watermark:
// no transaction left undecided. It retries within ctx.
func listStable(ctx context.Context, adm *kadm.Client, topic string) (starts, ends map[int32]int64, err error) {
	for {
		starts, ends, err = listBoundsOnce(ctx, adm, topic)
		if err == nil {
			var stable kadm.ListedOffsets
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			stable, err = adm.ListCommittedOffsets(lctx, topic)
			cancel()
			if err == nil {
				var open []string
				for _, p := range slices.Sorted(maps.Keys(ends)) {
					l, ok := stable[topic][p]
					switch {
					case !ok:
						open = append(open, fmt.Sprintf("partition %d: no last stable offset listed", p))
					case l.Err != nil:
						open = append(open, fmt.Sprintf("partition %d: %v", p, l.Err))
					case l.Offset != ends[p]:
						open = append(open, fmt.Sprintf("partition %d: last stable offset %d, high watermark %d", p, l.Offset, ends[p]))
					}
				}
				if len(open) == 0 {
					return starts, ends, nil
				}
				err = fmt.Errorf("a transaction still undecided: %s", strings.Join(open, "; "))
			}
		}
		if !sleepCtx(ctx, 250*time.Millisecond) {
			return nil, nil, fmt.Errorf("chaos: listing the stable offsets of %s: %w (last: %v)", topic, ctx.Err(), err)
		}
	}
}

func listBoundsOnce(ctx context.Context, adm *kadm.Client, topic string) (starts, ends map[int32]int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	get := func(list func(context.Context, ...string) (kadm.ListedOffsets, error)) (map[int32]int64, error) {
		ls, err := list(ctx, topic)
		if err != nil {
			return nil, err
		}
		if len(ls[topic]) == 0 {
			return nil, errors.New("no partitions listed")
		}
		m := map[int32]int64{}
		for p, l := range ls[topic] {
			if l.Err != nil {
				return nil, fmt.Errorf("partition %d: %w", p, l.Err)
			}
			m[p] = l.Offset
		}
		return m, nil
	}
	if starts, err = get(adm.ListStartOffsets); err != nil {
		return nil, nil, err
	}
	if ends, err = get(adm.ListEndOffsets); err != nil {
		return nil, nil, err
	}
	if len(starts) != len(ends) {
		return nil, nil, fmt.Errorf("%d start offsets but %d end offsets", len(starts), len(ends))
	}
	return starts, ends, nil
}

// readRange reads each partition p of topic in [next[p], ends[p]) with
// a fresh direct consumer, calling got for each record in offset order
// and advancing next[p] past it; it returns nil once every partition
// reached its end, or why not when ctx ends first. A partition whose
// records start above next (a moved log start) or skip offsets is read
// on from where its records are. With committed, it reads with
// read_committed and keeps the transaction markers, which advance next
// (every transaction below ends is decided, so the last offset below
// ends is a record or a marker) but are not passed to got.
func readRange(ctx context.Context, seeds []string, topic string, committed bool, next, ends map[int32]int64, got func(Record)) error {
	offsets := map[int32]kgo.Offset{}
	for p, n := range next {
		if n < ends[p] {
			offsets[p] = kgo.NewOffset().At(n)
		}
	}
	if len(offsets) == 0 {
		return nil
	}
	opts := append(clientOpts(seeds, "reader"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.FetchMaxBytes(8<<20), kgo.FetchMaxPartitionBytes(4<<20))
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	var fetchErr error
	for {
		missing := missingParts(next, ends)
		if len(missing) == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("partitions %v not read to their end (next %v, ends %v; last fetch error: %v)", missing, next, ends, fetchErr)
		}
		fs := cl.PollFetches(ctx)
		fs.EachError(func(_ string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				fetchErr = fmt.Errorf("partition %d: %w", p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if r.Topic != topic || r.Offset < next[r.Partition] || r.Offset >= ends[r.Partition] {
				return
			}
			if !r.Attrs.IsControl() {
				got(Record{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			}
			next[r.Partition] = r.Offset + 1
		})
	}
}

func missingParts(next, ends map[int32]int64) []int32 {
	var ps []int32
	for p, e := range ends {
		if next[p] < e {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps
}
