package main

// sluice consume: prints a topic's records, as kcat -C and
// kafka-console-consumer.sh do, with franz-go's consumer: from the
// earliest, the latest, an offset or a time, alone or in a group, in
// kcat's --format syntax or as JSON lines.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() { register(newConsumeCmd) }

// formatHelp documents --format.
const formatHelp = `--format takes kcat's -f syntax:
  %t topic      %p partition   %o offset     %T timestamp (ms since the epoch)
  %k key        %K key length (-1 for a null key)
  %v or %s value  %S value length (-1 for a null value)
  %h headers (key=value, comma-separated)   %% a percent sign
  \n \t \r \\  newline, tab, carriage return, backslash
The default is '%v\n' (each value on a line); --json prints each record as
one line of JSON instead (key and value as strings, null when null).`

// startKind is where a partition is read from.
type startKind int

const (
	startEarliest startKind = iota
	startLatest
	startOffset  // an absolute offset
	startFromEnd // n before the log end offset
	startTime    // the first offset at or after a time
)

type startSpec struct {
	kind startKind
	n    int64 // startOffset: the offset; startFromEnd: how many back; startTime: ms
}

// parseStart parses --offset: earliest (beginning), latest (end), N, or
// -N (N before the end, as kcat -o -N).
func parseStart(s string) (startSpec, error) {
	switch s {
	case "earliest", "beginning", "start", "oldest":
		return startSpec{kind: startEarliest}, nil
	case "latest", "end", "newest":
		return startSpec{kind: startLatest}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return startSpec{}, usageErrorf("--offset must be earliest, latest, an offset N or -N (N before the end), not %q", s)
	}
	if n < 0 {
		return startSpec{kind: startFromEnd, n: -n}, nil
	}
	return startSpec{kind: startOffset, n: n}, nil
}

// kgoOffset is s as the consumer's reset offset.
func (s startSpec) kgoOffset() kgo.Offset {
	switch s.kind {
	case startLatest:
		return kgo.NewOffset().AtEnd()
	case startOffset:
		return kgo.NewOffset().At(s.n)
	case startFromEnd:
		return kgo.NewOffset().AtEnd().Relative(-s.n)
	case startTime:
		return kgo.NewOffset().AfterMilli(s.n)
	}
	return kgo.NewOffset().AtStart()
}

type consumeOptions struct {
	topic      string
	partitions []int32 // nil: every partition
	start      startSpec
	group      string
	format     []formatPiece
	json       bool
	exitAtEnd  bool
	count      int64 // 0: no limit
	isolation  kgo.IsolationLevel
	clientID   string
}

