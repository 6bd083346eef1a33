package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The builders of hand-made histories. Times are in milliseconds.

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func rec(p int32, o int64, v string) Record { return Record{Partition: p, Offset: o, Value: v} }

func send(proc string, p int32, v string, off int64, start, end int) Op {
	return Op{Process: proc, Kind: OpSend, Outcome: OK, Topic: "q", Partition: p, Value: v, Offset: off, Start: ms(start), End: ms(end)}
}

func poll(proc string, start, end int, recs ...Record) Op {
	return Op{Process: proc, Kind: OpPoll, Outcome: OK, Topic: "q", Start: ms(start), End: ms(end), Records: recs}
}

func assign(proc string, start, end int, parts ...int32) Op {
	return Op{Process: proc, Kind: OpAssign, Outcome: OK, Topic: "q", Start: ms(start), End: ms(end), Parts: parts}
}

func fetchOffsets(proc, group string, start, end int, offs map[int32]int64) Op {
	return Op{Process: proc, Kind: OpFetchOffsets, Outcome: OK, Group: group, Start: ms(start), End: ms(end), Offsets: offs}
}

func commit(proc, group string, out Outcome, start, end int, offs map[int32]int64) Op {
	return Op{Process: proc, Kind: OpCommit, Outcome: out, Group: group, Start: ms(start), End: ms(end), Offsets: offs}
}

func appendOp(proc string, v string, out Outcome, off int64, start, end int) Op {
	return Op{Process: proc, Kind: OpAppend, Outcome: out, Topic: "log", Value: v, Offset: off, Start: ms(start), End: ms(end)}
}

func readOp(proc string, start, end int, vals ...string) Op {
	return Op{Process: proc, Kind: OpRead, Outcome: OK, Topic: "log", Start: ms(start), End: ms(end), Values: vals, Offset: int64(len(vals))}
}

func hwRead(proc, via string, start, end int, offs map[int32]int64) Op {
	return Op{Process: proc, Kind: OpHighWater, Outcome: OK, Topic: "q", Via: via, Start: ms(start), End: ms(end), Offsets: offs}
}

// groupFetch is an OK fetch of group "g"'s committed offsets in topic q.
func groupFetch(start, end int, offs map[int32]int64) Op {
	op := fetchOffsets("offsets-reader", "g", start, end, offs)
	op.Topic = "q"
	return op
}

func final(recs ...Record) map[string]map[int32][]Record {
	f := map[string]map[int32][]Record{"q": {}}
	for _, r := range recs {
		f["q"][r.Partition] = append(f["q"][r.Partition], r)
	}
	return f
}

// abc are three sends to partition 0 at offsets 0, 1, 2.
func abc() []Op {
	return []Op{send("producer-0", 0, "a", 0, 0, 5), send("producer-0", 0, "b", 1, 1, 6), send("producer-0", 0, "c", 2, 2, 7)}
}

func ops(groups ...[]Op) []Op { return slices.Concat(groups...) }

