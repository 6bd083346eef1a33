// Package perf is `sluice perf`: load generators for any Kafka-compatible
// cluster, in the manner of Kafka's kafka-producer-perf-test.sh
// (ProducerPerformance), kafka-consumer-perf-test.sh (ConsumerPerformance)
// and EndToEndLatency. The clients are franz-go's kgo.
//
//	sluice perf produce --topic T --num-records N --record-size BYTES [--throughput R]
//	sluice perf consume --topic T --num-records N [--group G] [--from earliest|latest]
//	sluice perf e2e     --topic T --num-records N [--throughput R]
//
// Each reports records/s, MB/s (MiB, 1024*1024 bytes, as Kafka's tools)
// and a latency distribution (mean, p50, p95, p99, p99.9, max) kept in an
// HDR histogram (hdrhistogram-go, microsecond resolution, 3 significant
// digits), as one line in the style of ProducerPerformance's summary, or
// with --json as one JSON object (Result). While running, a progress line
// is rewritten on stderr every second when stderr is a terminal.
//
// Latency. produce has two modes. At max rate (--throughput -1 or 0, as
// Kafka's -1) a record's latency runs from its Produce call to its
// acknowledgement, as ProducerPerformance measures it. At a fixed rate R
// (open loop) record i is due at start + i/R and its latency runs from
// that due time, not from when it was actually handed to the client: a
// producer that stalls for a second does not hide the second from the
// records that queued behind it (coordinated omission, Gil Tene's term).
// consume measures from the record's timestamp (CreateTime, millisecond
// precision) to its receipt, which means something only when the
// producers' clocks are this machine's. e2e produces and consumes in one
// process and measures from send (or the due time) to receipt.
//
// Exit: the command returns an error, so the binary exits 1, when any
// record failed (the first failure is printed with Kafka's error name),
// when consume or e2e ran out of time before their records arrived, and
// when the topic does not exist (unless --create). A bad command line is a
// *UsageError.
package perf