func newConsumeCmd() *cobra.Command {
	c := command("consume --topic T [--partition P]... [--offset earliest|latest|N|-N | --timestamp T] [--group G] [--format FMT | --json] [-e] [-n COUNT]", `Prints a topic's records. As kcat -C does: from the earliest
offset (the default), the latest, an offset (N; -N for N before the end)
or the first at or after a time (--timestamp: ms since the epoch, or RFC
3339; no record after it: the end); an offset outside the log is moved to
its start or end. With --group it consumes as a member of that consumer group:
partitions are shared with the group's other members, a committed offset
wins over --offset, and the offsets of the records printed are committed.
-e exits once every partition read has reached the log end offset it had
when the command started (with --group, every partition assigned to it);
-n exits after COUNT records. Ctrl-C stops it (exit 0).

`+formatHelp)
	fs := c.Flags()
	topic := fs.String("topic", "", "the `topic` to read")
	parts := fs.Int32Slice("partition", nil, "read only these `partitions` (repeatable, or comma-separated)")
	offset := fs.String("offset", "earliest", "where to start: `earliest|latest|N|-N`")
	ts := fs.String("timestamp", "", "start at the first record at or after this `time` (ms, or RFC 3339)")
	group := fs.String("group", "", "consume as a member of this consumer `group`")
	format := fs.String("format", `%v\n`, "how to print each record: `FMT` (see above)")
	jsonOut := fs.Bool("json", false, "print each record as a line of JSON")
	exitAtEnd := fs.BoolP("exit", "e", false, "exit at the end of the partitions")
	count := fs.Int64P("count", "n", 0, "exit after `COUNT` records")
	committed := fs.Bool("read-committed", false, "skip aborted transactions' records (isolation read_committed)")
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		o := consumeOptions{topic: *topic, group: *group, json: *jsonOut, exitAtEnd: *exitAtEnd, count: *count, isolation: kgo.ReadUncommitted(), clientID: "sluice-consume"}
		if err := topicFlag(*topic); err != nil {
			return err
		}
		if *committed {
			o.isolation = kgo.ReadCommitted()
		}
		for _, p := range *parts {
			if p < 0 {
				return usageErrorf("--partition must be 0 or more, not %d", p)
			}
			if !slices.Contains(o.partitions, p) {
				o.partitions = append(o.partitions, p)
			}
		}
		if o.group != "" && o.partitions != nil {
			return usageErrorf("--partition and --group do not go together: the group assigns the partitions")
		}
		if *count < 0 {
			return usageErrorf("-n must not be negative")
		}
		if fs.Changed("timestamp") && fs.Changed("offset") {
			return usageErrorf("give --offset or --timestamp, not both")
		}
		if fs.Changed("format") && *jsonOut {
			return usageErrorf("give --format or --json, not both")
		}
		var err error
		if fs.Changed("timestamp") {
			ms, perr := strconv.ParseInt(*ts, 10, 64)
			if perr != nil {
				t, terr := parseTime(*ts)
				if terr != nil {
					return usageErrorf("--timestamp: %v", terr)
				}
				ms = t.UnixMilli()
			}
			o.start = startSpec{kind: startTime, n: ms}
		} else if o.start, err = parseStart(*offset); err != nil {
			return err
		}
		if o.format, err = parseFormat(*format); err != nil {
			return usageErrorf("--format: %v", err)
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			return consume(ctx, a, cf, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
	}
	return c
}

// formatPiece is a literal (verb 0) or a %verb.
type formatPiece struct {
	verb byte
	lit  string
}

// parseFormat compiles kcat's -f syntax.
func parseFormat(s string) ([]formatPiece, error) {
	var out []formatPiece
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			out = append(out, formatPiece{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			switch s[i] {
			case 'n':
				lit.WriteByte('\n')
			case 't':
				lit.WriteByte('\t')
			case 'r':
				lit.WriteByte('\r')
			case '\\':
				lit.WriteByte('\\')
			default:
				lit.WriteByte('\\')
				lit.WriteByte(s[i])
			}
		case c == '%':
			if i+1 >= len(s) {
				return nil, fmt.Errorf("%q ends with a lone %%", s)
			}
			i++
			switch v := s[i]; v {
			case '%':
				lit.WriteByte('%')
			case 't', 'p', 'o', 'T', 'k', 'K', 'v', 's', 'S', 'h':
				flush()
				out = append(out, formatPiece{verb: v})
			default:
				return nil, fmt.Errorf("unknown verb %%%c in %q (see sluice consume -h)", v, s)
			}
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return out, nil
}

// formatRecord appends r as pieces say.
func formatRecord(b []byte, pieces []formatPiece, r *kgo.Record) []byte {
	for _, p := range pieces {
		switch p.verb {
		case 0:
			b = append(b, p.lit...)
		case 't':
			b = append(b, r.Topic...)
		case 'p':
			b = strconv.AppendInt(b, int64(r.Partition), 10)
		case 'o':
			b = strconv.AppendInt(b, r.Offset, 10)
		case 'T':
			b = strconv.AppendInt(b, r.Timestamp.UnixMilli(), 10)
		case 'k':
			b = append(b, r.Key...)
		case 'K':
			b = strconv.AppendInt(b, nullableLen(r.Key), 10)
		case 'v', 's':
			b = append(b, r.Value...)
		case 'S':
			b = strconv.AppendInt(b, nullableLen(r.Value), 10)
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, h.Key...)
				b = append(b, '=')
				b = append(b, h.Value...)
			}
		}
	}
	return b
}

func nullableLen(b []byte) int64 {
	if b == nil {
		return -1
	}
	return int64(len(b))
}

// jsonRecord is a record as --json prints it.
type jsonRecord struct {
	Topic     string       `json:"topic"`
	Partition int32        `json:"partition"`
	Offset    int64        `json:"offset"`
	Timestamp int64        `json:"timestamp"` // ms since the epoch
	Key       *string      `json:"key"`
	Value     *string      `json:"value"`
	Headers   []jsonHeader `json:"headers"`
}

type jsonHeader struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

func nullableString(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// consumeState tracks, for -e, where each partition is and which the
// consumer reads.
type consumeState struct {
	mu       sync.Mutex
	pos      map[tp]int64 // the next offset to read
	end      map[tp]int64 // the log end offsets when the command started
	assigned map[tp]bool  // the partitions read (a group's: its assignment)
}

// atEnd reports whether every partition read has reached its end.
func (s *consumeState) atEnd() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.assigned) == 0 {
		return false
	}
	for p := range s.assigned {
		if s.pos[p] < s.end[p] {
			return false
		}
	}
	return true
}

