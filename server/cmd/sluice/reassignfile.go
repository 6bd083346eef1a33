package main

// The reassignment file is Kafka's JSON format, the one
// kafka-reassign-partitions.sh reads (--reassignment-json-file) and prints
// (--generate), so files pass between the two tools:
//
//	{"version":1,"partitions":[
//	{"topic":"a","partition":0,"replicas":[2,3,4],"log_dirs":["any","any","any"]}
//	]}
//
// version is 1 (Kafka's only version; a file without it is read as 1).
// replicas lists the brokers in order, the first being the preferred
// leader. log_dirs is optional; when present it has one entry per
// replica. Only "any" is accepted: moving a replica between one broker's
// log directories (Kafka's tool does it with AlterReplicaLogDirs) is not
// something this tool does. Fields Kafka does not define are ignored, as
// Kafka's parser ignores them.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
)

// errFile marks a reassignment file that cannot be used.
var errFile = errors.New("reassignment file")

// reassignFileVersion is the only version of Kafka's format.
const reassignFileVersion = 1

// anyLogDir is log_dirs' "let the broker choose".
const anyLogDir = "any"

// tp names a partition.
type tp struct {
	Topic     string
	Partition int32
}

func (p tp) String() string { return p.Topic + "-" + strconv.Itoa(int(p.Partition)) }

// assignment is one partition's replicas, first the preferred leader.
type assignment struct {
	Topic     string
	Partition int32
	Replicas  []int32
}

func (a assignment) tp() tp { return tp{a.Topic, a.Partition} }

type fileJSON struct {
	Version    *int         `json:"version"`
	Partitions *[]entryJSON `json:"partitions"`
}

type entryJSON struct {
	Topic     *string  `json:"topic"`
	Partition *int32   `json:"partition"`
	Replicas  *[]int32 `json:"replicas"`
	LogDirs   []string `json:"log_dirs"`
}

// parseReassignment reads Kafka's reassignment JSON and checks it as
// Kafka's tool does: a known version, at least one partition, each
// partition once, each with a non-empty list of distinct brokers.
func parseReassignment(data []byte) ([]assignment, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%w: not valid JSON: %v", errFile, err)
	}
	if f.Version != nil && *f.Version != reassignFileVersion {
		return nil, fmt.Errorf("%w: version %d is not supported (Kafka's format is version %d)", errFile, *f.Version, reassignFileVersion)
	}
	if f.Partitions == nil || len(*f.Partitions) == 0 {
		return nil, fmt.Errorf("%w: no partitions (want {\"version\":1,\"partitions\":[{\"topic\":...,\"partition\":...,\"replicas\":[...]}]})", errFile)
	}
	var out []assignment
	seen := make(map[tp]bool)
	for i, e := range *f.Partitions {
		at := fmt.Sprintf("partitions[%d]", i)
		switch {
		case e.Topic == nil || *e.Topic == "":
			return nil, fmt.Errorf("%w: %s: no \"topic\"", errFile, at)
		case e.Partition == nil:
			return nil, fmt.Errorf("%w: %s (topic %s): no \"partition\"", errFile, at, *e.Topic)
		case *e.Partition < 0:
			return nil, fmt.Errorf("%w: %s: partition %d is negative", errFile, at, *e.Partition)
		}
		p := tp{*e.Topic, *e.Partition}
		if e.Replicas == nil {
			return nil, fmt.Errorf("%w: %s (%s): no \"replicas\"", errFile, at, p)
		}
		if len(*e.Replicas) == 0 {
			return nil, fmt.Errorf("%w: %s: empty replica list (to stop a reassignment, use sluice reassign cancel)", errFile, p)
		}
		if seen[p] {
			return nil, fmt.Errorf("%w: %s is listed twice", errFile, p)
		}
		seen[p] = true
		replicas := slices.Clone(*e.Replicas)
		dup := make(map[int32]bool)
		for _, b := range replicas {
			if b < 0 {
				return nil, fmt.Errorf("%w: %s: broker id %d is negative", errFile, p, b)
			}
			if dup[b] {
				return nil, fmt.Errorf("%w: %s: broker %d is listed twice in its replicas", errFile, p, b)
			}
			dup[b] = true
		}
		if e.LogDirs != nil {
			if len(e.LogDirs) != len(replicas) {
				return nil, fmt.Errorf("%w: %s: %d log_dirs for %d replicas (want one each, or no log_dirs)", errFile, p, len(e.LogDirs), len(replicas))
			}
			for _, d := range e.LogDirs {
				if d != anyLogDir {
					return nil, fmt.Errorf("%w: %s: log dir %q: only \"any\" is supported (this tool does not move replicas between a broker's log directories)", errFile, p, d)
				}
			}
		}
		out = append(out, assignment{Topic: p.Topic, Partition: p.Partition, Replicas: replicas})
	}
	sortAssignments(out)
	return out, nil
}

// readReassignmentFile reads and parses the file at path.
func readReassignmentFile(path string) ([]assignment, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errFile, err)
	}
	as, err := parseReassignment(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return as, nil
}

// formatReassignment writes as in Kafka's format, sorted by topic and
// partition, one partition a line, with log_dirs "any" for each replica
// (as Kafka's tool writes it).
func formatReassignment(as []assignment) []byte {
	as = slices.Clone(as)
	sortAssignments(as)
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\"version\":%d,\"partitions\":[", reassignFileVersion)
	for i, a := range as {
		if i > 0 {
			b.WriteByte(',')
		}
		topic, _ := json.Marshal(a.Topic)
		fmt.Fprintf(&b, "\n{\"topic\":%s,\"partition\":%d,\"replicas\":[%s],\"log_dirs\":[", topic, a.Partition, joinInts(a.Replicas, ","))
		for j := range a.Replicas {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"` + anyLogDir + `"`)
		}
		b.WriteString("]}")
	}
	b.WriteString("\n]}\n")
	return b.Bytes()
}

func sortAssignments(as []assignment) {
	sort.Slice(as, func(i, j int) bool {
		if as[i].Topic != as[j].Topic {
			return as[i].Topic < as[j].Topic
		}
		return as[i].Partition < as[j].Partition
	})
}

// joinInts prints ids separated by sep ("" for none).
func joinInts(ids []int32, sep string) string {
	var b bytes.Buffer
	for i, id := range ids {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(strconv.Itoa(int(id)))
	}
	return b.String()
}
