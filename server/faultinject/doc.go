// Package faultinject injects disk faults and wall-clock jumps into one
// running broker, for fault runners (tools/chaos) that start `sluice
// serve` processes: a slow disk (fsync and write delays), a failing disk
// (EIO) and a jumped wall clock.
//
// # The build tag
//
// The package itself is untagged, so tests use it in-process, but the
// sluice binary contains it only when built with the faults tag:
//
//	cd server && go build -tags faults ./cmd/sluice
//
// Without the tag (the normal build) nothing of it is linked in and
// SLUICE_FAULTS is ignored (server/cmd/sluice/faults_off.go).
//
// # The control file
//
// In a faults build, when the environment variable SLUICE_FAULTS names a
// file, the broker reads it at start-up and then every 50 ms (Watch) and
// applies its JSON object:
//
//	{"fsync_delay_ms": 0, "write_delay_ms": 0, "fail_writes": false, "clock_offset_ms": 0}
//
// The fields:
//
//   - fsync_delay_ms (integer, >= 0): every Sync of a file and every
//     SyncDir in the partition-log FS (server Options.FS) sleeps this long
//     first, and so does every Sync, SyncData and SyncTo of a file or
//     directory in the metadata and raft-state Pebble FS (Options.MetaFS).
//   - write_delay_ms (integer, >= 0): every WriteAt to a partition-log
//     file sleeps this long first.
//   - fail_writes (boolean): while true, writes, truncates, syncs
//     (files and directories), creates (files and directories), renames
//     and removes in the partition-log FS fail with an error wrapping
//     syscall.EIO; opens, reads, lists and stats keep working. The broker
//     answers KAFKA_STORAGE_ERROR for the partitions whose log failed and
//     reopens them by itself once a probe write succeeds again
//     (server/faults.go). The Pebble FS is not failed.
//   - clock_offset_ms (integer, any sign): the broker's wall clock
//     (server Options.Now) is time.Now().Add(offset): record timestamps
//     the broker stamps (LogAppendTime, commits, metadata records) and
//     the ages of retention, segment.ms, flush.ms and producer ID expiry
//     jump, as after a CLOCK_REALTIME step on Linux. Timeouts, deadlines,
//     timers and replica lag use time.Now and are unaffected. t.Add
//     shifts the value's monotonic reading with its wall reading, so two
//     readings under one offset differ by the real elapsed time, and two
//     readings either side of an offset change differ by the change too,
//     as readings of a stepped wall clock do.
//
// A field left out is zero, so {} clears every fault. A missing file
// means no faults. A file that does not parse (bad JSON, an unknown
// field, a negative delay, trailing data) is logged once at WARN and the
// state in force is kept. Every change of the state in force is logged
// at INFO ("sluice: faults: applied" with the four fields). A fault
// runner should write the file atomically (write a temporary file, then
// rename it over the control file); a torn write is at worst one WARN and
// a 50 ms delay.
//
// Delays apply to operations that start after the change; an operation
// already sleeping finishes its old delay.
package faultinject
