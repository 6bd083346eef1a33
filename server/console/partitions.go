package console

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// TopicPartitions are one topic's partitions, for PartitionsByTopic.
type TopicPartitions struct {
	Topic      string
	Internal   bool // __consumer_offsets and the like: listed after the others
	Partitions []int32
}

// maxNamedTopics is how many topics PartitionsByTopic names before it
// counts the rest.
const maxNamedTopics = 8

// PartitionsByTopic names partitions grouped by topic, the users' topics
// first and internal ones after (each group by name), a topic's
// partitions sorted with runs as ranges: "orders 0-2,5; __consumer_offsets
// 7,12-14". Past maxNamedTopics topics the rest are counted ("and 3 more
// topics (12 partitions)"). The down-broker warnings of the log and the
// console's banner use it.
func PartitionsByTopic(ts []TopicPartitions) string {
	ts = slices.Clone(ts)
	slices.SortFunc(ts, func(a, b TopicPartitions) int {
		if a.Internal != b.Internal {
			if a.Internal {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.Topic, b.Topic)
	})
	var sb strings.Builder
	for i, t := range ts {
		if i == maxNamedTopics {
			n := 0
			for _, r := range ts[i:] {
				n += len(r.Partitions)
			}
			fmt.Fprintf(&sb, "; and %s (%s)", plural(len(ts)-i, "more topic", "more topics"), plural(n, "partition", "partitions"))
			break
		}
		if i > 0 {
			sb.WriteString("; ")
		}
		sb.WriteString(t.Topic)
		sb.WriteByte(' ')
		sb.WriteString(ranges(t.Partitions))
	}
	return sb.String()
}

// ranges writes sorted partition numbers with runs of 3 or more as
// ranges: 0-2,5,7,8.
func ranges(ps []int32) string {
	ps = slices.Compact(slices.Sorted(slices.Values(ps)))
	var sb strings.Builder
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(int(ps[i])))
		switch {
		case j >= i+2:
			sb.WriteString("-" + strconv.Itoa(int(ps[j])))
		case j == i+1:
			sb.WriteString("," + strconv.Itoa(int(ps[j])))
		}
		i = j + 1
	}
	return sb.String()
}