func TestCheck(t *testing.T) {
	a, b, c := rec(0, 0, "a"), rec(0, 1, "b"), rec(0, 2, "c")
	type want = map[AnomalyKind]int
	cases := []struct {
		name    string
		h       History
		want    want
		expired int
	}{
		{name: "valid queue", want: want{}, h: History{
			Ops:   ops(abc(), []Op{poll("consumer-0", 10, 11, a, b), poll("consumer-0", 12, 13, c)}),
			Final: final(a, b, c)}},

		{name: "inconsistent offsets (and the acknowledged value lost)", want: want{KindInconsistentOffsets: 1, KindLostWrite: 1}, h: History{
			Ops: ops(abc(), []Op{poll("consumer-0", 10, 11, rec(0, 0, "x"), b, c)})}},
		{name: "another value at the offset is not a lost write", want: want{KindInconsistentOffsets: 1}, h: History{
			Ops: ops(abc()[:1], []Op{poll("consumer-0", 10, 11, rec(0, 0, "x"))})}},
		{name: "duplicate", want: want{KindDuplicate: 1}, h: History{
			Ops:   ops(abc(), []Op{poll("consumer-0", 10, 11, a, b, c, rec(0, 3, "a"))}),
			Final: final(a, b, c, rec(0, 3, "a"))}},
		{name: "acknowledged at another offset than the final read's", want: want{KindDuplicate: 1}, h: History{
			Ops:   abc(),
			Final: final(a, b, rec(0, 5, "c"))}},
		{name: "values outside Unique may repeat", want: want{}, h: History{Unique: []string{"a", "b", "c"},
			Ops:   abc(),
			Final: final(a, b, c, rec(0, 3, "probe"), rec(0, 4, "probe"))}},
		{name: "values inside Unique may not", want: want{KindDuplicate: 1}, h: History{Unique: []string{"a", "b", "c", "probe"},
			Ops:   abc(),
			Final: final(a, b, c, rec(0, 3, "probe"), rec(0, 4, "probe"))}},

		{name: "polled, then not in the final read", want: want{KindPolledNotInFinal: 1}, h: History{
			Ops:   ops([]Op{abc()[0], abc()[2]}, []Op{poll("consumer-0", 10, 11, a, b, c), poll("consumer-1", 10, 11, b)}),
			Final: final(a, c)}},
		{name: "polled below the log start, then not in the final read", want: want{}, h: History{
			Ops:      ops([]Op{abc()[0], abc()[2]}, []Op{poll("consumer-0", 10, 11, a, b, c)}),
			Final:    final(c),
			LogStart: map[string]map[int32]int64{"q": {0: 2}}}},
		{name: "polled another value than the final read's", want: want{KindInconsistentOffsets: 1}, h: History{
			Ops:   ops(abc(), []Op{poll("consumer-0", 10, 11, a, rec(0, 1, "x"), c)}),
			Final: final(a, b, c)}},

		{name: "lost write", want: want{KindLostWrite: 1}, h: History{
			Ops: ops(abc(), []Op{poll("consumer-0", 10, 11, a), poll("consumer-1", 12, 13, c)})}},
		{name: "lost write is unseen too", want: want{KindLostWrite: 1, KindUnseen: 1}, h: History{
			Ops:   ops(abc()[:2], []Op{poll("consumer-0", 10, 11, b)}),
			Final: final(b)}},
		{name: "an expired offset is not lost", want: want{}, expired: 1, h: History{
			Ops:      ops(abc()[:2], []Op{poll("consumer-0", 10, 11, b)}),
			Final:    final(b),
			LogStart: map[string]map[int32]int64{"q": {0: 1}}}},
		{name: "an expired offset once read is not unseen", want: want{}, h: History{
			Ops:      ops(abc()[:2], []Op{poll("consumer-0", 10, 11, a, b)}),
			Final:    final(b),
			LogStart: map[string]map[int32]int64{"q": {0: 1}}}},
		{name: "unseen", want: want{KindUnseen: 2}, h: History{
			Ops:   ops(abc(), []Op{poll("consumer-0", 10, 11, a)}),
			Final: final(a)}},
		{name: "the last write unread is not lost", want: want{}, h: History{
			Ops: ops(abc(), []Op{poll("consumer-0", 10, 11, a)})}},

		{name: "poll skip", want: want{KindPollSkip: 1}, h: History{
			Ops:   ops(abc(), []Op{poll("consumer-0", 10, 11, a), poll("consumer-0", 12, 13, c)}),
			Final: final(a, b, c)}},
		{name: "int poll skip", want: want{KindIntPollSkip: 1}, h: History{
			Ops:   ops(abc(), []Op{poll("consumer-0", 10, 11, a, c)}),
			Final: final(a, b, c)}},
		{name: "a gap with no known value is not a skip", want: want{}, h: History{
			Ops: []Op{send("producer-0", 0, "a", 0, 0, 5), send("producer-0", 0, "c", 2, 1, 6),
				poll("consumer-0", 10, 11, a), poll("consumer-0", 12, 13, c)},
			Final: final(a, c)}},
		{name: "skips in other consumers' partitions do not count", want: want{}, h: History{
			Ops: ops(abc(), []Op{poll("consumer-0", 10, 11, a), poll("consumer-1", 10, 11, b),
				poll("consumer-1", 12, 13, c), poll("consumer-0", 12, 13, b)}),
			Final: final(a, b, c)}},
		{name: "a skip after a rebalance is fine", want: want{}, h: History{
			Ops: ops(abc(), []Op{poll("consumer-0", 10, 11, a), assign("consumer-0", 11, 12, 0),
				poll("consumer-0", 12, 13, c)}),
			Final: final(a, b, c)}},
		{name: "a skip below the log start is retention's", want: want{}, expired: 1, h: History{
			Ops:      ops(abc(), []Op{poll("consumer-0", 10, 11, a), poll("consumer-0", 12, 13, c)}),
			Final:    final(c),
			LogStart: map[string]map[int32]int64{"q": {0: 2}}}},

		{name: "nonmonotonic poll", want: want{KindNonmonotonicPoll: 1}, h: History{
			Ops:   ops(abc(), []Op{poll("consumer-0", 10, 11, a, b), poll("consumer-0", 12, 13, b, c)}),
			Final: final(a, b, c)}},
		{name: "int nonmonotonic poll", want: want{KindIntNonmonotonicPoll: 1}, h: History{
			Ops:   ops(abc(), []Op{poll("consumer-0", 10, 11, a, b, a, b, c)}),
			Final: final(a, b, c)}},
		{name: "rebalance then rewind is fine", want: want{}, h: History{
			Ops: ops(abc(), []Op{poll("consumer-0", 10, 11, a, b), assign("consumer-0", 11, 12, 0),
				poll("consumer-0", 12, 13, a, b, c)}),
			Final: final(a, b, c)}},
		{name: "rewind after losing and regaining the partition is fine", want: want{}, h: History{
			Ops: ops(abc(), []Op{poll("consumer-0", 10, 11, a, b), assign("consumer-0", 11, 12),
				assign("consumer-0", 13, 14, 0), poll("consumer-0", 15, 16, b, c)}),
			Final: final(a, b, c)}},
		{name: "a skip in a partition kept across a rebalance", want: want{KindPollSkip: 1}, h: History{
			Ops: ops(abc(), []Op{assign("consumer-0", 5, 5, 0), poll("consumer-0", 10, 11, a),
				assign("consumer-0", 11, 11, 0), assign("consumer-0", 11, 11, 0, 1), poll("consumer-0", 12, 13, c)}),
			Final: final(a, b, c)}},
		{name: "a rewind in a partition kept across a rebalance", want: want{KindNonmonotonicPoll: 1}, h: History{
			Ops: ops(abc(), []Op{assign("consumer-0", 5, 5, 0), poll("consumer-0", 10, 11, a, b),
				assign("consumer-0", 11, 11, 0, 1), poll("consumer-0", 12, 13, a, b, c)}),
			Final: final(a, b, c)}},
		{name: "losing and regaining the partition inside one poll", want: want{}, h: History{
			Ops: ops(abc(), []Op{assign("consumer-0", 5, 5, 0), poll("consumer-0", 10, 11, a, b),
				poll("consumer-0", 12, 20, b, c), assign("consumer-0", 13, 13), assign("consumer-0", 14, 14, 0)}),
			Final: final(a, b, c)}},
		{name: "rewind after another topic's rebalance is not", want: want{KindNonmonotonicPoll: 1}, h: History{
			Ops: ops(abc(), []Op{poll("consumer-0", 10, 11, a, b),
				{Process: "consumer-0", Kind: OpAssign, Outcome: OK, Topic: "other", Start: ms(11), End: ms(12), Parts: []int32{0}},
				poll("consumer-0", 12, 13, a, b, c)}),
			Final: final(a, b, c)}},

		{name: "nonmonotonic send", want: want{KindNonmonotonicSend: 1}, h: History{
			Ops:   []Op{send("producer-0", 0, "a", 1, 0, 5), send("producer-0", 0, "b", 0, 1, 6)},
			Final: final(rec(0, 0, "b"), rec(0, 1, "a"))}},
		{name: "two producers interleave", want: want{}, h: History{
			Ops: []Op{send("producer-0", 0, "a", 1, 0, 5), send("producer-1", 0, "b", 0, 1, 6),
				send("producer-0", 1, "c", 0, 2, 7)},
			Final: final(rec(0, 0, "b"), rec(0, 1, "a"), rec(1, 0, "c"))}},

		{name: "commit backwards", want: want{KindCommitBackwards: 1}, h: History{
			Ops: []Op{fetchOffsets("consumer-0", "g", 10, 20, map[int32]int64{0: 5}),
				fetchOffsets("consumer-1", "g", 30, 40, map[int32]int64{0: 3})}}},
		{name: "committed offset vanishes", want: want{KindCommitBackwards: 1}, h: History{
			Ops: []Op{fetchOffsets("consumer-0", "g", 10, 20, map[int32]int64{0: 5, 1: 2}),
				fetchOffsets("consumer-1", "g", 30, 40, map[int32]int64{1: 2})}}},
		{name: "concurrent fetches may disagree", want: want{}, h: History{
			Ops: []Op{fetchOffsets("consumer-0", "g", 10, 20, map[int32]int64{0: 5}),
				fetchOffsets("consumer-1", "g", 15, 25, map[int32]int64{0: 3}),
				fetchOffsets("consumer-1", "g", 30, 40, map[int32]int64{0: 6})}}},

		{name: "commit stalled after the heal", want: want{KindCommitStalled: 1}, h: History{Healed: ms(50), CommitGroup: "g",
			Ops:   ops(abc(), []Op{groupFetch(10, 20, map[int32]int64{0: 1}), groupFetch(60, 70, map[int32]int64{0: 1})}),
			Final: final(a, b, c)}},
		{name: "commit moved after the heal", want: want{}, h: History{Healed: ms(50), CommitGroup: "g",
			Ops:   ops(abc(), []Op{groupFetch(10, 20, map[int32]int64{0: 1}), groupFetch(60, 70, map[int32]int64{0: 3})}),
			Final: final(a, b, c)}},
		{name: "a partition never committed", want: want{KindCommitStalled: 1}, h: History{Healed: ms(50), CommitGroup: "g",
			Ops:   ops(abc(), []Op{groupFetch(10, 20, nil), groupFetch(60, 70, map[int32]int64{1: 0})}),
			Final: final(a, b, c)}},
		{name: "a group that had committed everything before the heal", want: want{}, h: History{Healed: ms(50), CommitGroup: "g",
			Ops:   ops(abc(), []Op{groupFetch(10, 20, map[int32]int64{0: 3}), groupFetch(60, 70, map[int32]int64{0: 3})}),
			Final: final(a, b, c)}},
		{name: "stalled commits without CommitGroup are not checked", want: want{}, h: History{Healed: ms(50),
			Ops:   ops(abc(), []Op{groupFetch(10, 20, map[int32]int64{0: 1}), groupFetch(60, 70, map[int32]int64{0: 1})}),
			Final: final(a, b, c)}},

		{name: "offsets register: a committed offset not read back", want: want{KindOffsetsNotLinearizable: 1}, h: History{
			Ops: []Op{commit("offsets-0", "r", OK, 0, 10, map[int32]int64{0: 5}),
				fetchOffsets("offsets-1", "r", 20, 30, nil)}}},
		{name: "offsets register: a stale read", want: want{KindOffsetsNotLinearizable: 1}, h: History{
			Ops: []Op{commit("offsets-0", "r", OK, 0, 10, map[int32]int64{0: 5}),
				commit("offsets-0", "r", OK, 20, 30, map[int32]int64{0: 7}),
				fetchOffsets("offsets-1", "r", 40, 50, map[int32]int64{0: 5})}}},
		{name: "offsets register: a failed commit seen", want: want{KindOffsetsNotLinearizable: 1}, h: History{
			Ops: []Op{commit("offsets-0", "r", Fail, 0, 10, map[int32]int64{0: 5}),
				fetchOffsets("offsets-1", "r", 20, 30, map[int32]int64{0: 5})}}},
		{name: "offsets register: an info commit may have happened", want: want{}, h: History{
			Ops: []Op{commit("offsets-0", "r", Info, 0, 10, map[int32]int64{0: 5}),
				fetchOffsets("offsets-1", "r", 20, 30, map[int32]int64{0: 5})}}},
		{name: "offsets register: an info commit may not have happened", want: want{}, h: History{
			Ops: []Op{commit("offsets-0", "r", Info, 0, 0, map[int32]int64{0: 5}),
				fetchOffsets("offsets-1", "r", 20, 30, nil),
				commit("offsets-1", "r", OK, 40, 50, map[int32]int64{0: 3}),
				fetchOffsets("offsets-1", "r", 60, 70, map[int32]int64{0: 3})}}},
		{name: "register groups go backwards without a commit-backwards", want: want{}, h: History{
			Ops: []Op{commit("offsets-0", "r", OK, 0, 10, map[int32]int64{0: 5}),
				fetchOffsets("offsets-1", "r", 20, 30, map[int32]int64{0: 5}),
				commit("offsets-0", "r", OK, 40, 50, map[int32]int64{0: 2}),
				fetchOffsets("offsets-1", "r", 60, 70, map[int32]int64{0: 2})}}},

		{name: "log: an acknowledged append missing", want: want{KindLogNotLinearizable: 1}, h: History{
			Ops: []Op{appendOp("log-0", "a", OK, 0, 0, 10), readOp("log-1", 20, 30)}}},
		{name: "log: a stale read", want: want{KindLogNotLinearizable: 1}, h: History{
			Ops: []Op{appendOp("log-0", "a", OK, 0, 0, 10), readOp("log-1", 20, 30, "a"), readOp("log-1", 40, 50)}}},
		{name: "log: a wrong offset", want: want{KindLogNotLinearizable: 1, KindInconsistentOffsets: 1}, h: History{
			Ops: []Op{appendOp("log-0", "a", OK, 0, 0, 10), appendOp("log-0", "b", OK, 0, 20, 30)}}},
		{name: "log: a duplicated value", want: want{KindLogNotLinearizable: 1, KindDuplicate: 1}, h: History{
			Ops: []Op{appendOp("log-0", "a", OK, 0, 0, 10), readOp("log-1", 20, 30, "a", "a")}}},
		{name: "log: a read during an append may miss it", want: want{}, h: History{
			Ops: []Op{appendOp("log-0", "a", OK, 0, 0, 100), readOp("log-1", 10, 20), readOp("log-1", 30, 40, "a")}}},
		{name: "log: a read during an append may see it", want: want{}, h: History{
			Ops: []Op{appendOp("log-0", "a", OK, 0, 0, 100), readOp("log-1", 10, 20, "a"), readOp("log-1", 30, 40, "a")}}},
		{name: "log: an info append may appear", want: want{}, h: History{
			Ops: []Op{appendOp("log-0", "a", Info, 0, 0, 0), readOp("log-1", 10, 20), readOp("log-1", 30, 40, "a"),
				appendOp("log-0", "b", OK, 1, 50, 60), readOp("log-1", 70, 80, "a", "b")}}},
		{name: "log: an info append may not appear", want: want{}, h: History{
			Ops: []Op{appendOp("log-0", "a", Info, 0, 0, 10), readOp("log-1", 20, 30),
				appendOp("log-0", "b", OK, 0, 40, 50), readOp("log-1", 60, 70, "b")}}},
		{name: "log: a failed append does not appear", want: want{KindLogNotLinearizable: 1}, h: History{
			Ops: []Op{appendOp("log-0", "a", Fail, 0, 0, 10), readOp("log-1", 20, 30, "a")}}},

		{name: "stale high watermark after an acknowledged send", want: want{KindStaleRead: 1}, h: History{
			Ops: []Op{send("producer-0", 0, "a", 7, 0, 5), hwRead("hw-reader", ViaFetch, 10, 11, map[int32]int64{0: 5})}}},
		{name: "high watermark at the acknowledged offset is stale", want: want{KindStaleRead: 1}, h: History{
			Ops: []Op{send("producer-0", 0, "a", 7, 0, 5), hwRead("hw-reader", ViaListOffsets, 10, 11, map[int32]int64{0: 7})}}},
		{name: "high watermark past the acknowledged offset", want: want{}, h: History{
			Ops: []Op{send("producer-0", 0, "a", 7, 0, 5), hwRead("hw-reader", ViaFetch, 10, 11, map[int32]int64{0: 8})}}},
		{name: "a high watermark read during the send may miss it", want: want{}, h: History{
			Ops: []Op{send("producer-0", 0, "a", 7, 0, 5), hwRead("hw-reader", ViaFetch, 3, 11, map[int32]int64{0: 5})}}},
		{name: "another partition's send establishes nothing", want: want{}, h: History{
			Ops: []Op{send("producer-0", 1, "a", 7, 0, 5), hwRead("hw-reader", ViaFetch, 10, 11, map[int32]int64{0: 5})}}},
		{name: "high watermark going back", want: want{KindStaleRead: 1}, h: History{
			Ops: []Op{hwRead("hw-reader", ViaListOffsets, 0, 5, map[int32]int64{0: 9, 1: 3}),
				hwRead("hw-reader", ViaFetch, 10, 11, map[int32]int64{0: 4})}}},
		{name: "concurrent high watermark reads may disagree", want: want{}, h: History{
			Ops: []Op{hwRead("hw-reader", ViaListOffsets, 0, 10, map[int32]int64{0: 9}),
				hwRead("hw-reader", ViaFetch, 5, 15, map[int32]int64{0: 4}),
				hwRead("hw-reader", ViaFetch, 20, 25, map[int32]int64{0: 9})}}},
		{name: "stale high watermarks in two partitions, three reads", want: want{KindStaleRead: 3}, h: History{
			Ops: []Op{send("producer-0", 0, "a", 7, 0, 5), send("producer-1", 1, "b", 3, 0, 5),
				hwRead("hw-reader", ViaListOffsets, 10, 11, map[int32]int64{0: 2, 1: 3}),
				hwRead("hw-reader", ViaFetch, 12, 13, map[int32]int64{0: 2})}}},
		{name: "a failed high watermark read is no read", want: want{}, h: History{
			Ops: []Op{send("producer-0", 0, "a", 7, 0, 5),
				{Process: "hw-reader", Kind: OpHighWater, Outcome: Fail, Topic: "q", Via: ViaFetch, Start: ms(10), End: ms(11), Err: "NOT_LEADER_OR_FOLLOWER"}}}},
		{name: "acks=1 sends establish no high watermark", want: want{}, h: History{Acks1: true,
			Ops: []Op{send("producer-0", 0, "a", 7, 0, 5), hwRead("hw-reader", ViaFetch, 10, 11, map[int32]int64{0: 5})}}},
		{name: "acks=1 leaves the liveness probes' sends", want: want{KindStaleRead: 1}, h: History{Acks1: true,
			Ops: []Op{send("liveness-0", 0, "a", 7, 0, 5), hwRead("hw-reader", ViaFetch, 10, 11, map[int32]int64{0: 5})}}},

		{name: "stale committed offset after an acknowledged commit", want: want{KindStaleRead: 1}, h: History{
			Ops: []Op{commit("consumer-0", "g", OK, 0, 10, map[int32]int64{0: 150}),
				fetchOffsets("offsets-reader", "g", 20, 30, map[int32]int64{0: 120})}}},
		{name: "committed offset absent after an acknowledged commit", want: want{KindStaleRead: 1}, h: History{
			Ops: []Op{commit("consumer-0", "g", OK, 0, 10, map[int32]int64{0: 150}),
				fetchOffsets("offsets-reader", "g", 20, 30, nil)}}},
		{name: "a later smaller commit explains a smaller offset", want: want{}, h: History{
			Ops: []Op{commit("consumer-0", "g", OK, 0, 10, map[int32]int64{0: 150}),
				commit("consumer-1", "g", OK, 12, 15, map[int32]int64{0: 120}),
				fetchOffsets("offsets-reader", "g", 20, 30, map[int32]int64{0: 120})}}},
		{name: "an info commit of the value may apply late", want: want{}, h: History{
			Ops: []Op{commit("consumer-1", "g", Info, 0, 5, map[int32]int64{0: 120}),
				commit("consumer-0", "g", OK, 6, 10, map[int32]int64{0: 150}),
				fetchOffsets("offsets-reader", "g", 20, 30, map[int32]int64{0: 120})}}},
		{name: "an ok commit of the value that completed first does not explain it", want: want{KindStaleRead: 1}, h: History{
			Ops: []Op{commit("consumer-1", "g", OK, 0, 5, map[int32]int64{0: 120}),
				commit("consumer-0", "g", OK, 6, 10, map[int32]int64{0: 150}),
				fetchOffsets("offsets-reader", "g", 20, 30, map[int32]int64{0: 120})}}},
		{name: "a failed commit is not acknowledged", want: want{}, h: History{
			Ops: []Op{commit("consumer-0", "g", Fail, 0, 10, map[int32]int64{0: 150}),
				fetchOffsets("offsets-reader", "g", 20, 30, map[int32]int64{0: 120})}}},
		{name: "a fetch during the commit may miss it", want: want{}, h: History{
			Ops: []Op{commit("consumer-0", "g", OK, 0, 25, map[int32]int64{0: 150}),
				fetchOffsets("offsets-reader", "g", 20, 30, map[int32]int64{0: 120})}}},
		{name: "stale committed offset and committed offset going backwards", want: want{KindStaleRead: 1, KindCommitBackwards: 1}, h: History{
			Ops: []Op{commit("consumer-0", "g", OK, 0, 10, map[int32]int64{0: 150}),
				fetchOffsets("offsets-reader", "g", 12, 15, map[int32]int64{0: 150}),
				fetchOffsets("offsets-reader", "g", 20, 30, map[int32]int64{0: 120})}}},

		{name: "unpolled after the drain", want: want{KindUnpolled: 1}, h: History{Drained: ms(50), DrainTopic: "q", Finished: ms(100),
			Ops: ops(abc(), []Op{poll("consumer-0", 10, 11, rec(0, 0, "a"), rec(0, 1, "b"))}), Final: final(rec(0, 0, "a"), rec(0, 1, "b"), rec(0, 2, "c"))}},
		{name: "every send polled after the drain", want: want{}, h: History{Drained: ms(50), DrainTopic: "q", Finished: ms(100),
			Ops:   ops(abc(), []Op{poll("consumer-0", 10, 11, rec(0, 0, "a"), rec(0, 1, "b")), poll("consumer-1", 60, 61, rec(0, 2, "c"))}),
			Final: final(rec(0, 0, "a"), rec(0, 1, "b"), rec(0, 2, "c"))}},
		{name: "unpolled without a drain is not checked", want: want{}, h: History{
			Ops: ops(abc(), []Op{poll("consumer-0", 10, 11, rec(0, 0, "a"), rec(0, 1, "b"))}), Final: final(rec(0, 0, "a"), rec(0, 1, "b"), rec(0, 2, "c"))}},

		{name: "a final read that failed", want: want{KindFinalReadFailed: 1}, h: History{
			FinalErrors: map[string]string{"q": "context deadline exceeded"}}},

		{name: "no leader after heal", want: want{KindNoLeaderAfterHeal: 1}, h: History{
			Liveness: map[string]map[int32]time.Duration{"q": {0: -1, 1: 2 * time.Second}}}},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			r := Check(&tc.h)
			got := map[AnomalyKind]int{}
			for k, n := range r.Counts {
				if n != 0 {
					got[k] = n
				}
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("counts %v, want %v", got, tc.want)
				for _, a := range r.Anomalies {
					t.Logf("%s: %s", a.Kind, a.Msg)
				}
			}
			if r.Valid() != (len(tc.want) == 0) {
				t.Errorf("Valid() = %v with %d anomalies", r.Valid(), len(r.Anomalies))
			}
			if r.Expired != tc.expired {
				t.Errorf("expired %d, want %d", r.Expired, tc.expired)
			}
			for _, a := range r.Anomalies {
				if a.Msg == "" || a.Count < 1 {
					t.Errorf("anomaly %+v has no message or count", a)
				}
				for _, i := range a.Ops {
					if i < 0 || i >= len(tc.h.Ops) {
						t.Errorf("%s names op %d of %d", a.Kind, i, len(tc.h.Ops))
					}
				}
			}
		})
	}
}

