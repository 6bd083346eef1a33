package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	pollInterval = 10 * time.Millisecond
}

// sluice runs the command line and returns its exit code and output.
func sluice(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	t.Logf("sluice %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	return code, stdout.String(), stderr.String()
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func wantContains(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s does not contain %q:\n%s", what, w, got)
		}
	}
}

func TestReassignExecuteThrottleVerify(t *testing.T) {
	f, bs := newFakeCluster(t, 1, 2, 3, 4)
	f.addTopic("a", []int32{1, 2, 3}, []int32{1, 2, 3})
	file := writeFile(t, `{"version":1,"partitions":[
{"topic":"a","partition":0,"replicas":[2,3,4]},
{"topic":"a","partition":1,"replicas":[1,2,3]}]}`)

	code, out, _ := sluice(t, "reassign", "execute", "--bootstrap-server", bs, "--file", file, "--throttle", "1000")
	if code != 0 {
		t.Fatalf("execute: exit %d", code)
	}
	wantContains(t, "execute", out, "Current partition replica assignment",
		`{"topic":"a","partition":0,"replicas":[1,2,3],"log_dirs":["any","any","any"]}`,
		"a-0: started: 1,2,3 -> 2,3,4", "a-1: accepted (replicas 1,2,3 unchanged)")
	// Kafka's throttle: the moving partition's current replicas lead, its
	// new one follows; a-1 does not move, so it is not throttled.
	if got := f.config("topic:a"); got[leaderThrottledReplicas] != "0:1,0:2,0:3" || got[followerThrottledReplicas] != "0:4" {
		t.Errorf("topic a configs %v", got)
	}
	for _, b := range []string{"1", "2", "3", "4"} {
		if got := f.config("broker:" + b); got[leaderThrottledRate] != "1000" || got[followerThrottledRate] != "1000" {
			t.Errorf("broker %s configs %v", b, got)
		}
	}
	if got := f.part(tp{"a", 0}).replicas; !slices.Equal(got, []int32{2, 3, 4, 1}) {
		t.Errorf("a-0 replicas while moving %v", got)
	}

	code, out, _ = sluice(t, "reassign", "list", "--bootstrap-server", bs)
	if code != 0 {
		t.Fatalf("list: exit %d", code)
	}
	wantContains(t, "list", out, "TOPIC", "ADDING", "a      0          2,3,4,1   4       1")

	code, out, _ = sluice(t, "reassign", "verify", "--bootstrap-server", bs, "--file", file)
	if code == 0 {
		t.Errorf("verify of a move in progress: exit 0")
	}
	wantContains(t, "verify", out, "a-0: in progress: replicas 2,3,4,1, adding 4, removing 1", "a-1: complete (replicas 1,2,3)", "1 of 2 partitions are not complete")
	if got := f.config("topic:a"); got[leaderThrottledReplicas] == "" {
		t.Errorf("verify removed the throttle of a move in progress: %v", got)
	}

	f.mu.Lock()
	f.moves[tp{"a", 0}].listed = 0
	f.finishAfter = 3 // the third look sees it complete
	f.mu.Unlock()
	code, out, _ = sluice(t, "reassign", "verify", "--bootstrap-server", bs, "--file", file, "--wait", "10s")
	if code != 0 {
		t.Fatalf("verify --wait: exit %d", code)
	}
	wantContains(t, "verify --wait", out, "1 of 2 partitions complete, 1 in progress", "a-0: complete (replicas 2,3,4)", "All 2 partitions are complete.",
		"Removed the throttled replicas", "Removed the throttle rates")
	if got := f.config("topic:a"); len(got) != 0 {
		t.Errorf("topic a configs after verify %v", got)
	}
	for _, b := range []string{"1", "2", "3", "4"} {
		if got := f.config("broker:" + b); len(got) != 0 {
			t.Errorf("broker %s configs after verify %v", b, got)
		}
	}
}

