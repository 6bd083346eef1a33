package server

// Faults: what the broker does with a partition whose files are damaged
// or whose disk fails (Kafka's LogDirFailureChannel, per partition).
//
//   - A partition whose log cannot be opened at all (an unreadable
//     folder, an IO error) is offline: Produce, Fetch, ListOffsets,
//     OffsetForLeaderEpoch and DeleteRecords answer KAFKA_STORAGE_ERROR,
//     Metadata gives it no leader (LEADER_NOT_AVAILABLE, this broker in
//     offline_replicas, as Kafka's metadata cache does for a replica on
//     an offline log dir), and DescribeLogDirs answers its log dir with
//     KAFKA_STORAGE_ERROR. The reconciler retries the open with backoff
//     (reconcile.go).
//   - A damaged log (segment.DamageError) opens: it serves the offsets
//     below the damage, and reads past it and writes answer
//     KAFKA_STORAGE_ERROR; its log dir is answered with
//     KAFKA_STORAGE_ERROR in DescribeLogDirs. It stays so until an
//     operator truncates it (sluice-dump truncate) and restarts.
//   - A log that failed on an IO error (a full disk: ENOSPC) takes its
//     raft group off the host (replica.Host.failGroup), so its replica
//     leads no more: Produce, Fetch, ListOffsets and
//     OffsetForLeaderEpoch answer KAFKA_STORAGE_ERROR, as Kafka's
//     partitions on an offline log dir do (Broker.notLeader,
//     produceFailed); the reconciler probes its folder with backoff and
//     reopens it (recovery runs) once a write succeeds there again, so
//     the partition resumes by itself.
//   - The metadata log is not one of these: a metadata log that cannot
//     be written stops the broker (watchMetaLog; Kafka halts when its
//     metadata log dir fails, KIP-858), and a start whose metadata log
//     cannot be written fails. metadata.log.dir puts it on another disk
//     than the data.

import (
	"errors"
	"path/filepath"

	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/replica"
	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// offlinePartition is a partition of the metadata the reconciler could
// not open.
type offlinePartition struct {
	dir string // its folder, when it was found or placed; else ""
	err error
}

// missingPartitionCode is the error code for a partition that is not
// open, as Kafka's ReplicaManager.getPartitionOrError answers it:
// KAFKA_STORAGE_ERROR when its open failed (an offline log dir),
// NOT_LEADER_OR_FOLLOWER for a partition of the metadata this broker does
// not host (another broker holds it, or the reconciler has not opened it
// yet: the client refreshes its metadata and goes to the leader), and
// UNKNOWN_TOPIC_OR_PARTITION only for one the metadata does not know.
func (b *Broker) missingPartitionCode(topic string, p int32) int16 {
	b.mu.RLock()
	_, off := b.offline[topicPartition{topic, p}]
	b.mu.RUnlock()
	if off {
		return kerr.KafkaStorageError.Code
	}
	if t, ok := b.meta.Topic(topic); ok && p >= 0 && p < t.Partitions {
		return kerr.NotLeaderForPartition.Code
	}
	return kerr.UnknownTopicOrPartition.Code
}

// failedDirs returns the log dirs (cleaned paths) holding a partition
// that is offline or whose log failed (damaged, or an IO error).
func (b *Broker) failedDirs() map[string]bool {
	out := map[string]bool{}
	b.mu.RLock()
	defer b.mu.RUnlock()
	for _, o := range b.offline {
		if o.dir != "" {
			out[filepath.Dir(o.dir)] = true
		}
	}
	for _, part := range b.parts {
		if part.Failed() != nil {
			out[filepath.Dir(part.Dir())] = true
		}
	}
	return out
}

// failing reports whether a partition is offline or its log failed on an
// IO error: the reconciler then retries with backoff. Damaged logs wait
// for an operator and do not count. Only the reconciler goroutine calls
// it.
func (r *reconciler) failing() bool {
	if len(r.failed) > 0 {
		return true
	}
	for _, h := range r.held {
		if ioFailed(h.part) {
			return true
		}
	}
	return false
}

func ioFailed(p *replica.Partition) bool {
	err := p.Failed()
	return err != nil && !errors.Is(err, segment.ErrDamaged)
}

// kickSoon asks for a pass without waiting (a log's OnFail: it runs under
// the log's lock, so it only sends on a buffered channel).
func (r *reconciler) kickSoon(error) {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// resumeFailed reopens each held partition whose log failed on an IO
// error once its folder takes a synced write again (a full disk has
// space again): the partition is closed and opened, so recovery finds
// what is really on disk (as a restart would), and serves and takes
// writes again. Until then it answers KAFKA_STORAGE_ERROR.
func (r *reconciler) resumeFailed(want map[topicPartition]meta.Topic) {
	b := r.b
	for tp, h := range r.held {
		t, ok := want[tp]
		if !ok || !ioFailed(h.part) {
			continue
		}
		if err := probeWritable(b.fs, h.part.Dir()); err != nil {
			continue
		}
		b.logger.Info("sluice: reopening a partition whose log failed on an IO error: its folder takes writes again",
			"topic", tp.topic, "partition", tp.partition, "err", h.part.Failed())
		delete(r.held, tp)
		b.mu.Lock()
		delete(b.parts, tp)
		b.mu.Unlock()
		if err := h.part.Close(); err != nil && !errors.Is(err, segment.ErrFailed) {
			b.logger.Warn("sluice: close a failed partition", "topic", tp.topic, "partition", tp.partition, "err", err)
		}
		r.open(tp, t)
	}
}

// probeName is the file probeWritable writes in a partition folder.
const probeName = ".write-probe"

// probeWritable reports whether dir takes a 4 KiB synced write: it
// writes, syncs and removes probeName.
func probeWritable(fs vfs.FS, dir string) error {
	path := filepath.Join(dir, probeName)
	f, err := fs.Create(path)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(make([]byte, 4096), 0)
	if err == nil {
		err = f.Sync()
	}
	err = errors.Join(err, f.Close(), fs.Remove(path))
	return err
}