func (s *consumeState) advance(r *kgo.Record) {
	s.mu.Lock()
	s.pos[tp{r.Topic, r.Partition}] = r.Offset + 1
	s.mu.Unlock()
}

// startPositions resolves where each partition starts (for -e), as the
// consumer will: a group's committed offset, else the start spec.
func startPositions(ctx context.Context, a *admin, o consumeOptions, parts []int32) (map[tp]int64, map[tp]int64, error) {
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	starts, err := a.adm.ListStartOffsets(ctx, o.topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("ListOffsets: %w", unwrapKadm(err))
	}
	ends, err := a.adm.ListEndOffsets(ctx, o.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("ListOffsets: %w", unwrapKadm(err))
	}
	var atTime kadm.ListedOffsets
	if o.start.kind == startTime {
		if atTime, err = a.adm.ListOffsetsAfterMilli(ctx, o.start.n, o.topic); err == nil {
			err = atTime.Error()
		}
		if err != nil {
			return nil, nil, fmt.Errorf("ListOffsets: %w", unwrapKadm(err))
		}
	}
	var committed kadm.OffsetResponses
	if o.group != "" {
		if committed, err = a.adm.FetchOffsets(ctx, o.group); err != nil {
			committed = nil // a group that does not exist yet has none
		}
	}
	pos, end := map[tp]int64{}, map[tp]int64{}
	for _, p := range parts {
		k := tp{o.topic, p}
		s, _ := starts.Lookup(o.topic, p)
		e, _ := ends.Lookup(o.topic, p)
		end[k] = e.Offset
		var at int64
		switch o.start.kind {
		case startEarliest:
			at = s.Offset
		case startLatest:
			at = e.Offset
		case startOffset: // kept within the log, as kcat's offset reset does
			at = min(max(o.start.n, s.Offset), e.Offset)
		case startFromEnd:
			at = max(e.Offset-o.start.n, s.Offset)
		case startTime:
			t, _ := atTime.Lookup(o.topic, p)
			at = t.Offset
			if at < 0 {
				at = e.Offset
			}
		}
		if c, ok := committed.Lookup(o.topic, p); ok && c.Err == nil && c.At >= 0 {
			at = c.At
		}
		pos[k] = at
	}
	return pos, end, nil
}

