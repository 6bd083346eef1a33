package meta

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestScenarios runs the metadata scenarios in testdata/ (rewrite the
// expected output with: go test -run TestScenarios -rewrite). Topic IDs
// come from a seeded generator, so they are stable.
//
// Commands:
//
//	create name=N [partitions=P] [rf=R]   input: one config key=value per line
//	delete name=N
//	delete-by-id name=N                   deletes by the ID the topic N has
//	add-partitions name=N total=T
//	alter-configs name=N                  input: "set key=value" / "delete key" lines
//	set-configs name=N                    input: one key=value per line
//	alter-broker                          input as for alter-configs
//	producer-ids n=N
//	collision name=N                      TopicNameCollision
//	topics                                Topics(), one per line
//	broker-configs
//	log [from=F]                          Records(F), with offsets
//	reopen                                close and open again
//	rebuild                               Rebuild, then check it changed nothing
//	register id=N                         RegisterBroker
//	decommission id=N [off]               DecommissionBroker (off: clear the flag)
//	unregister id=N                       UnregisterBroker
//	create-assigned name=N                input: one replica list per line ("1 2 3")
//	reassign                              Reassign; input: "topic partition target..." lines,
//	                                      "cancel" for a nil target, "empty" for an empty one
//	report name=N partition=P epoch=E isr=(a,b)
//	                                      ChangePartitions, the leader being the first of isr
//	complete name=N partition=P           CompleteReassignment
//	partitions name=N                     each partition's replicas, move and ISR
//	reassignments                         Reassignments()
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		fs := vfs.NewMem()
		opts := testOptions(1)
		opts.FS = fs
		s := mustOpen(t, "/meta", opts)
		defer func() { s.Close() }()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			args := map[string]string{}
			for _, a := range d.CmdArgs {
				args[a.Key] = strings.Join(a.Vals, ",")
			}
			num := func(k string, def int64) int64 {
				v, ok := args[k]
				if !ok {
					return def
				}
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					d.Fatalf(t, "%s: %v", k, err)
				}
				return n
			}
			result := func(err error) string {
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				return "ok\n"
			}
			var set map[string]string
			var del []string
			if d.Cmd != "create-assigned" && d.Cmd != "reassign" { // their input is not configs
				set, del = parseChanges(t, d)
			}
			switch d.Cmd {
			case "create":
				tp, err := s.CreateTopic(args["name"], int32(num("partitions", 1)), int16(num("rf", 1)), set)
				if err != nil {
					return result(err)
				}
				return tp.record().String() + "\n"
			case "delete":
				_, err := s.DeleteTopic(args["name"])
				return result(err)
			case "delete-by-id":
				tp, _ := s.Topic(args["name"])
				_, err := s.DeleteTopicByID(tp.ID)
				return result(err)
			case "add-partitions":
				return result(s.AddPartitions(args["name"], int32(num("total", 0))))
			case "alter-configs":
				return result(s.AlterTopicConfigs(args["name"], set, del))
			case "set-configs":
				return result(s.SetTopicConfigs(args["name"], set))
			case "alter-broker":
				return result(s.AlterBrokerConfigs(set, del))
			case "producer-ids":
				first, err := s.AllocateProducerIDs(num("n", 0))
				if err != nil {
					return result(err)
				}
				return fmt.Sprintf("first=%d\n", first)
			case "collision":
				other, ok := s.TopicNameCollision(args["name"])
				return fmt.Sprintf("%q %v\n", other, ok)
			case "topics":
				var sb strings.Builder
				for _, tp := range s.Topics() {
					sb.WriteString(tp.record().String() + "\n")
				}
				return sb.String()
			case "broker-configs":
				return formatMap(s.BrokerConfigs()) + "\n"
			case "log":
				from := uint64(num("from", 0))
				recs, err := s.Records(from)
				if err != nil {
					return result(err)
				}
				var sb strings.Builder
				for i, r := range recs {
					fmt.Fprintf(&sb, "%d %v\n", from+uint64(i), r)
				}
				fmt.Fprintf(&sb, "next %d\n", s.Offset())
				return sb.String()
			case "register":
				id := int32(num("id", 0))
				_, err := s.RegisterBroker(BrokerRegistered{NodeID: id, Listeners: listeners(9092 + id)})
				return result(err)
			case "decommission":
				return result(s.DecommissionBroker(int32(num("id", 0)), !d.HasArg("off")))
			case "unregister":
				return result(s.UnregisterBroker(int32(num("id", 0))))
			case "create-assigned":
				var a [][]int32
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					a = append(a, parseIDs(t, d, strings.Fields(line)))
				}
				ts, errs, err := s.CreateTopics([]TopicSpec{{Name: args["name"], Assignments: a}})
				if err = errors.Join(err, errs[0]); err != nil {
					return result(err)
				}
				return ts[0].record().String() + "\n"
			case "reassign":
				var reqs []ReassignRequest
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					f := strings.Fields(line)
					tp, _ := s.Topic(f[0])
					rq := ReassignRequest{TopicID: tp.ID, Partition: parseIDs(t, d, f[1:2])[0]}
					switch {
					case len(f) == 3 && f[2] == "empty":
						rq.Target = []int32{}
					case len(f) != 3 || f[2] != "cancel":
						rq.Target = parseIDs(t, d, f[2:])
					}
					reqs = append(reqs, rq)
				}
				errs, err := s.Reassign(reqs)
				if err != nil {
					return result(err)
				}
				var sb strings.Builder
				for _, e := range errs {
					sb.WriteString(result(e))
				}
				return sb.String()
			case "report":
				tp, _ := s.Topic(args["name"])
				isr := parseIDs(t, d, strings.Split(args["isr"], ","))
				errs, err := s.ChangePartitions([]PartitionChanged{{TopicID: tp.ID, Partition: int32(num("partition", 0)),
					Leader: isr[0], LeaderEpoch: int32(num("epoch", 0)), ISR: isr}})
				if err == nil {
					err = errs[0]
				}
				return result(err)
			case "complete":
				tp, _ := s.Topic(args["name"])
				done, err := s.CompleteReassignment(tp.ID, int32(num("partition", 0)))
				if err != nil {
					return result(err)
				}
				return fmt.Sprintf("done=%v\n", done)
			case "partitions":
				tp, ok := s.Topic(args["name"])
				if !ok {
					return "no topic\n"
				}
				var sb strings.Builder
				for p := range tp.Partitions {
					adding, removing, ok := tp.Reassigning(p)
					fmt.Fprintf(&sb, "%d: replicas=%v initial=%v", p, tp.Assignments[p], tp.InitialReplicas(p))
					if ok {
						fmt.Fprintf(&sb, " adding=%v removing=%v target=%v done=%v", adding, removing, tp.TargetReplicas(p), tp.ReassignmentDone(p))
					}
					fmt.Fprintf(&sb, " isr=%v\n", tp.Leaders[p].ISR)
				}
				return sb.String()
			case "reassignments":
				var sb strings.Builder
				for _, r := range s.Reassignments() {
					fmt.Fprintf(&sb, "%s-%d replicas=%v adding=%v removing=%v\n", r.Topic, r.Partition, r.Replicas, r.Adding, r.Removing)
				}
				if sb.Len() == 0 {
					return "none\n"
				}
				return sb.String()
			case "reopen":
				s = reopen(t, s, "/meta")
				return "ok\n"
			case "rebuild":
				before := dumpState(t, s)
				if err := s.Rebuild(); err != nil {
					return result(err)
				}
				if after := dumpState(t, s); after != before {
					d.Fatalf(t, "Rebuild changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
				}
				checkConsistent(t, s)
				return "ok\n"
			}
			d.Fatalf(t, "unknown command %s", d.Cmd)
			return ""
		})
	})
}

// parseChanges reads config changes from the input: "set k=v" and
// "delete k" lines, or bare "k=v" lines (sets).
func parseChanges(t *testing.T, d *datadriven.TestData) (set map[string]string, del []string) {
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if k, ok := strings.CutPrefix(line, "delete "); ok {
			del = append(del, k)
			continue
		}
		line = strings.TrimPrefix(line, "set ")
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			d.Fatalf(t, "bad config line %q", line)
		}
		if set == nil {
			set = map[string]string{}
		}
		set[k] = v
	}
	return set, del
}

// parseIDs parses broker ids or partition numbers.
func parseIDs(t *testing.T, d *datadriven.TestData, fields []string) []int32 {
	ids := make([]int32, 0, len(fields))
	for _, f := range fields {
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			d.Fatalf(t, "%q: %v", f, err)
		}
		ids = append(ids, int32(n))
	}
	return ids
}
