package server

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/replica"
	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/vfs"
)

// The reconciler: the only code that opens, reconfigures, closes and
// deletes partitions (Kafka's KRaft broker shape: MetadataPublisher and
// ReplicaManager.applyDelta). Request handlers validate and append
// metadata records; the reconciler makes the partitions this broker holds
// match the metadata state:
//   - a partition of a topic in the metadata that is not open is opened (a
//     folder left by a deleted topic of the same name, recognised by the
//     topic ID in its partition.metadata, is removed first);
//   - an open partition whose topic configs changed gets the new
//     configuration;
//   - an open partition whose topic is gone (deleted, or recreated under a
//     new topic ID) is closed and its folder removed, and the coordinator
//     drops the topic's committed offsets.
//
// One goroutine runs passes, one at a time, when kicked (after every
// metadata change this broker makes, and when a log fails) and, while an
// open failed or a log failed on an IO error, after a backoff
// (reconcileRetry doubling to reconcileRetryMax). A failed open is logged
// and retried; the partition is offline meanwhile (KAFKA_STORAGE_ERROR,
// LEADER_NOT_AVAILABLE in Metadata; faults.go) and the rest of the broker
// serves on. A log failed on an IO error is reopened once its folder takes
// writes again (resumeFailed). Handlers that changed the metadata wait (bounded) until a
// pass has covered their change, so a client that created a topic can
// use it at once, as on a single Kafka broker.
//
// Only the reconciler goroutine touches held; it takes b.mu (exclusively)
// only to add or remove a partition from b.parts.

// reconcileRetry is how soon a pass retries partitions that failed to
// open, or whose log failed on an IO error (a full disk), after the
// failure; the delay doubles while a retry finds them still failing, up
// to reconcileRetryMax, and starts again at reconcileRetry once none is.
const (
	reconcileRetry    = time.Second
	reconcileRetryMax = 16 * time.Second
)

// partitionMetadataName is Kafka's per-partition file naming the topic ID
// the folder belongs to (PartitionMetadataFile):
//
//	version: 0
//	topic_id: <the ID in URL-safe base64, no padding>
const partitionMetadataName = "partition.metadata"

// heldPartition is what the reconciler opened a partition from.
type heldPartition struct {
	part    *replica.Partition
	topicID [16]byte
	configs map[string]string // the topic's overrides it was resolved from
}

type reconciler struct {
	b         *Broker
	kick      chan struct{} // buffered: a pass is wanted
	stop      chan struct{}
	closeOnce sync.Once
	done      chan struct{}

	held map[topicPartition]*heldPartition
	// atStartup holds the partitions the metadata named at the first
	// pass, with their topic IDs: only their folders may lack
	// partition.metadata.
	atStartup map[topicPartition][16]byte
	// failed is the last open error logged, per partition. Only the
	// reconciler goroutine writes it, holding mu; openFailure reads it.
	failed map[topicPartition]string
	// campaigned are the partitions this pass opened whose lone voter
	// campaigned (campaignIfSole): the pass waits for their leadership.
	campaigned []*replica.Partition

	mu      sync.Mutex
	applied uint64        // the metadata offset the last pass covered
	passed  chan struct{} // closed and replaced after every pass
}

func newReconciler(b *Broker) *reconciler {
	return &reconciler{
		b:      b,
		kick:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		held:   map[topicPartition]*heldPartition{},
		failed: map[topicPartition]string{},
		passed: make(chan struct{}),
	}
}

// start runs passes in the background until close.
func (r *reconciler) start() {
	go func() {
		defer close(r.done)
		delay := reconcileRetry
		var retry <-chan time.Time
		if r.failing() { // the start-up pass failed somewhere
			retry = time.After(delay)
		}
		for {
			retried := false
			select {
			case <-r.stop:
				return
			case <-r.kick:
			case <-retry:
				retried = true
			}
			r.pass()
			retry = nil
			switch {
			case !r.failing():
				delay = reconcileRetry
			case retried:
				delay = min(2*delay, reconcileRetryMax)
			}
			if r.failing() {
				retry = time.After(delay)
			}
		}
	}()
}