// TestCheckNames checks that anomalies name what is involved.
func TestCheckNames(t *testing.T) {
	h := &History{Ops: ops(abc(), []Op{poll("consumer-0", 10, 11, rec(0, 0, "a")), poll("consumer-0", 12, 13, rec(0, 2, "c"))})}
	r := Check(h)
	byKind := map[AnomalyKind]Anomaly{}
	for _, a := range r.Anomalies {
		byKind[a.Kind] = a
	}
	lost := byKind[KindLostWrite]
	if !slices.Equal(lost.Ops, []int{1}) || !slices.Equal(lost.Records, []Record{rec(0, 1, "b")}) ||
		!strings.Contains(lost.Msg, "producer-0") || !strings.Contains(lost.Msg, `"b"`) {
		t.Errorf("lost write %+v", lost)
	}
	skip := byKind[KindPollSkip]
	if !slices.Equal(skip.Ops, []int{3, 4}) || !slices.Contains(skip.Records, rec(0, 1, "b")) ||
		!strings.Contains(skip.Msg, "consumer-0") || !strings.Contains(skip.Msg, "0.010s") {
		t.Errorf("poll skip %+v", skip)
	}
	if r.SendsOK != 3 || r.Polls != 2 || r.RecordsSeen != 2 {
		t.Errorf("counts: %d sends ok, %d polls, %d records", r.SendsOK, r.Polls, r.RecordsSeen)
	}

	// The log check names the read that missed an acknowledged append.
	h = &History{Ops: []Op{appendOp("log-0", "a", OK, 0, 0, 10), readOp("log-1", 20, 30)}}
	r = Check(h)
	if len(r.Anomalies) != 1 || !slices.Equal(r.Anomalies[0].Ops, []int{0, 1}) || !strings.Contains(r.Anomalies[0].Msg, "log-log-0.html") {
		t.Errorf("log anomaly %+v", r.Anomalies)
	}
	if len(r.Checks) != 1 || r.Checks[0].Result != "illegal" || r.Checks[0].Name != "log-log-0" {
		t.Errorf("checks %+v", r.Checks)
	}
}