// consume reads and prints records until -e, -n or an interrupt.
func consume(ctx context.Context, a *admin, cf *clusterFlags, o consumeOptions, w, stderr io.Writer) error {
	st, err := a.describeTopics(ctx, []string{o.topic})
	if err != nil {
		return err
	}
	have := st.partitionsOf(o.topic)
	parts := have
	if o.partitions != nil {
		for _, p := range o.partitions {
			if !slices.Contains(have, p) {
				return fmt.Errorf("%s-%d: %w (the topic has %s)", o.topic, p, kerr.UnknownTopicOrPartition, partitions(len(have)))
			}
		}
		parts = slices.Sorted(slices.Values(o.partitions))
	}
	state := &consumeState{pos: map[tp]int64{}, end: map[tp]int64{}, assigned: map[tp]bool{}}
	// Alone, the consumer starts at offsets resolved here (so an offset
	// outside the log is clamped to it); in a group, at the group's
	// commits, else the reset offset. -e needs the positions either way.
	if o.exitAtEnd || o.group == "" {
		if state.pos, state.end, err = startPositions(ctx, a, o, parts); err != nil {
			return err
		}
	}
	seeds, err := cf.seeds()
	if err != nil {
		return err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID(o.clientID),
		kgo.DialTimeout(min(cf.timeout, 10*time.Second)),
		kgo.FetchIsolationLevel(o.isolation),
		// librdkafka's (kcat's) fetch.wait.max.ms: a long poll ends
		// soon after the command does.
		kgo.FetchMaxWait(500 * time.Millisecond),
		// Transaction markers take offsets too: -e sees them to know a
		// partition whose last offset is a marker has reached its end.
		// They are not printed.
		kgo.KeepControlRecords(),
	}
	dial, err := cf.dialOpts()
	if err != nil {
		return err
	}
	opts = append(opts, dial...)
	if o.group != "" {
		opts = append(opts,
			kgo.ConsumerGroup(o.group),
			kgo.ConsumeTopics(o.topic),
			kgo.ConsumeResetOffset(o.start.kgoOffset()),
			kgo.AutoCommitMarks(),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				state.mu.Lock()
				for _, p := range m[o.topic] {
					state.assigned[tp{o.topic, p}] = true
				}
				state.mu.Unlock()
			}),
			kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
				state.mu.Lock()
				for _, p := range m[o.topic] {
					delete(state.assigned, tp{o.topic, p})
				}
				state.mu.Unlock()
				cl.CommitMarkedOffsets(ctx)
			}),
		)
	} else {
		offsets := map[int32]kgo.Offset{}
		for _, p := range parts {
			offsets[p] = kgo.NewOffset().At(state.pos[tp{o.topic, p}])
			state.assigned[tp{o.topic, p}] = true
		}
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: offsets}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close() // a group member leaves its group
	if o.group != "" {
		defer func() {
			// Commit what was printed, even after an interrupt.
			cctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
			defer cancel()
			if err := cl.CommitMarkedOffsets(cctx); err != nil {
				fmt.Fprintf(stderr, "sluice consume: committing the offsets of group %s: %v\n", o.group, err)
			}
		}()
	}

	bw := bufio.NewWriterSize(w, 64<<10)
	defer bw.Flush()
	m := newMeter(stderr)
	defer m.done()
	var n int64
	var buf []byte
	for {
		if o.exitAtEnd && state.atEnd() {
			return nil
		}
		if o.count > 0 && n >= o.count {
			return nil
		}
		pctx := ctx
		var cancel context.CancelFunc = func() {}
		if o.exitAtEnd {
			// Wake up now and then to see whether a rebalance or an
			// empty range left nothing more to read.
			pctx, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
		}
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil // interrupted: not a failure
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && ferr == nil {
				ferr = fmt.Errorf("fetching %s-%d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		stop := false
		fs.EachRecord(func(r *kgo.Record) {
			if stop {
				return
			}
			if r.Attrs.IsControl() {
				state.advance(r)
				if o.group != "" {
					cl.MarkCommitRecords(r)
				}
				return
			}
			if o.json {
				jr := jsonRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(),
					Key: nullableString(r.Key), Value: nullableString(r.Value), Headers: []jsonHeader{}}
				for _, h := range r.Headers {
					jr.Headers = append(jr.Headers, jsonHeader{h.Key, string(h.Value)})
				}
				b, _ := json.Marshal(jr)
				buf = append(append(buf[:0], b...), '\n')
			} else {
				buf = formatRecord(buf[:0], o.format, r)
			}
			bw.Write(buf)
			if o.group != "" {
				cl.MarkCommitRecords(r)
			}
			state.advance(r)
			n++
			if o.count > 0 && n >= o.count {
				stop = true
			}
		})
		if err := bw.Flush(); err != nil {
			return fmt.Errorf("writing: %w", err)
		}
		m.show("consumed %d records", n)
	}
}