func TestReassignExecuteWhileOthersMove(t *testing.T) {
	f, bs := newFakeCluster(t, 1, 2, 3, 4)
	f.addTopic("a", []int32{1, 2, 3}, []int32{1, 2, 3})
	f.startMove(tp{"a", 1}, []int32{1, 2, 4})
	file := writeFile(t, `{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[4,2,3]}]}`)

	code, _, errOut := sluice(t, "reassign", "execute", "--bootstrap-server", bs, "--file", file, "--throttle", "500")
	if code != 1 {
		t.Errorf("execute while a reassignment runs: exit %d, want 1", code)
	}
	wantContains(t, "stderr", errOut, "1 partition reassignment is in progress", "--additional", "nothing was changed")
	if n := len(f.requestsOf(kmsg.AlterPartitionAssignments.Int16())); n != 0 {
		t.Errorf("%d AlterPartitionReassignments sent", n)
	}

	code, _, _ = sluice(t, "reassign", "execute", "--bootstrap-server", bs, "--file", file, "--throttle", "500", "--additional")
	if code != 0 {
		t.Fatalf("execute --additional: exit %d", code)
	}
	// Both moves are throttled: the topic config is replaced, not merged.
	if got := f.config("topic:a"); got[leaderThrottledReplicas] != "0:1,0:2,0:3,1:1,1:2,1:3" || got[followerThrottledReplicas] != "0:4,1:4" {
		t.Errorf("topic a configs %v", got)
	}
}

func TestReassignExecuteFailures(t *testing.T) {
	f, bs := newFakeCluster(t, 1, 2, 3)
	f.addTopic("a", []int32{1, 2}, []int32{2, 3})
	f.mu.Lock()
	f.alterErr[tp{"a", 1}] = kerr.ReassignmentInProgress
	f.mu.Unlock()
	file := writeFile(t, `{"version":1,"partitions":[
{"topic":"a","partition":0,"replicas":[1,9]},
{"topic":"a","partition":1,"replicas":[3,1]}]}`)
	code, out, _ := sluice(t, "reassign", "execute", "--bootstrap-server", bs, "--file", file)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	wantContains(t, "execute", out,
		"a-0: INVALID_REPLICA_ASSIGNMENT: broker 9 is not registered",
		"a-1: REASSIGNMENT_IN_PROGRESS: injected",
		"hint (INVALID_REPLICA_ASSIGNMENT): every replica must be a registered broker",
		"hint (REASSIGNMENT_IN_PROGRESS):",
		"2 of 2 partitions failed to start")

	// A partition the cluster does not have stops everything first.
	file = writeFile(t, `{"version":1,"partitions":[{"topic":"a","partition":7,"replicas":[1,2]}]}`)
	before := len(f.requestsOf(kmsg.AlterPartitionAssignments.Int16()))
	code, _, errOut := sluice(t, "reassign", "execute", "--bootstrap-server", bs, "--file", file)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	wantContains(t, "stderr", errOut, "a-7: UNKNOWN_TOPIC_OR_PARTITION", "nothing was changed", "hint: check the topic and partition exist")
	if after := len(f.requestsOf(kmsg.AlterPartitionAssignments.Int16())); after != before {
		t.Errorf("an AlterPartitionReassignments was sent")
	}

	// A throttle on a broker the cluster does not list is refused before
	// anything is set.
	file = writeFile(t, `{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,9]}]}`)
	code, _, errOut = sluice(t, "reassign", "execute", "--bootstrap-server", bs, "--file", file, "--throttle", "10")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	wantContains(t, "stderr", errOut, "throttle: broker 9 is not in the cluster")
	if n := len(f.requestsOf(kmsg.IncrementalAlterConfigs.Int16())); n != 0 {
		t.Errorf("%d IncrementalAlterConfigs sent", n)
	}
}

