// Package clustertest runs a local multi-process Sluice cluster under
// faults and checks what its clients saw.
//
// The package is all tests. Their histories are checked by tools/chaos's
// checker (chaos.Check), the one set of anomaly checks of the chaos
// runner and these scenarios: the workload records its operations in a
// chaos.Recorder as the chaos runner's queue workload does (OpSend,
// OpPoll, OpAssign, OpFetchOffsets), and Finish adds the final read,
// each partition's log start offset, when the fault healed
// (History.CommitGroup: the group's committed offsets must move after
// it) and the workload's value prefix (History.Unique: the scenarios'
// probe records may repeat). check_test.go runs the checker on
// synthetic workload histories. The harness is in the test files:
//
//   - The cluster is tools/localcluster's (shared with tools/chaos and
//     bench): it builds the sluice binary once (in server/, so it works
//     with or without go.work) and starts every broker from one locked OS
//     thread with Pdeathsig (tools/procs), so even a test binary killed
//     by -timeout takes its brokers with it; TestMain (main_test.go)
//     fails the run when a process outlived its test.
//   - cluster_test.go is the test's side of the cluster (failures are
//     t.Fatal, every wait bounded by the test's context): N voters (1, 3 or 5) and optional
//     broker-only nodes (process.roles=broker, ids after the voters) on
//     free loopback ports, each with its own controller.quorum.voters list
//     that names every other voter through a tools/faultproxy proxy (the
//     proxy "i->j" is where node i reaches voter j; the others reach a
//     broker-only node directly, so a cluster with one cannot Isolate), a
//     data dir under t.TempDir() and a log file whose tail is printed when
//     the test fails; Kill, Start, Stop (Terminate + WaitExit), Pause,
//     Resume, Isolate, Heal; queries that poll with deadlines (Leader,
//     LeaderFrom a given node, Controller from DescribeCluster,
//     WaitWritable, WaitISR, WaitNotLeader, start and end offsets, a
//     replica's own end offset), each Metadata asked of a broker
//     (localcluster.FreshMetadata), never of kadm's cache.
//   - moves_harness_test.go adds explicit assignments, reassignments,
//     a watch of ListPartitionReassignments, replica lists, ISRs and
//     preferred leaders as every running node's Metadata shows them, and
//     the partition folders in a node's log dir.
//   - workload_test.go is an idempotent acks=all producer writing unique
//     values "p0-<seq>" round-robin over the partitions and a consumer
//     group member, recorded as a chaos history; Finish stops them, reads
//     the topic with a fresh consumer and with kcat, and checks the
//     history (chaos.Check; on anomalies the test fails with chaos's text
//     report).
//   - harness_test.go runs the workload and the checker against one
//     standalone node (the harness's own process tests are
//     tools/localcluster's).
//   - minisr_test.go: acks=all against min.insync.replicas with
//     followers paused (no write acknowledged while they are, writes
//     again once resumed), printed as "MINISR ..." lines;
//   - scenarios_test.go holds the fault scenarios on three nodes;
//     moves_test.go the partition-moving ones (reassignment, cancel,
//     decommission, a controller killed mid-move, preferred leader
//     elections and the automatic rebalance), with a broker-only node 4
//     where a move needs a fourth broker.
//
// The scenarios run with the package's tests (./test.sh runs them; go test
// -short skips them):
//
//	cd tools && go test -count=1 -v -run 'Scenario|Move|Rebalance|Elect' ./clustertest
//
// They run in parallel (go test's -parallel, GOMAXPROCS by default;
// test.sh runs four at a time; -parallel 1 runs them one by one), but
// for two of three down, which runs alone first (needCluster). Each is bounded (90 s; the rolling
// restart, two of three down, the retention catch-up and the two
// multi-step move scenarios 180 s) and
// prints its times as "FAILOVER <what> ms=<n> ...", "MOVE <what> ms=<n>
// ...", "REBALANCE ms=<n> ..." and "ELECT ms=<n> ...".
// What they assume of the cluster, beyond Kafka's protocol: the KRaft
// keys of DESIGN.md's plan (process.roles, a CONTROLLER listener,
// controller.quorum.voters, broker.heartbeat.interval.ms,
// broker.session.timeout.ms); that all inter-broker traffic to a voter
// goes to its voters address (so the proxies can cut it); DescribeCluster's
// ControllerID names the active controller; and a ListOffsets with
// ReplicaID -2 (Kafka's debugging replica id) is answered by a follower
// from its own log (the retention scenario compares a follower's log end
// offset with its leader's that way).
package clustertest