// close stops the goroutine and waits for a pass in progress; the
// partitions stay open (the broker closes them).
func (r *reconciler) close() {
	r.closeOnce.Do(func() { close(r.stop) })
	<-r.done
}

// changed asks for a pass and waits, at most until ctx ends, for one that
// covers every metadata change committed so far.
func (r *reconciler) changed(ctx context.Context) {
	target := r.b.meta.Offset()
	select {
	case r.kick <- struct{}{}:
	default:
	}
	for {
		r.mu.Lock()
		applied, passed := r.applied, r.passed
		r.mu.Unlock()
		if applied >= target {
			return
		}
		select {
		case <-passed:
		case <-ctx.Done():
			return
		case <-r.done:
			return
		}
	}
}

// openFailure reports the open error of one of t's partitions that the
// last pass could not open; failed is false when all opened (or are still
// to be tried).
func (r *reconciler) openFailure(t meta.Topic) (msg string, failed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := int32(0); p < t.Partitions; p++ {
		if msg, ok := r.failed[topicPartition{t.Name, p}]; ok {
			return msg, true
		}
	}
	return "", false
}

// changedSoon is changed bounded by a few seconds: long enough for opens
// on a slow disk, short enough that a stuck open does not hang a request.
func (r *reconciler) changedSoon() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.changed(ctx)
}

