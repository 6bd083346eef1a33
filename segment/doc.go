// Package segment is Sluice's partition log: Kafka v2 record batches kept in
// segment files, exactly as producers sent them.
//
// # Layout
//
// A partition log is a folder (the broker names it <log.dirs>/<topic>-<partition>,
// as Kafka does) holding, per segment, the files named by the segment's
// base offset zero-padded to 20 digits (see MakeFileName):
//
//	00000000000000000000.log        record batches, back to back
//	00000000000000000000.index      sparse offset index (package index)
//	00000000000000000000.timeindex  time index (package index)
//	00000000000000000000.raftindex  raft index -> position of every batch (raftindex.go)
//	00000000000000000000.txnindex   aborted transactions whose marker is here (txnindex.go; only
//	                                in segments that have one)
//	00000000000000004096.log        the next segment starts at offset 4096
//	...
//	log.checkpoint                  log start offset, recovery point, clean-shutdown flag, cleaner offset
//
// A truncation that finds readers holding the segment it cuts writes the
// kept prefix as <base>.log.trunc first (see Raft below); recovery
// removes a leftover one.
//
// The transaction index is kept, not derived, by the log: its owner adds
// an entry when it writes an abort marker and rebuilds the entries above
// its producer snapshot after a restart (see txnindex.go for its life
// cycle, recovery and durability).
//
// While a clean (log compaction, see below) runs, a segment's replacement
// exists as the same names with the suffix ".cleaned" (being written)
// and then ".swap" (complete, synced, committed); files being deleted carry
// the suffix ".deleted". These suffixes are part of the format.
//
// A follower receiving a compacted log's raft snapshot stages the
// leader's segment files as <base>.log.install, and InstallSnapshot
// commits them with snapshot.install (format in install.go), which
// recovery completes; staged files without it are removed at open.
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
// append before it, and concurrent callers share it. One caller leads
// each fsync; the others wait, and all wake when it finishes, so those it
// covered return at once and one of the rest leads the next. The append path never
// fsyncs: AppendWith counts flush.messages (as configured at each append)
// and reports AppendResult.NeedSync, and its caller calls Sync once it
// holds no lock of its own (Append, the simple wrapper, calls it itself);
// the flusher calls Sync for flush.ms. A roll seals the old segment
// (its time index gets the segment's max timestamp, both indexes are
// trimmed) and a background flusher syncs it, then advances the recovery
// point in log.checkpoint: every segment below the recovery point is synced
// with its indexes.
//
// # Recovery
//
// See Open. The invariant: after any crash, the log is a prefix of what was
// appended (less what compaction removed) that contains everything synced,
// and no torn or corrupt batch is ever served. Offsets strictly increase;
// gaps are accepted only in segments compaction may have cleaned (those
// that end at or below the recovery point, or lie below the cleaner
// offset) and, when log.checkpoint is missing or fails its checks, in
// every closed segment, up to the next segment's base offset: a lost
// checkpoint costs a full rescan, never cleaned data.
//
// Cutting is crash recovery, for data a crash can tear: the active
// segment, and after an unclean shutdown the segments from the recovery
// point on. Damage where a segment must be whole (closed cleanly, or below
// the recovery point: torn, truncated, missing, a bad length or CRC) is
// not cut: the log stops at it (DamageError) and changes nothing on disk,
// so the later segments stay; it serves the offsets below the damage and
// refuses reads past it and writes. TruncateFolder is the operator's
// deliberate cut. Spans recovery trusted without reading are CRC-checked
// by the first Read that serves them (once per Open), so even damage a
// clean open cannot see is never served.
//
// # Compaction
//
// With cleanup.policy compact (or compact,delete), Clean (run by a Cleaner)
// keeps only the latest record of each key in the closed, synced segments
// below the caller's upper bound (the high watermark), outside
// min.compaction.lag.ms; a Cleaner picks the log with the highest dirty
// ratio (dirty bytes, from the cleaner offset on, over cleanable bytes)
// above min.cleanable.dirty.ratio, or one max.compaction.lag.ms forces;
// a log whose clean failed (not merely aborted) is skipped as uncleanable
// for 10 × log.cleaner.backoff.ms, doubling after each failed retry up to
// an hour, so it cannot starve the others. A clean's offset map (key to
// latest offset) is bounded by Options.CleanerDedupeBufferBytes (Kafka's
// log.cleaner.dedupe.buffer.size, 128 MiB): it maps whole dirty segments
// while they fit (at least one), and the clean, and the cleaner offset,
// stop at the end of the last one mapped.
// Each rewritten batch keeps its base offset, lastOffsetDelta, producer
// fields, leader epoch and attributes; its surviving records keep their
// offsets and are compressed again with the batch's codec (batch.Rebuild).
// A batch with no record left goes, except a producer's last batch, which
// stays as an empty header (Kafka's RETAIN_EMPTY) so producer state rebuilt
// from headers stays right; so does the last batch of each run of
// segments cleaned into one (see below), which also lets a read from
// inside the gap before an empty active segment get a batch and move on.
// Records without a key are kept.
//
// Transactions (Kafka's LogCleaner and CleanedTransactionMetadata): the
// caller's upper bound is the last stable offset, so every transaction in
// the cleaned range is decided. Records of aborted transactions are
// removed and add no key to the offset map, so they never supersede a
// committed record. A transaction marker (a control batch) stays whole
// while the clean reads a data batch of its transaction (any batch of the
// producer since its previous marker, an empty header or one dropped in
// this very clean included); the first clean that reads none gives it the
// delete horizon, as a tombstone's batch (below), and a clean past the
// horizon removes it (the last batch of a run stays as an empty control
// header). A producer's last batch and its last data batch stay, as empty
// headers if need be, for its epoch and last sequence; a marker that is
// its producer's last batch stays whole, its record included (replica's
// producer state takes the coordinator epoch from it).
//
// Tombstones (records with a null value) follow KIP-534 (Kafka 3.1 on): the
// first clean that keeps one rebuilds its batch with the delete-horizon bit
// (attribute bit 6) and baseTimestamp = now + delete.retention.ms, by the
// log's clock (Options.Now); a clean after that horizon drops them. Record
// timestamps stay right (their deltas are relative to the horizon). The
// earliest horizon a clean keeps (a tombstone's or a marker's, in memory
// only) makes a clean due once the clock passes it.
//
// The commit protocol, crash-safe at every step: (1) each replacement is
// written as <base>.log.cleaned with its two indexes, and synced; (2) all
// are renamed ".swap", indexes first and the .log last, in offset order,
// and the folder is synced: a segment whose .log.swap exists is committed,
// and recovery completes its swap; (3) the cleaner offset is persisted in
// log.checkpoint; (4) under the log's lock, the old files are renamed
// ".deleted" (removed after file.delete.delay.ms, so reads handed out stay
// valid) and the ".swap" files take the plain names. A crash before (2)
// leaves the old segments (recovery removes ".cleaned" and uncommitted
// ".swap" files); after it, the new ones. Steps (1) to (3) run outside
// the log's lock; only (4) takes it. A run of adjacent segments that
// together fit segment.bytes and the index limits is cleaned into one
// segment named by the run's first base offset (Kafka's
// groupSegmentsBySize). The last batch of each run is always kept (as an
// empty header if need be), so a completed ".swap" spans the old segments
// it replaces and recovery removes the others of the run (it refuses to
// open the log, rather than delete one, when a segment inside a swap's
// span runs past its end: the swap is stale; a clean that cannot remove a
// committed swap it undoes fails the log instead of leaving one). Runs are
// committed in offset order, so a partly durable step (2) leaves a prefix
// of the runs cleaned, which is also a correctly compacted log.
//
// # Retention
//
// DeleteOldSegments (run by a Sweeper every retention.check.interval.ms)
// deletes whole closed segments by retention.ms and retention.bytes, never
// the active one. DeleteRecordsBefore moves the log start offset inside a
// segment and persists it. Deleted segments are renamed ".deleted" and
// removed file.delete.delay.ms later; a read already handed out keeps its
// files open until it is released, however long that takes.
//
// # Raft
//
// The log is also its partition's raft log (raft.go): every batch stored
// is one raft entry, its raft index the batch's ordinal in the log, its
// term the batch's partitionLeaderEpoch. Raft's own entries (a new
// leader's empty entry, configuration changes) are internal batches
// (package batch: attribute bit 7 with the control bit) that take no
// offset, so the log end offset counts produced records only; reads
// (Read, ScanHeaders, the offset and time indexes, timestamp lookups)
// never return them, and Read splits its file ranges around them. Each
// segment's .raftindex holds its first raft index and one position per
// batch; FirstIndex and Term(FirstIndex-1) are kept in log.checkpoint
// (version 3). AppendEntry writes an entry, replacing a divergent tail
// first (TruncateIndex: the recovery point is lowered durably, then the
// files are cut; a ReadResult holding the cut segment keeps its bytes,
// because the kept prefix is then copied to a new file renamed over the
// .log instead of cutting the file readers hold). Retention and the
// cleaner never remove entries at or above SetRaftRetainFrom's bound;
// segments the cleaner rewrites leave the raft log (FirstIndex moves past
// them). ResetAt empties the log for a raft snapshot. In a raft log terms
// follow raft's rule (a term starts with its leader's empty entry, whose
// term the CRC covers) and recovery checks it, since the CRC does not
// cover partitionLeaderEpoch; a closed segment never ends with an
// internal batch, so a lost tail of internal batches shows as an offset
// gap at the next segment.
//
// # Open files
//
// Only the active segment keeps its three files open (four once it has a
// .txnindex). A closed segment's
// indexes are held in memory whole (package index loads them; the
// .txnindex's entries too), so its
// index files are closed once it is sealed and synced (until then Sync
// needs them), and reopened only if a truncation makes it the active
// segment again. Its .log file is opened read-only on demand through a
// FileCache, a least-recently-used set of at most Limit descriptors that
// every Log of a broker shares (Options.FileCache; a process-wide cache of
// DefaultOpenFilesMax when nil). Every read of a closed segment (Read, the
// header scans, timestamp lookups, the cleaner, Sync) holds a reference on
// the open file while it reads; Read's result keeps one per FileRange
// until ReadResult.Release (a Fetch response releases after it is written,
// so sendfile never sees a closed descriptor). A file evicted, or closed by
// a deletion, while referenced is closed by its last release: the limit
// bounds the idle descriptors, referenced ones may exceed it meanwhile.
// Recovery opens a log's segments' files while it checks them and hands
// the closed ones to the cache when Open returns. A log of P partitions
// thus holds 3 descriptors per partition (4 while the active segment has
// a .txnindex) plus the cache's limit, whatever
// the segment count.
//
// # Concurrency
//
// One RWMutex guards the segment list and the active segment's summary:
// appends, rolls, truncations, retention and a clean's swap take it
// exclusively; reads, timestamp lookups and Sync's snapshot take it shared.
// No fsync runs under it, except in Close: Sync's fsyncs run under syncMu,
// so appends and reads continue during an fsync; a clean reads, writes,
// syncs and commits its files outside it too (the commit under syncMu and
// ckptMu), and checkpoint writes run under ckptMu. Under it run an
// append's write, a roll's file creation, index trims and .raftindex
// write, renames (".deleted", a clean's swap) and a truncation's file cuts
// (or, with readers on the cut segment, its prefix copy). Retention,
// DeleteRecordsBefore, TruncateIndex and ResetAt hold syncMu throughout,
// so no Sync's folder sync falls between their file changes and their
// checkpoint. Lock order:
// cleanMu, then syncMu, then ckptMu, then mu; groupMu (Sync's leader
// election and the synced position) is a leaf, and so is the FileCache's
// mutex (taken under mu and from readers holding no lock; no other lock
// and no IO under it: files are opened and closed outside it).
//
// All file IO goes through vfs.FS.
package segment