// TestCheckStaleReadNames checks that a stale read names the read and
// what had established more, and that the check is not blind: a leader
// cut off by a partition that goes on answering reads after a write the
// new leader acknowledged is reported (a stale Fetch high watermark and
// a stale committed offset).
func TestCheckStaleReadNames(t *testing.T) {
	h := &History{Ops: []Op{
		send("producer-0", 2, "a", 41, 1000, 1010),
		hwRead("hw-reader", ViaFetch, 1020, 1021, map[int32]int64{2: 40}),
		commit("consumer-0", "g", OK, 1000, 1010, map[int32]int64{2: 42}),
		fetchOffsets("offsets-reader", "g", 1020, 1022, map[int32]int64{2: 30}),
	}}
	r := Check(h)
	if r.Counts[KindStaleRead] != 2 || len(r.Anomalies) != 2 {
		t.Fatalf("anomalies %+v", r.Anomalies)
	}
	hw, co := r.Anomalies[0], r.Anomalies[1]
	if hw.Topic != "q" || hw.Partition != 2 || !slices.Equal(hw.Ops, []int{0, 1}) ||
		!strings.Contains(hw.Msg, "read 40 via Fetch") || !strings.Contains(hw.Msg, "acknowledged at offset 41") {
		t.Errorf("stale high watermark %+v", hw)
	}
	if co.Group != "g" || co.Partition != 2 || !slices.Equal(co.Ops, []int{2, 3}) ||
		!strings.Contains(co.Msg, "returned 30") || !strings.Contains(co.Msg, "committed 42") {
		t.Errorf("stale committed offset %+v", co)
	}
	if got := r.Verdict(); got != "INVALID seed=0: stale-read 2" {
		t.Errorf("verdict %q", got)
	}
	var text strings.Builder
	WriteText(&text, h, r)
	if !strings.Contains(text.String(), "high-watermark ok") || !strings.Contains(text.String(), "via Fetch offsets {2:40}") {
		t.Errorf("report lacks the read:\n%s", text.String())
	}
}