func TestReassignVerifyMismatch(t *testing.T) {
	f, bs := newFakeCluster(t, 1, 2, 3, 4)
	f.addTopic("a", []int32{1, 2, 3})
	f.setConfig("topic:a", leaderThrottledReplicas, "0:1")
	file := writeFile(t, `{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[2,3,4]},{"topic":"b","partition":0,"replicas":[1]}]}`)
	code, out, _ := sluice(t, "reassign", "verify", "--bootstrap-server", bs, "--file", file)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	wantContains(t, "verify", out, "a-0: mismatch: no reassignment in progress, but the replicas are 1,2,3, not the file's 2,3,4",
		"b-0: UNKNOWN_TOPIC_OR_PARTITION", "2 of 2 partitions are not complete")
	if got := f.config("topic:a"); got[leaderThrottledReplicas] != "0:1" {
		t.Errorf("verify of an incomplete file touched the throttle: %v", got)
	}
}

func TestReassignVerifyKeepsThrottlesOthersUse(t *testing.T) {
	// a-0 is where the file wants it; b-0 is still moving (another
	// reassignment): a's throttle goes, b's stays, and so do the
	// brokers' rates.
	f, bs := newFakeCluster(t, 1, 2, 3)
	f.addTopic("a", []int32{1, 2})
	f.addTopic("b", []int32{1, 2})
	f.startMove(tp{"b", 0}, []int32{2, 3})
	for _, r := range []string{"topic:a", "topic:b"} {
		f.setConfig(r, leaderThrottledReplicas, "0:1,0:2")
	}
	f.setConfig("broker:1", leaderThrottledRate, "100")
	file := writeFile(t, `{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,2]}]}`)
	code, out, _ := sluice(t, "reassign", "verify", "--bootstrap-server", bs, "--file", file)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	wantContains(t, "verify", out, "Removed the throttled replicas", "Kept the brokers' throttle rates: 1 partition of the cluster is still moving")
	if got := f.config("topic:a"); len(got) != 0 {
		t.Errorf("topic a configs %v", got)
	}
	if got := f.config("topic:b"); got[leaderThrottledReplicas] == "" {
		t.Errorf("topic b lost its throttle")
	}
	if got := f.config("broker:1"); got[leaderThrottledRate] != "100" {
		t.Errorf("broker 1 lost its rate: %v", got)
	}
}

func TestReassignCancel(t *testing.T) {
	f, bs := newFakeCluster(t, 1, 2, 3, 4)
	f.addTopic("a", []int32{1, 2, 3}, []int32{1, 2, 3})
	f.startMove(tp{"a", 0}, []int32{2, 3, 4})
	f.startMove(tp{"a", 1}, []int32{2, 3, 4})
	f.setConfig("topic:a", followerThrottledReplicas, "0:4,1:4")
	f.setConfig("broker:4", followerThrottledRate, "100")

	code, out, _ := sluice(t, "reassign", "cancel", "--bootstrap-server", bs, "--topic", "a", "--partition", "0")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	wantContains(t, "cancel", out, "a-0: cancelled", "Kept the throttled replicas of topic a: 1 of its partitions is still moving")
	if got := f.part(tp{"a", 0}).replicas; !slices.Equal(got, []int32{1, 2, 3}) {
		t.Errorf("a-0 after cancel %v, want its original replicas", got)
	}
	if req := f.requestsOf(kmsg.AlterPartitionAssignments.Int16()); len(req) != 1 || req[0].(*kmsg.AlterPartitionAssignmentsRequest).Topics[0].Partitions[0].Replicas != nil {
		t.Errorf("cancel did not send null replicas: %+v", req)
	}

	file := writeFile(t, `{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[2,3,4]},{"topic":"a","partition":1,"replicas":[2,3,4]}]}`)
	code, out, _ = sluice(t, "reassign", "cancel", "--bootstrap-server", bs, "--file", file)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	wantContains(t, "cancel", out, "a-0: no reassignment in progress (nothing to cancel)", "a-1: cancelled", "Removed the throttled replicas", "Removed the throttle rates")
	if got := f.config("topic:a"); len(got) != 0 {
		t.Errorf("topic a configs %v", got)
	}
	if got := f.config("broker:4"); len(got) != 0 {
		t.Errorf("broker 4 configs %v", got)
	}
}

