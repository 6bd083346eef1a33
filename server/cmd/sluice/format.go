package main

// What the everyday tools (topic, group, produce, consume, cluster)
// share: aligned tables in Kafka's tool style, --json output, the
// command-line syntaxes Kafka's tools use (key=value configs, "t:0,1"
// partition lists, replica assignments), and progress lines, shown only
// when stderr is a terminal.

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
)

// newTable is an aligned table: columns two spaces apart, as the
// reassign commands print them.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// writeJSON prints v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// addJSONFlag adds --json to a list or describe command.
func addJSONFlag(c *cobra.Command) *bool {
	return c.Flags().Bool("json", false, "print JSON instead of a table")
}

// dash is s, or "-" for an empty s (Kafka's tools print "-" for none).
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ints is ids comma-separated, or "-" for none.
func ints(ids []int32) string {
	if len(ids) == 0 {
		return "-"
	}
	return joinInts(ids, ",")
}

// kafkaErr is the Kafka error of code with the broker's message, or nil.
func kafkaErr(code int16, msg *string) error {
	return brokerErr(kerr.ErrorForCode(code), msg)
}

// brokerErr is withMessage (the name kept for the everyday commands).
func brokerErr(err error, msg *string) error { return withMessage(err, msg) }

// parseConfigs parses repeated --config key=value flags (a key given
// twice is refused: the second would silently win).
func parseConfigs(flagName string, kvs []string) (map[string]*string, []string, error) {
	out := map[string]*string{}
	var order []string
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, nil, usageErrorf("%s: want key=value, got %q", flagName, kv)
		}
		if _, dup := out[k]; dup {
			return nil, nil, usageErrorf("%s: %s is given twice", flagName, k)
		}
		out[k] = &v
		order = append(order, k)
	}
	return out, order, nil
}

// topicSpec is a topic and, optionally, some of its partitions: "t" or
// "t:0,1,2", the syntax of kafka-consumer-groups.sh --topic.
type topicSpec struct {
	topic      string
	partitions []int32 // nil: every partition
}

func parseTopicSpec(flagName, s string) (topicSpec, error) {
	name, parts, hasParts := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if name == "" {
		return topicSpec{}, usageErrorf("%s: empty topic name in %q", flagName, s)
	}
	spec := topicSpec{topic: name}
	if !hasParts {
		return spec, nil
	}
	for _, f := range strings.Split(parts, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || n < 0 {
			return topicSpec{}, usageErrorf("%s: %q is not a partition number (in %q)", flagName, f, s)
		}
		if !slices.Contains(spec.partitions, int32(n)) {
			spec.partitions = append(spec.partitions, int32(n))
		}
	}
	return spec, nil
}

// parseReplicaAssignment parses kafka-topics.sh's --replica-assignment:
// partitions comma-separated, each partition's replicas colon-separated,
// preferred leader first ("1:2,2:3,3:1" is three partitions of two
// replicas). Every partition must have the same number of replicas, each
// broker named once per partition.
func parseReplicaAssignment(flagName, s string) ([][]int32, error) {
	var out [][]int32
	for i, part := range strings.Split(s, ",") {
		var replicas []int32
		for _, f := range strings.Split(part, ":") {
			n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
			if err != nil || n < 0 {
				return nil, usageErrorf("%s: %q is not a broker id (partition %d of %q)", flagName, f, i, s)
			}
			if slices.Contains(replicas, int32(n)) {
				return nil, usageErrorf("%s: broker %d is named twice for partition %d", flagName, n, i)
			}
			replicas = append(replicas, int32(n))
		}
		if len(out) > 0 && len(replicas) != len(out[0]) {
			return nil, usageErrorf("%s: partition %d has %d replicas, partition 0 has %d (all must have as many)", flagName, i, len(replicas), len(out[0]))
		}
		out = append(out, replicas)
	}
	return out, nil
}

// parseTime parses a point in time as the tools take it: RFC 3339
// (2026-12-01T10:00:00Z, with fractions and any zone), or Kafka's
// kafka-consumer-groups.sh form without a zone (2026-12-01T10:00:00,
// optionally with .sss), read in the local time zone as Kafka reads it.
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05.000", "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time (want RFC 3339, e.g. 2026-12-01T10:00:00Z, or YYYY-MM-DDTHH:mm:SS[.sss] in local time)", s)
}

// isTerminal reports whether w is a terminal (never true of a test's
// buffer).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// meter shows a long command's progress on one line of a terminal,
// rewritten at most every 200ms; on anything else it prints nothing.
type meter struct {
	w    io.Writer // nil: not a terminal
	at   time.Time
	used bool
}

func newMeter(stderr io.Writer) *meter {
	if !isTerminal(stderr) {
		return &meter{}
	}
	return &meter{w: stderr}
}

// show rewrites the line (unless one was written within 200ms).
func (m *meter) show(format string, args ...any) {
	if m.w == nil || time.Since(m.at) < 200*time.Millisecond {
		return
	}
	m.at, m.used = time.Now(), true
	fmt.Fprintf(m.w, "\r\033[K"+format, args...)
}

// done clears the line.
func (m *meter) done() {
	if m.w != nil && m.used {
		fmt.Fprint(m.w, "\r\033[K")
	}
}
