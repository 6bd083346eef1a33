package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

func TestRender(t *testing.T) {
	if r := render(nil); !r.Null || r.Size != 0 {
		t.Fatalf("nil: %+v", r)
	}
	if r := render([]byte{}); r.Null || r.Text == nil || *r.Text != "" || r.JSON != nil {
		t.Fatalf("empty: %+v", r)
	}
	r := render([]byte(`{"a":[1,2]}`))
	if r.JSON == nil || *r.JSON != "{\n  \"a\": [\n    1,\n    2\n  ]\n}" || *r.Text != `{"a":[1,2]}` {
		t.Fatalf("json: %+v", r)
	}
	r = render([]byte("héllo"))
	if r.Text == nil || *r.Text != "héllo" || r.JSON != nil || !strings.HasPrefix(r.Hex, "00000000  68 c3 a9") {
		t.Fatalf("text: %+v", r)
	}
	r = render([]byte{0xff, 0xfe})
	if r.Text != nil || r.JSON != nil || !strings.Contains(r.Hex, "ff fe") {
		t.Fatalf("binary: %+v", r)
	}
	// A long value is cut at a rune boundary.
	long := strings.Repeat("é", maxShownBytes)
	r = render([]byte(long))
	if !r.Truncated || r.Size != 2*maxShownBytes || len(*r.Text) != maxShownBytes || !strings.HasPrefix(long, *r.Text) {
		t.Fatalf("long: truncated %v size %d text %d", r.Truncated, r.Size, len(*r.Text))
	}
}

func TestDeriveAlerts(t *testing.T) {
	m := kadm.Metadata{Controller: 1, Brokers: kadm.BrokerDetails{{NodeID: 1}, {NodeID: 3}}, Topics: kadm.TopicDetails{
		"t": {Topic: "t", Partitions: kadm.PartitionDetails{
			0: {Partition: 0, Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 3}},
			1: {Partition: 1, Leader: 3, Replicas: []int32{2, 3, 1}, ISR: []int32{3, 1}},
			2: {Partition: 2, Leader: 1, Replicas: []int32{3, 1}, ISR: []int32{1}},
		}},
		"u": {Topic: "u", Partitions: kadm.PartitionDetails{
			0: {Partition: 0, Leader: -1, Replicas: []int32{2}, ISR: []int32{2}},
		}},
		"__consumer_offsets": {Topic: "__consumer_offsets", IsInternal: true, Partitions: kadm.PartitionDetails{
			3: {Partition: 3, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}},
			4: {Partition: 4, Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1}},
		}},
	}}
	got := deriveAlerts(m)
	want := []Alert{
		{"warning", "broker 2 is down", "4 partitions under-replicated: t 0,1; u 0; __consumer_offsets 4"},
		{"critical", "1 partition is offline", "no leader: u-0"},
		{"warning", "1 partition is under-replicated", "ISR smaller than the replica set: t-2"},
	}
	if len(got) != len(want) {
		t.Fatalf("alerts %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("alert %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	m.Controller = -1
	m.Topics = nil
	if got := deriveAlerts(m); len(got) != 1 || got[0].Title != "no active controller" {
		t.Fatalf("no controller: %+v", got)
	}
	if got := deriveAlerts(kadm.Metadata{Controller: 1, Brokers: kadm.BrokerDetails{{NodeID: 1}}}); len(got) != 0 {
		t.Fatalf("healthy: %+v", got)
	}
}

// Partitions are named by topic, the users' first, runs as ranges; past
// maxNamedTopics the rest are counted.
func TestPartitionsByTopic(t *testing.T) {
	got := PartitionsByTopic([]TopicPartitions{
		{Topic: "__consumer_offsets", Internal: true, Partitions: []int32{14, 7, 12, 13}},
		{Topic: "orders", Partitions: []int32{5, 0, 1, 2, 8, 9}},
		{Topic: "audit", Partitions: []int32{3}},
	})
	if want := "audit 3; orders 0-2,5,8,9; __consumer_offsets 7,12-14"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	var many []TopicPartitions
	for i := range maxNamedTopics + 3 {
		many = append(many, TopicPartitions{Topic: fmt.Sprintf("t%02d", i), Partitions: []int32{0, 1}})
	}
	if got := PartitionsByTopic(many); !strings.HasSuffix(got, "t07 0,1; and 3 more topics (6 partitions)") {
		t.Errorf("many topics: %q", got)
	}
}

// A small, deeply nested JSON value is not pretty-printed: json.Indent
// would write 200 MB for these 20 KB.
func TestRenderDeepJSON(t *testing.T) {
	deep := []byte(strings.Repeat("[", 9999) + strings.Repeat("]", 9999))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := render(deep)
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("rendering %d bytes of nested JSON allocated %d MiB", len(deep), n>>20)
	}
	if r.JSON != nil || r.Text == nil || !r.Truncated {
		t.Errorf("deep JSON: json %v, text %v, truncated %v; want text only", r.JSON != nil, r.Text != nil, r.Truncated)
	}
	// The bound is an upper bound of what Indent writes, and a large
	// shallow value still pretty-prints.
	for _, s := range []string{`{"a":[1,2,{"b":"x,y[z]\"{"}],"c":{}}`, `[[[]]]`, `"a"`, `[1, 2]`} {
		var buf bytes.Buffer
		if err := json.Indent(&buf, []byte(s), "", "  "); err != nil {
			t.Fatal(err)
		}
		if got := indentedSize([]byte(s)); got < buf.Len() {
			t.Errorf("indentedSize(%s) = %d, but Indent writes %d bytes", s, got, buf.Len())
		}
	}
	wide := []byte("[" + strings.Repeat("1,", 300000) + "1]")
	if r := render(wide); r.JSON == nil || !strings.HasPrefix(*r.JSON, "[\n  1,\n  1,") {
		t.Errorf("a 600 KB flat array is not pretty-printed")
	}
}