func TestReassignListEmpty(t *testing.T) {
	_, bs := newFakeCluster(t, 1)
	code, out, _ := sluice(t, "reassign", "list", "--bootstrap-server", bs)
	if code != 0 || !strings.Contains(out, "No partition reassignments in progress.") {
		t.Errorf("exit %d, output %q", code, out)
	}
}

func TestReassignPlanCommand(t *testing.T) {
	f, bs := newFakeCluster(t, 1, 2, 3, 4)
	f.addTopic("a", []int32{1, 2, 3}, []int32{2, 3, 1}, []int32{3, 1, 2}, []int32{1, 2, 3})
	out := filepath.Join(t.TempDir(), "proposal.json")
	code, stdout, _ := sluice(t, "reassign", "plan", "--bootstrap-server", bs, "--topics", "a", "--brokers", "1,2,3,4", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	wantContains(t, "plan", stdout, "Current partition replica assignment", "Proposed partition reassignment configuration",
		"copies 3 of its 12 replicas", "Replicas per broker: 1:3 2:3 3:3 4:3; preferred leaders: 1:1 2:1 3:1 4:1")
	proposal, err := readReassignmentFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, string(formatReassignment(proposal))) {
		t.Errorf("the --out file is not the proposal printed")
	}

	code, _, errOut := sluice(t, "reassign", "plan", "--bootstrap-server", bs, "--topics", "a", "--brokers", "1,2,5")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	wantContains(t, "stderr", errOut, "broker 5 is not in the cluster (its brokers: 1,2,3,4)")

	code, _, errOut = sluice(t, "reassign", "plan", "--bootstrap-server", bs, "--topics", "a,nope", "--brokers", "1,2,3")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	wantContains(t, "stderr", errOut, "topic nope: UNKNOWN_TOPIC_OR_PARTITION")

	code, _, errOut = sluice(t, "reassign", "plan", "--bootstrap-server", bs, "--topics", "a", "--brokers", "1,2")
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	wantContains(t, "stderr", errOut, "a-0 has 3 replicas, but only 2 brokers are given")
}

func TestElectLeaders(t *testing.T) {
	f, bs := newFakeCluster(t, 1, 2, 3)
	f.addTopic("a", []int32{1, 2, 3}, []int32{2, 3, 1}, []int32{3, 1, 2})
	f.mu.Lock()
	f.parts[tp{"a", 0}].leader = 2          // preferred 1 is in the ISR: elected
	f.parts[tp{"a", 2}].leader = 1          // preferred 3 is out of the ISR: fails
	f.parts[tp{"a", 2}].isr = []int32{1, 2} //
	f.mu.Unlock()

	code, out, _ := sluice(t, "elect-leaders", "--bootstrap-server", bs)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	wantContains(t, "elect-leaders", out, "a-0: elected (leader 1)", "a-1: no election needed (its preferred replica leads)",
		"a-2: PREFERRED_LEADER_NOT_AVAILABLE", "hint (PREFERRED_LEADER_NOT_AVAILABLE)", "preferred election: 1 elected, 1 not needed, 1 failed")
	reqs := f.requestsOf(kmsg.ElectLeaders.Int16())
	if r := reqs[len(reqs)-1].(*kmsg.ElectLeadersRequest); r.Topics != nil || r.ElectionType != 0 {
		t.Errorf("request for every partition: topics %v, type %d; want null, 0", r.Topics, r.ElectionType)
	}

	code, out, _ = sluice(t, "elect-leaders", "--bootstrap-server", bs, "--topic", "a", "--partition", "1")
	if code != 0 {
		t.Errorf("exit %d, want 0 (not needed is not a failure)", code)
	}
	wantContains(t, "elect-leaders", out, "a-1: no election needed", "0 elected, 1 not needed, 0 failed")

	code, _, _ = sluice(t, "elect-leaders", "--bootstrap-server", bs, "--topic", "a", "--type", "unclean")
	if code != 0 {
		t.Errorf("exit %d", code)
	}
	reqs = f.requestsOf(kmsg.ElectLeaders.Int16())
	r := reqs[len(reqs)-1].(*kmsg.ElectLeadersRequest)
	if r.ElectionType != 1 || len(r.Topics) != 1 || !slices.Equal(r.Topics[0].Partitions, []int32{0, 1, 2}) {
		t.Errorf("unclean request for topic a: type %d, topics %+v", r.ElectionType, r.Topics)
	}

	code, _, errOut := sluice(t, "elect-leaders", "--bootstrap-server", bs, "--topic", "nope")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	wantContains(t, "stderr", errOut, "topic nope: UNKNOWN_TOPIC_OR_PARTITION")
}

