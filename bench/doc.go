// Package bench holds Sluice's storage and end-to-end benchmarks: the segment
// log's append, read and lookup paths on the real file system, and the
// broker's produce and read-back over TCP, each measured next to a peer in
// the same run so that the figures are ratios, not absolute times (see
// README.md).
//
//   - BenchmarkAppend: 16-record batches of 1 KiB incompressible records
//     appended to a segment.Log, with no fsync ("pagecache") and with a
//     group-commit Sync every MiB ("fsync-1MiB"). Each reports the bytes a
//     plain os.File gets through with the same writes and fsyncs, interleaved
//     with the log's, as plain-MB/s, and ratio = log MB/s / plain MB/s.
//   - BenchmarkRead: sequential 1 MiB reads of a pre-written log, copied into
//     a reused buffer (with a plain pread of as many bytes as the peer), and
//     resolved to file ranges only (the lookup overhead a sendfile fetch pays).
//   - BenchmarkOffsetLookup: finding the batch holding a random offset in a
//     segment whose offset index is full (10 MiB, 1,310,720 entries), through
//     Log.Read with a 1-byte budget (KIP-74: one batch) and through
//     index.OffsetIndex.Lookup alone.
//   - BenchmarkTimestampLookup: Log.OffsetForTimestamp for random timestamps
//     on the same log, whose timestamps increase, and index.TimeIndex.Lookup
//     alone.
//   - BenchmarkProduceE2E: a franz-go producer (acks=all, linger 1 ms, no
//     compression) sends 1 KiB records to a 16-partition topic on a Sluice
//     broker started in the process (fsync before the ack), then a consumer
//     reads them all back; kfake with persistence and an fsync per batch
//     gets the same records, and a plain file the same bytes with an
//     fdatasync every MiB: produce-ratio, read-ratio (against kfake) and
//     disk-ratio (against the file).
//   - BenchmarkClean: one Log.Clean of a freshly built 64 MiB log of keyed
//     1 KiB records (10,000 keys, 8 MiB segments), uncompressed and zstd,
//     next to a peer that reads the same files and writes and fsyncs as
//     many bytes as the clean kept: ratio.
//   - BenchmarkOffsetCommitE2E: 16-partition OffsetCommit requests to
//     Sluice's group coordinator over TCP, next to kfake, with and without
//     fsync, from one group and from eight at once: commits/s and ratio.
//   - BenchmarkTxnProduce: a franz-go transactional producer sends
//     transactions of 100 1 KiB records to a 4-partition topic on a Sluice
//     broker started in the process, each committed (EndTransaction
//     TryCommit), next to an idempotent producer sending the same records
//     in the same 100-record units to another topic of the same broker, in
//     alternating rounds: idempotent-MB/s, ratio (goal >= 0.7), txns/s.
//   - BenchmarkTLSProduce: the same producer as BenchmarkProduceE2E over
//     TLS to an SSL listener of an in-process broker, next to a plaintext
//     producer to the same broker and topic, in alternating 8 MiB rounds:
//     plain-MB/s, tls-ratio (goal >= 0.7).
//   - BenchmarkRaftIdle: 1,000 idle RF=3 raft groups on three replica.Hosts
//     in the process over loopback TCP, ticking every 100 ms: once they
//     settle, the process's CPU as a percentage of one core (cpu-%) and the
//     heap per group replica (B/replica), quiesced next to ticking
//     (DisableQuiescence) in the same run: cpu-ratio.
//   - BenchmarkRaftFailover: the time from stopping the host that leads 100
//     quiesced groups to new leaders for all of them, with the host's
//     defaults (ms-to-leaders).
//   - BenchmarkRaftProduce: replicated partitions (replica.Partition on a
//     raft group) on three replica.Hosts in the process over loopback TCP,
//     16 partitions, 16 x 1 KiB records per batch, acks=all, four
//     producers per partition with a batch in flight each, on real files
//     with the Pebble state store: rf=3 next to an rf=1 peer (one-voter
//     groups, the same code path) in alternating rounds (ratio,
//     stored-ratio), and the bytes written to disk per byte produced per
//     replica counted at the file systems (wa/replica, wa+state/replica);
//     rf=1 (one-voter groups, a single node's path) on its own.
//   - BenchmarkRaftIdlePartitions: 1,000 idle RF=3 replicated partitions
//     (3,000 segment logs, in memory) on three hosts: once quiesced, the
//     process's CPU (cpu-%) and the heap per partition replica
//     (B/replica).
//   - BenchmarkRaftFailoverProduce: the time from stopping the host that
//     leads 16 replicated partitions to a new leader acknowledging an
//     acks=all produce for each of them (ms-to-writes, ms-to-first).
//   - BenchmarkClusterProduce: three sluice processes (the binary built
//     once) on loopback, each a broker and a controller voter; franz-go
//     producers (acks=all, idempotent) send 1 KiB records to a 16-partition
//     RF=1 topic (rf=1), then to a 16-partition RF=3 topic with
//     min.insync.replicas=2 (rf=3): MB/s, p99-ms (Produce call to
//     promise) and rf3/rf1.
//   - BenchmarkClusterProduceLatency20MBs: an open-loop producer at a fixed
//     20 MiB/s (20,480 records of 1 KiB a second) into the RF=3 topic of
//     such a cluster: p50-ms, p99-ms and p99.9-ms counted from each
//     record's due time, achieved-MB/s and acked-%.
//
// The lookups that read from the file are measured next to one plain pread
// of a batch header: pread-ns is its time and preads/op the lookup's time in
// those units.
//
// The package has no non-test code; the benchmarks live in its _test files.
// Their fixtures are built once per test binary and shared by sub-benchmarks
// and -count repetitions, so a -benchtime 1x smoke run (as CI does) takes a
// few seconds.
package bench