// pass makes the held partitions match the metadata once.
func (r *reconciler) pass() {
	b := r.b
	off := b.meta.Offset() // before reading the state: the state is at least this new
	want := map[topicPartition]meta.Topic{}
	first := r.atStartup == nil
	if first {
		r.atStartup = map[topicPartition][16]byte{}
		r.removeDeletedDirs()
	}
	for _, t := range b.meta.Topics() {
		for p := int32(0); p < t.Partitions; p++ {
			if !b.hosts(t, p) {
				continue
			}
			want[topicPartition{t.Name, p}] = t
			if first {
				r.atStartup[topicPartition{t.Name, p}] = t.ID
			}
		}
	}
	// Drop what the metadata no longer has (or has under a new topic ID)
	// first, so a recreated topic's folder is free before it opens.
	gone := map[string]bool{}
	for tp, h := range r.held {
		if t, ok := want[tp]; ok && t.ID == h.topicID {
			continue
		}
		r.drop(tp, h)
		if t, ok := b.meta.Topic(tp.topic); !ok || t.ID != h.topicID {
			gone[tp.topic] = true
		}
	}
	for name := range gone {
		if !isInternalTopic(name) {
			b.coord.TopicDeleted(context.Background(), name)
		}
	}
	r.mu.Lock()
	for tp := range r.failed {
		if _, ok := want[tp]; !ok {
			delete(r.failed, tp)
			b.mu.Lock()
			delete(b.offline, tp)
			b.mu.Unlock()
		}
	}
	r.mu.Unlock()
	for tp, t := range want {
		h, ok := r.held[tp]
		switch {
		case !ok:
			r.open(tp, t)
		case !mapsEqual(h.configs, t.Configs):
			r.reconfigure(tp, h, t)
		}
	}
	r.resumeFailed(want)
	awaitLeaders(r.campaigned)
	if len(r.campaigned) > 0 {
		// Report the leaderships this pass's opens won, together.
		b.cl.holdReports.Store(false)
		b.cl.kickLeadership()
	}
	r.campaigned = r.campaigned[:0]
	r.mu.Lock()
	r.applied = max(r.applied, off)
	close(r.passed)
	r.passed = make(chan struct{})
	r.mu.Unlock()
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// open opens one partition of t, removing a folder that belongs to
// another topic ID first.
func (r *reconciler) open(tp topicPartition, t meta.Topic) {
	b := r.b
	part, dir, err := r.openPartition(tp, t)
	if err != nil {
		msg := err.Error()
		if r.failed[tp] != msg {
			b.logger.Error("sluice: cannot open partition; it is offline (KAFKA_STORAGE_ERROR) and the open is retried with backoff", "topic", tp.topic, "partition", tp.partition, "dir", dir, "err", err)
		}
		r.mu.Lock()
		r.failed[tp] = msg
		r.mu.Unlock()
		b.mu.Lock()
		b.offline[tp] = offlinePartition{dir: dir, err: err}
		b.mu.Unlock()
		return
	}
	if _, ok := r.failed[tp]; ok {
		b.logger.Info("sluice: partition opened after an earlier failure", "topic", tp.topic, "partition", tp.partition)
		r.mu.Lock()
		delete(r.failed, tp)
		r.mu.Unlock()
	}
	r.held[tp] = &heldPartition{part: part, topicID: t.ID, configs: t.Configs}
	b.mu.Lock()
	b.parts[tp] = part
	delete(b.offline, tp)
	b.mu.Unlock()
	b.cl.kickLeadership() // the leader loads it (cluster_broker.go)
}

// hosts reports whether this broker holds a replica of partition p of t:
// when the partition's replica list names it.
func (b *Broker) hosts(t meta.Topic, p int32) bool {
	if !b.cfg.IsBroker() || int(p) >= len(t.Assignments) {
		return false
	}
	return slices.Contains(t.Assignments[p], b.cfg.NodeID)
}

func (r *reconciler) openPartition(tp topicPartition, t meta.Topic) (_ *replica.Partition, dir string, err error) {
	b := r.b
	dir, found, err := r.placePartition(tp, t)
	if err != nil {
		return nil, dir, err
	}
	cfg, err := b.topicConfig(t.Configs)
	if err != nil {
		return nil, dir, err
	}
	rc, err := b.cl.raftConfig(t, tp.partition)
	if err != nil {
		return nil, dir, err
	}
	part, err := replica.Open(b.fs, dir, cfg, replica.Options{
		Raft:                 rc,
		Internal:             isInternalTopic(t.Name),
		Sweeper:              b.sweep,
		Cleaner:              b.clean,
		ProducerIDExpiration: time.Duration(b.cfg.ProducerIDExpirationMs) * time.Millisecond,
		Log: segment.Options{
			Now:                      b.now,
			Logger:                   b.logger,
			CleanerDedupeBufferBytes: b.cleanerDedupeShare(),
			OnFail:                   r.kickSoon,
			FileCache:                b.files,
			OnSync:                   b.metrics.syncObserver(),
			OnRecovered:              b.onRecovered,
		},
	})
	if err != nil {
		return nil, dir, err
	}
	if !found {
		if err := writePartitionMetadata(b.fs, dir, t.ID); err != nil {
			part.Close()
			return nil, dir, err
		}
	}
	if b.cl.campaignIfSole(part, rc.Group) {
		b.cl.holdReports.Store(true) // until the pass ends (pass)
		r.campaigned = append(r.campaigned, part)
	}
	return part, dir, nil
}

// placePartition finds the folder of a partition in the log dirs (Kafka's
// JBOD): the one whose partition.metadata names the topic ID (found), or,
// at start-up, a folder written before Sluice kept the file (adopted).
// Every other folder of that name is a deleted topic's leftover and is
// removed. A partition with no folder goes to the log dir holding the
// fewest partitions (Kafka's rule for new replicas), the first on a tie.
func (r *reconciler) placePartition(tp topicPartition, t meta.Topic) (dir string, found bool, err error) {
	b := r.b
	name := partitionDirName(tp.topic, tp.partition)
	var leftovers, legacy []string
	for _, ld := range b.cfg.LogDirs {
		d := filepath.Join(ld, name)
		if !exists(b.fs, d) {
			continue
		}
		id, ok, err := readPartitionMetadata(b.fs, d)
		switch {
		case err != nil:
			return "", false, err
		case ok && id == t.ID && dir == "":
			dir, found = d, true
		case !ok && r.atStartup[tp] == t.ID:
			legacy = append(legacy, d)
		default:
			leftovers = append(leftovers, d)
		}
	}
	if dir == "" && len(legacy) > 0 {
		dir, legacy = legacy[0], legacy[1:]
	}
	for _, d := range append(leftovers, legacy...) {
		// A folder of another topic ID, or a folder without the file
		// where a partition comes into existence: a deleted topic's
		// leftover.
		b.logger.Warn("sluice: removing a partition folder that belongs to no topic (left by a deleted topic, or put there by hand)",
			"dir", d, "topic_id", meta.FormatTopicID(t.ID))
		if err := removePartitionDir(b.fs, d); err != nil {
			return "", false, err
		}
	}
	if dir != "" {
		return dir, found, nil
	}
	held := map[string]int{}
	for _, h := range r.held {
		held[filepath.Dir(h.part.Dir())]++
	}
	best := b.cfg.LogDirs[0]
	for _, ld := range b.cfg.LogDirs[1:] {
		if held[filepath.Clean(ld)] < held[filepath.Clean(best)] {
			best = ld
		}
	}
	return filepath.Join(best, name), false, nil
}

// reconfigure applies a topic's changed configs to one open partition.
func (r *reconciler) reconfigure(tp topicPartition, h *heldPartition, t meta.Topic) {
	cfg, err := r.b.topicConfig(t.Configs)
	if err == nil {
		err = h.part.SetConfig(cfg)
	}
	if err != nil {
		// The handler validated the configs before writing them, so
		// this is a bug; the partition keeps its old settings.
		r.b.logger.Error("sluice: cannot apply topic configs", "topic", tp.topic, "partition", tp.partition, "err", err)
	}
	h.configs = t.Configs
}

// drop takes a partition out of service, closes it and removes its
// folder. Requests that looked it up before see segment.ErrClosed
// (UNKNOWN_TOPIC_OR_PARTITION). Failures are only logged: the folder is
// a leftover that a later open of the name removes (its topic ID
// differs), or, once renamed to a "-delete" name, one that start-up
// removes.
func (r *reconciler) drop(tp topicPartition, h *heldPartition) {
	b := r.b
	delete(r.held, tp)
	b.mu.Lock()
	delete(b.parts, tp)
	b.mu.Unlock()
	if err := h.part.Close(); err != nil {
		b.logger.Warn("sluice: close deleted partition", "topic", tp.topic, "partition", tp.partition, "err", err)
	}
	// The group left the host at Close; its raft state goes too.
	if err := b.cl.states.Delete(replica.GroupID{TopicID: h.topicID, Partition: tp.partition}); err != nil {
		b.logger.Warn("sluice: remove a deleted partition's raft state", "topic", tp.topic, "partition", tp.partition, "err", err)
	}
	if err := removePartitionDir(b.fs, h.part.Dir()); err != nil {
		b.logger.Warn("sluice: remove deleted partition folder", "topic", tp.topic, "partition", tp.partition, "err", err)
	}
}

// closeAll closes every held partition (broker shutdown, after close).
func (r *reconciler) closeAll() error {
	var errs []error
	r.b.mu.Lock()
	clear(r.b.parts)
	r.b.mu.Unlock()
	for tp, h := range r.held {
		reported := h.part.Failed() != nil
		err := h.part.Close()
		if err != nil && reported && errors.Is(err, segment.ErrFailed) {
			// A damaged or failed partition was reported when it
			// failed; its close is not a failed shutdown. A failure
			// new at Close (its final sync) still is.
			r.b.logger.Warn("sluice: closed a failed partition", "topic", tp.topic, "partition", tp.partition, "err", err)
			err = nil
		}
		errs = append(errs, err)
		delete(r.held, tp)
	}
	return errors.Join(errs...)
}

// deleteDirSuffix ends the name of a partition folder being removed
// (Kafka's "-delete" folders). A removal is not atomic (the OS unlinks a
// folder's files one by one, partition.metadata possibly first), so a
// folder is first renamed away from its partition's name, atomically,
// and only then removed: a removal cut short never leaves, under a
// partition's name, a folder that lost its partition.metadata but kept
// records, which a topic recreated under that name would adopt at
// start-up. No partition folder ends so (theirs end in the partition
// number).
const deleteDirSuffix = "-delete"

// removePartitionDir removes a partition folder: renamed to
// <name>.<random hex>-delete, the rename synced, then removed and the
// removal synced. A missing folder is not an error.
func removePartitionDir(fs vfs.FS, dir string) error {
	if !exists(fs, dir) {
		return nil
	}
	var rnd [16]byte
	crand.Read(rnd[:])
	suffix := "." + hex.EncodeToString(rnd[:]) + deleteDirSuffix
	base := filepath.Base(dir)
	if n := 255 - len(suffix); len(base) > n {
		base = base[:n]
	}
	parent := filepath.Dir(dir)
	gone := filepath.Join(parent, base+suffix)
	if err := fs.Rename(dir, gone); err != nil {
		return err
	}
	if err := fs.SyncDir(parent); err != nil {
		return err
	}
	if err := fs.RemoveAll(gone); err != nil {
		return err
	}
	return fs.SyncDir(parent)
}

// removeDeletedDirs removes, at start-up, the folders whose removal a
// crash or an error cut short (see deleteDirSuffix).
func (r *reconciler) removeDeletedDirs() {
	for _, dir := range r.b.cfg.LogDirs {
		r.removeDeletedIn(dir)
	}
}

func (r *reconciler) removeDeletedIn(dir string) {
	b := r.b
	names, err := b.fs.List(dir)
	if err != nil {
		b.logger.Warn("sluice: list the log folder", "dir", dir, "err", err)
		return
	}
	removed := false
	for _, name := range names {
		path := filepath.Join(dir, name)
		if fi, err := b.fs.Stat(path); err != nil || !fi.IsDir() || !strings.HasSuffix(name, deleteDirSuffix) {
			continue
		}
		if err := b.fs.RemoveAll(path); err != nil {
			b.logger.Warn("sluice: remove a deleted partition folder", "dir", path, "err", err)
			continue
		}
		removed = true
	}
	if removed {
		if err := b.fs.SyncDir(dir); err != nil {
			b.logger.Warn("sluice: sync the log folder", "dir", dir, "err", err)
		}
	}
}

func exists(fs vfs.FS, path string) bool {
	_, err := fs.Stat(path)
	return err == nil
}

// readPartitionMetadata reads dir's partition.metadata; found is false
// when the folder or the file does not exist (a folder written before
// Sluice kept the file is adopted by its topic).
func readPartitionMetadata(fs vfs.FS, dir string) (id [16]byte, found bool, err error) {
	f, err := fs.Open(filepath.Join(dir, partitionMetadataName))
	if errors.Is(err, os.ErrNotExist) {
		return id, false, nil
	}
	if err != nil {
		return id, false, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return id, false, err
	}
	data := make([]byte, min(size, 1<<10))
	if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return id, false, err
	}
	var version int
	var s string
	if _, err := fmt.Fscanf(bytes.NewReader(data), "version: %d\ntopic_id: %s\n", &version, &s); err != nil || version != 0 {
		return id, false, fmt.Errorf("server: %s: unreadable %s (remove the folder if it belongs to no topic): %q", dir, partitionMetadataName, data)
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) != len(id) {
		return id, false, fmt.Errorf("server: %s: %s: bad topic_id %q", dir, partitionMetadataName, s)
	}
	copy(id[:], raw)
	return id, true, nil
}

// writePartitionMetadata writes dir's partition.metadata durably: a
// temporary file, synced, renamed, and the folder synced.
func writePartitionMetadata(fs vfs.FS, dir string, id [16]byte) error {
	tmp := filepath.Join(dir, partitionMetadataName+".tmp")
	f, err := fs.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.WriteAt([]byte("version: 0\ntopic_id: "+meta.FormatTopicID(id)+"\n"), 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, filepath.Join(dir, partitionMetadataName))
	}
	if err == nil {
		err = fs.SyncDir(dir)
	}
	return err
}