func TestDecommission(t *testing.T) {
	f, bs := newFakeCluster(t, 1, 2, 3, 4)
	f.addTopic("a", []int32{1, 2, 4}, []int32{4, 3, 1}, []int32{1, 2, 3})
	code, out, _ := sluice(t, "decommission", "--bootstrap-server", bs, "--broker", "4", "--wait", "10s")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	wantContains(t, "decommission", out, "broker 4: broker 4 is being decommissioned: moving its replicas of 2 partitions",
		"still named by 1 partition", "broker 4: no partition names it and it is no longer listed")
	for _, p := range []tp{{"a", 0}, {"a", 1}} {
		if got := f.part(p).replicas; slices.Contains(got, 4) {
			t.Errorf("%s still on broker 4: %v", p, got)
		}
	}

	code, _, errOut := sluice(t, "decommission", "--bootstrap-server", bs, "--broker", "9")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	wantContains(t, "stderr", errOut, "broker 9: BROKER_ID_NOT_REGISTERED: broker 9 is not registered", "hint: no broker with that id is registered")

	// A decommission that does not finish in time: --wait gives up, and
	// says where it is.
	f, bs = newFakeCluster(t, 1, 2, 3)
	f.addTopic("b", []int32{3, 1}, []int32{3, 2}, []int32{1, 3})
	code, out, _ = sluice(t, "decommission", "--bootstrap-server", bs, "--broker", "3", "--wait", "1ms")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	wantContains(t, "decommission", out, "still named by", "after 1ms")
}

func TestUnsupportedAPI(t *testing.T) {
	f, bs := newFakeCluster(t, 1, 2)
	f.mu.Lock()
	f.unsupported[kmsg.UnregisterBroker.Int16()] = true
	f.unsupported[kmsg.ListPartitionReassignments.Int16()] = true
	f.mu.Unlock()
	for _, args := range [][]string{{"decommission", "--broker", "2"}, {"reassign", "list"}} {
		code, _, errOut := sluice(t, append(args, "--bootstrap-server", bs)...)
		if code != 1 {
			t.Errorf("%v: exit %d, want 1", args, code)
		}
		wantContains(t, "stderr", errOut, "the cluster does not offer this API", "hint: its brokers do not implement this request")
	}
}

func TestUnreachableCluster(t *testing.T) {
	// A port nothing listens on: the fake's, once closed.
	f, bs := newFakeCluster(t, 1)
	f.ln.Close()
	code, _, errOut := sluice(t, "reassign", "list", "--bootstrap-server", bs, "--timeout", "2s")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	wantContains(t, "stderr", errOut, "connection refused", "hint: is a broker listening there?")
}