// TestCheckUnseenExamples checks that a large anomaly gives a few examples
// in its message and every send in its slices.
func TestCheckUnseenExamples(t *testing.T) {
	h := &History{Final: map[string]map[int32][]Record{"q": {0: nil}}}
	for i := range 10 {
		h.Ops = append(h.Ops, send("producer-0", 0, fmt.Sprint("v", i), int64(i), i, i+1))
	}
	r := Check(h)
	if len(r.Anomalies) != 1 {
		t.Fatalf("anomalies %+v", r.Anomalies)
	}
	a := r.Anomalies[0]
	if a.Kind != KindUnseen || a.Count != 10 || len(a.Ops) != 10 || len(a.Records) != 10 || !strings.Contains(a.Msg, "and 7 more") {
		t.Errorf("unseen %+v", a)
	}
	if got := r.Verdict(); got != "INVALID seed=0: unseen 10" {
		t.Errorf("verdict %q", got)
	}
}

// TestCheckTimeout checks that a porcupine check that runs out of time is
// a note, not an anomaly: many concurrent appends of unknown outcome and
// a read of a value nobody appended.
func TestCheckTimeout(t *testing.T) {
	h := &History{}
	for i := range 20 {
		h.Ops = append(h.Ops, appendOp(fmt.Sprint("log-", i), fmt.Sprint("v", i), Info, 0, 0, 0))
	}
	h.Ops = append(h.Ops, readOp("log-99", 10, 20, "w"))
	r := CheckWith(h, Options{LinTimeout: time.Millisecond})
	if len(r.Checks) != 1 {
		t.Fatalf("checks %+v", r.Checks)
	}
	t.Logf("porcupine: %s", r.Checks[0].Result)
	switch r.Checks[0].Result {
	case "unknown":
		if !r.Valid() || len(r.Notes) != 1 {
			t.Errorf("a timeout: valid %v, notes %q", r.Valid(), r.Notes)
		}
	case "illegal": // the machine was fast enough
		if r.Valid() {
			t.Error("an illegal history is valid")
		}
	default:
		t.Errorf("result %q", r.Checks[0].Result)
	}
}

