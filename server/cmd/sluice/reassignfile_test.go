package main

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestReassignmentFileRoundTrip(t *testing.T) {
	in := []assignment{
		{Topic: "b", Partition: 1, Replicas: []int32{3, 1}},
		{Topic: "a", Partition: 10, Replicas: []int32{1}},
		{Topic: "a", Partition: 2, Replicas: []int32{2, 3, 4}},
		{Topic: `odd "name"`, Partition: 0, Replicas: []int32{4, 5}},
	}
	out := formatReassignment(in)
	want := `{"version":1,"partitions":[
{"topic":"a","partition":2,"replicas":[2,3,4],"log_dirs":["any","any","any"]},
{"topic":"a","partition":10,"replicas":[1],"log_dirs":["any"]},
{"topic":"b","partition":1,"replicas":[3,1],"log_dirs":["any","any"]},
{"topic":"odd \"name\"","partition":0,"replicas":[4,5],"log_dirs":["any","any"]}
]}
`
	if string(out) != want {
		t.Errorf("format:\n%s\nwant\n%s", out, want)
	}
	back, err := parseReassignment(out)
	if err != nil {
		t.Fatal(err)
	}
	sorted := []assignment{in[2], in[1], in[0], in[3]}
	if !reflect.DeepEqual(back, sorted) {
		t.Errorf("round trip %v, want %v", back, sorted)
	}
}

func TestReassignmentFileKafkaForms(t *testing.T) {
	want := []assignment{{Topic: "foo", Partition: 0, Replicas: []int32{2, 1}}, {Topic: "foo", Partition: 1, Replicas: []int32{1, 2}}}
	for name, in := range map[string]string{
		// As kafka-reassign-partitions.sh --generate prints it.
		"kafka's output": `{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[2,1],"log_dirs":["any","any"]},{"topic":"foo","partition":1,"replicas":[1,2],"log_dirs":["any","any"]}]}`,
		// As people write it by hand, and Kafka accepts.
		"no log_dirs":  `{"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[1,2]},{"topic":"foo","partition":0,"replicas":[2,1]}]}`,
		"no version":   `{"partitions":[{"topic":"foo","partition":0,"replicas":[2,1]},{"topic":"foo","partition":1,"replicas":[1,2]}]}`,
		"extra fields": `{"version":1,"comment":"x","partitions":[{"topic":"foo","partition":0,"replicas":[2,1],"note":1},{"topic":"foo","partition":1,"replicas":[1,2]}]}`,
		"mixed":        "{\n  \"version\": 1,\n  \"partitions\": [\n    {\"topic\": \"foo\", \"partition\": 0, \"replicas\": [2, 1], \"log_dirs\": [\"any\", \"any\"]},\n    {\"topic\": \"foo\", \"partition\": 1, \"replicas\": [1, 2]}\n  ]\n}\n",
	} {
		t.Run(name, func(t *testing.T) {
			got, err := parseReassignment([]byte(in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func TestReassignmentFileErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`not json`, "not valid JSON"},
		{`{"version":2,"partitions":[{"topic":"a","partition":0,"replicas":[1]}]}`, "version 2 is not supported"},
		{`{"version":1}`, "no partitions"},
		{`{"version":1,"partitions":[]}`, "no partitions"},
		{`{"version":1,"partitions":[{"partition":0,"replicas":[1]}]}`, `partitions[0]: no "topic"`},
		{`{"version":1,"partitions":[{"topic":"","partition":0,"replicas":[1]}]}`, `partitions[0]: no "topic"`},
		{`{"version":1,"partitions":[{"topic":"a","replicas":[1]}]}`, `no "partition"`},
		{`{"version":1,"partitions":[{"topic":"a","partition":-1,"replicas":[1]}]}`, "partition -1 is negative"},
		{`{"version":1,"partitions":[{"topic":"a","partition":0}]}`, `a-0): no "replicas"`},
		{`{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[]}]}`, "a-0: empty replica list"},
		{`{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,2,1]}]}`, "a-0: broker 1 is listed twice"},
		{`{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,-2]}]}`, "broker id -2 is negative"},
		{`{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1]},{"topic":"a","partition":0,"replicas":[2]}]}`, "a-0 is listed twice"},
		{`{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}`, "1 log_dirs for 2 replicas"},
		{`{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1],"log_dirs":["/data/d1"]}]}`, `log dir "/data/d1": only "any"`},
		{`{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":["1"]}]}`, "not valid JSON"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			_, err := parseReassignment([]byte(tc.in))
			if !errors.Is(err, errFile) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want errFile with %q", err, tc.want)
			}
		})
	}
}