func TestArgumentErrors(t *testing.T) {
	file := writeFile(t, `{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1]}]}`)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"reassign"}, 2, "a command is required: plan, execute"},
		{[]string{"reassign", "move"}, 2, `unknown command "move"`},
		{[]string{"reassign", "-h"}, 0, ""},
		{[]string{"reassign", "plan"}, 2, "--topics is required"},
		{[]string{"reassign", "plan", "--topics", "a"}, 2, "--brokers is required"},
		{[]string{"reassign", "plan", "--topics", "a,", "--brokers", "1"}, 2, "empty topic name"},
		{[]string{"reassign", "plan", "--topics", "a", "--brokers", "1,x"}, 2, `--brokers: "x" is not a broker id`},
		{[]string{"reassign", "plan", "--topics", "a", "--brokers", "1,1"}, 2, "broker 1 is listed twice"},
		{[]string{"reassign", "plan", "--topics", "a", "--brokers", "1,2", "--replication-factor", "3"}, 2, "--replication-factor 3 needs 3 brokers, but --brokers lists 2"},
		{[]string{"reassign", "plan", "--topics", "a", "--brokers", "1,2", "--replication-factor", "0"}, 2, "at least 1"},
		{[]string{"reassign", "plan", "--topics", "a", "--brokers", "1", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"reassign", "plan", "--nope"}, 2, "unknown flag: --nope"},
		{[]string{"reassign", "plan", "-h"}, 0, "sluice reassign plan --topics a,b --brokers 2,3,4"},
		{[]string{"reassign", "execute"}, 2, "--file is required"},
		{[]string{"reassign", "execute", "--file", file, "--throttle", "0"}, 2, "--throttle must be a positive number"},
		{[]string{"reassign", "execute", "--file", file, "--throttle", "1MB"}, 2, `invalid argument "1MB" for "--throttle"`},
		{[]string{"reassign", "execute", "--file", filepath.Join(t.TempDir(), "missing.json")}, 1, "reassignment file: open"},
		{[]string{"reassign", "execute", "--file", file, "--bootstrap-server", "localhost"}, 2, `--bootstrap-server: "localhost" is not host:port`},
		{[]string{"reassign", "execute", "--file", file, "--bootstrap-server", "h:1,"}, 2, `"" is not host:port`},
		{[]string{"reassign", "execute", "--file", file, "--timeout", "0s"}, 2, "--timeout must be positive"},
		{[]string{"reassign", "verify"}, 2, "--file is required"},
		{[]string{"reassign", "verify", "--file", file, "--wait", "-1s"}, 2, "--wait must not be negative"},
		{[]string{"reassign", "cancel"}, 2, "give --file FILE, or --topic T --partition P"},
		{[]string{"reassign", "cancel", "--file", file, "--topic", "a"}, 2, "not both"},
		{[]string{"reassign", "cancel", "--topic", "a"}, 2, "--topic and --partition go together"},
		{[]string{"reassign", "cancel", "--partition", "1"}, 2, "--topic and --partition go together"},
		{[]string{"reassign", "cancel", "--topic", "a", "--partition", "-1"}, 2, "--topic and --partition go together"},
		{[]string{"reassign", "list", "x"}, 2, `unexpected argument "x"`},
		{[]string{"elect-leaders", "--type", "dirty"}, 2, `--type must be preferred or unclean, not "dirty"`},
		{[]string{"elect-leaders", "--partition", "1"}, 2, "--partition needs --topic"},
		{[]string{"elect-leaders", "-h"}, 0, "sluice elect-leaders [--topic T [--partition P]]"},
		{[]string{"decommission"}, 2, "--broker is required"},
		{[]string{"decommission", "--broker", "-1"}, 2, "--broker -1 is not a broker id"},
		{[]string{"decommission", "--broker", "4", "--wait", "-1s"}, 2, "--wait must not be negative"},
		{[]string{"decommission", "-h"}, 0, "sluice decommission --broker N"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := sluice(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			if !strings.Contains(stdout+stderr, tc.want) {
				t.Errorf("output does not contain %q:\n%s%s", tc.want, stdout, stderr)
			}
		})
	}
}

func TestTopLevelUsageListsCommands(t *testing.T) {
	code, stdout, _ := sluice(t, "--help")
	if code != 0 {
		t.Errorf("exit %d", code)
	}
	wantContains(t, "usage", stdout, "serve ", "dump-log ", "reassign ", "elect-leaders ", "decommission ", "completion ", "--bootstrap-server")
}