// TestAssignmentReassigned checks that a consumer's assignment callback
// handing it partitions it owns already (kgo's reassignment of a topic in
// full) is recorded as losing them first, so the poll checks restart
// there.
func TestAssignmentReassigned(t *testing.T) {
	rec := NewRecorder(time.Now())
	a := NewAssignment(rec, "consumer-0", "q", "q-group")
	a.change([]int32{0, 1}, true)
	a.change(nil, true)        // a rebalance that changed nothing
	a.change([]int32{1}, true) // 1 again, in full
	var got [][]int32
	for _, op := range rec.Ops() {
		got = append(got, op.Parts)
	}
	want := [][]int32{{0, 1}, {0, 1}, {0}, {0, 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("assignments %v, want %v", got, want)
	}
}

func TestProduceOutcome(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Outcome
	}{
		{nil, OK},
		{kgo.ErrMaxBuffered, Fail},
		{kerr.MessageTooLarge, Fail},
		{fmt.Errorf("wrapped: %w", kerr.InvalidRecord), Fail},
		{kerr.InvalidTimestamp, Info}, // a retry after a clock jump
		{kerr.NotLeaderForPartition, Info},
		{kgo.ErrRecordTimeout, Info},
		{context.DeadlineExceeded, Info},
	} {
		if got := ProduceOutcome(tc.err); got != tc.want {
			t.Errorf("ProduceOutcome(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
