// Package chaos is Sluice's Jepsen-style fault runner: it starts a local
// cluster of broker processes, runs client workloads against it while a
// nemesis injects faults on a schedule drawn from a seed, heals
// everything, waits for recovery, reads everything back and checks the
// history with the anomaly checks of jepsen.tests.kafka (Jepsen's Kafka
// and Redpanda analyses) plus porcupine linearizability checks.
// tools/cmd/sluice-chaos is its command; run_test.go (the short
// schedule of CI) runs it from `go test`.
//
// # A run (runner.go)
//
//  1. StartCluster (cluster.go; the cluster is tools/localcluster's, shared
//     with tools/clustertest and bench): 3 or 5 nodes, each a broker and a
//     controller voter on free loopback ports, each with its own data
//     folder, log file and fault-control file in the run's folder. Every
//     node reaches every other node's controller listener (raft,
//     controller and inter-broker traffic) through a tools/faultproxy
//     proxy: the proxy "i->j" is where node i reaches node j, so any
//     directed link can be cut (blackhole or reset). Clients reach every
//     node directly, so a client can talk to a node on the minority side.
//     Broker processes are started from one locked OS thread with
//     Pdeathsig, so a killed runner takes its brokers with it.
//  2. Topics (replication factor 3, min.insync.replicas 2) and the
//     workloads (workload_*.go), which record every operation in a
//     Recorder (recorder.go): invoke and completion times, outcome
//     (ok, fail, info) and what was seen.
//     - queue: idempotent acks=all producers sending unique values to
//     keyed and unkeyed partitions; a consumer group (classic and
//     KIP-848 members, joining and leaving) polling and committing;
//     its committed offsets and the partitions' high watermarks (Fetch,
//     ListOffsets) read back over the run, for the stale-read check.
//     - log: per-partition appends and whole-log reads, checked for
//     linearizability.
//     - offsets: OffsetCommit and OffsetFetch of a group without members
//     as registers, checked for linearizability.
//     - txn (workload_txn.go; not in the default set): transactional
//     producers, each with its own transactional.id, committing about
//     three transactions in four and aborting the rest, each a handful
//     of records over the partitions; read_committed readers polling
//     throughout; consume-transform-produce transformers in a consumer
//     group committing their offsets in their transactions. A producer
//     that got an error is replaced by a new one (InitProducerId fences
//     the old epoch).
//  3. The nemesis (nemesis.go) injects faults for the fault phase, one at
//     a time (a partition move overlaps the next fault), each held a few
//     seconds and healed, with quiet gaps: SIGKILL of a leader, a follower
//     or the active controller; SIGSTOP past the session and election
//     timeouts; network partitions (one node isolated, minority/majority,
//     a bridge); a slow or failing disk and a wall-clock jump through the
//     fault-control file of a broker built with -tags faults
//     (server/faultinject); a rolling restart (SIGTERM, restart, wait);
//     a reassignment to another replica set and back; and move-isolated,
//     three steps on one partition: a reassignment away and back while
//     one of its replicas is isolated, a follower killed, a slow disk;
//     and, with the txn workload, SIGKILL, SIGSTOP or isolation of the
//     transaction coordinator of one of its transactional.ids.
//  4. Heal: every fault ends; then liveness: every partition must accept
//     an acks=all write within a bound (these probes are operations of the
//     history too); the workloads run on for the recovery period, stop,
//     and a fresh consumer reads every partition whole (the txn topic
//     with read_committed, once every transaction in it is decided).
//  5. Check (check.go, check_log.go, check_stale.go, check_txn.go, check_minisr.go:
//     which uses the faults' stopped nodes and network sides and the
//     topics' min.insync.replicas the history records) and the reports (report.go,
//     report_html.go): a verdict line, report.txt with every anomaly and
//     the records involved, report.html with the fault timeline,
//     throughput and latency, and porcupine's visualisations;
//     history.json so that a history can be checked again without a
//     cluster (sluice-chaos --recheck). tools/clustertest checks its
//     scenarios' histories with the same Check (it records its workload
//     with a Recorder and an Assignment).
//
// # Goroutines
//
// The run's own goroutine drives the phases and the nemesis (faults are
// applied one after another, never concurrently with each other). Each
// workload runs its client goroutines until Stop; the Recorder is shared
// by all and guarded by its mutex. Cluster guards its nodes' process
// state with one mutex; each started process has one goroutine waiting
// for its exit. Faultproxy proxies run their own goroutines.
//
// # Determinism
//
// The seed fixes every choice the runner makes: the sequence of fault
// kinds, each fault's role of target (leader, follower, any node), its
// durations, delays and offsets, the sides of a partition, the
// workloads' keys, partitions and consumer churn. It cannot fix what the
// cluster does (which node leads a partition when a fault looks for the
// leader, how the OS schedules processes), so two runs of one seed inject
// the same schedule of kinds and roles, not the same history.
package chaos
