// Package segment is Sluice's partition log: Kafka v2 record batches kept in
// segment files, exactly as producers sent them.
//
// # Layout
//
// A partition log is a folder (the broker names it <log.dirs>/<topic>-<partition>,
// as Kafka does) holding, per segment, three files named by the segment's
// base offset zero-padded to 20 digits (see MakeFileName):
//
//	00000000000000000000.log        record batches, back to back
//	00000000000000000000.index      sparse offset index (package index)
//	00000000000000000000.timeindex  time index (package index)
//	00000000000000004096.log        the next segment starts at offset 4096
//	...
//	log.checkpoint                  log start offset, recovery point, clean-shutdown flag
//
// A .log file is nothing but whole record batches (magic 2; see package
// batch for the byte layout). The log writes a batch's bytes as received;
// it only sets the baseOffset field (not covered by the CRC), and when asked
// the partitionLeaderEpoch field (not covered either) and, for
// LogAppendTime, the max timestamp and timestamp-type bit (then it
// recomputes the CRC). Records are never decoded and re-encoded on append.
//
// # Append and read
//
// Append validates the batch (package batch: magic, length, CRC, record
// count, offset deltas) before taking the log's lock, then stamps the base
// offset and writes the batch with one positional write at the end of the
// active segment. Offsets are a pure function of the log prefix: a batch's
// base offset is the offset after the batch before it, so replicas that
// write the same batches in the same order agree on offsets (the segment log
// is the raft log; see DESIGN.md). Index entries are added every
// index.interval.bytes and reach their files on Sync, roll or close.
//
// Read returns whole batches as file ranges (for sendfile) from the batch
// that holds the requested offset, within a byte budget but always at least
// one batch (KIP-74), and never past an upper bound (the high watermark).
//
// # Durability
//
// Sync is a group commit: one fsync of the active segment covers every
// append before it, and concurrent callers share it. flush.messages and
// flush.ms call Sync by count and by age. A roll seals the old segment
// (its time index gets the segment's max timestamp, both indexes are
// trimmed) and a background flusher syncs it, then advances the recovery
// point in log.checkpoint: every segment below the recovery point is synced
// with its indexes.
//
// # Recovery
//
// See Open. The invariant: after any crash, the log is a contiguous prefix
// of what was appended that contains everything synced, and no torn or
// corrupt batch is ever served.
//
// # Retention
//
// DeleteOldSegments (run by a Sweeper every retention.check.interval.ms)
// deletes whole closed segments by retention.ms and retention.bytes, never
// the active one. DeleteRecordsBefore moves the log start offset inside a
// segment and persists it. Deleted segments are renamed ".deleted" and
// removed file.delete.delay.ms later, so reads already handed out stay valid.
//
// # Concurrency
//
// One RWMutex guards the segment list and the active segment's summary:
// appends, rolls, truncations and retention take it exclusively; reads,
// timestamp lookups and Sync's snapshot take it shared. Sync's fsyncs run
// outside it (under syncMu), so appends continue during an fsync. Lock
// order: syncMu, then ckptMu, then mu.
//
// All file IO goes through vfs.FS.
package segment
