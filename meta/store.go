package meta

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configures a Store. The zero value is ready to use:
// EnsureDefaults fills every zero field.
type Options struct {
	// FS is the file system Pebble runs on. Default vfs.Default (the OS);
	// tests pass vfs.NewMem or vfs.NewCrashableMem.
	FS vfs.FS
	// CacheSize is Pebble's block cache in bytes. Default 1 MiB: the
	// metadata is small and this runs on small machines.
	CacheSize int64
	// MemTableSize is Pebble's memtable size in bytes. Default 1 MiB
	// (Pebble starts at 256 KiB and doubles up to this).
	MemTableSize uint64
	// Logger receives Pebble's errors (background errors, corruption); its
	// informational messages are dropped. Default slog.Default().
	Logger *slog.Logger
	// Rand is the source of random topic IDs. Default crypto/rand.Reader.
	// It is read under the write lock (the proposal lock in replicated
	// mode), so it need not be safe for concurrent use.
	Rand io.Reader
	// ReserveBytes is the size of the space reserve: a file of zeros kept
	// in the store's folder (reserveName) and removed when the disk fills,
	// so the write that found the disk full still succeeds. While the
	// reserve is gone every change fails with ErrStorage (before Pebble
	// sees it) until the reserve can be written again, that is, until space
	// returns. Bytes; default 8 MiB; negative keeps no reserve.
	ReserveBytes int64
	// Replicator, when set, puts the store in replicated mode: the typed
	// methods validate, then propose their records through it and wait
	// until ApplyReplicated has applied them (replicated.go). Nil (the
	// default): local mode, the typed methods append to the local log.
	Replicator Replicator
	// ProposeTimeout bounds a typed method in replicated mode: waiting
	// for the proposal lock, Propose, and the wait for the apply. Default
	// 10 s.
	ProposeTimeout time.Duration
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.CacheSize == 0 {
		o.CacheSize = 1 << 20
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = 1 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if o.ReserveBytes == 0 {
		o.ReserveBytes = 8 << 20
	}
	if o.ProposeTimeout == 0 {
		o.ProposeTimeout = 10 * time.Second
	}
}

// Validate reports every problem at once.
func (o *Options) Validate() error {
	var errs []error
	if o.CacheSize < 0 {
		errs = append(errs, fmt.Errorf("%w: CacheSize %d must be >= 0", ErrInvalidOptions, o.CacheSize))
	}
	if o.MemTableSize >= 1<<32 {
		errs = append(errs, fmt.Errorf("%w: MemTableSize %d must be < 4 GiB", ErrInvalidOptions, o.MemTableSize))
	}
	if o.ProposeTimeout < 0 {
		errs = append(errs, fmt.Errorf("%w: ProposeTimeout %v must be >= 0", ErrInvalidOptions, o.ProposeTimeout))
	}
	return errors.Join(errs...)
}

// Store is the cluster metadata: the record log and the state it produces,
// both in one Pebble database. It is safe for concurrent use: changes are
// serialized, reads run concurrently with each other and with the fsync of
// a change.
type Store struct {
	db   *pebble.DB // nil while failed and not yet reopened
	opts Options
	dir  string
	fs   vfs.FS       // opts.FS wrapped to release the reserve on ENOSPC (reserve.go)
	fdr  *fdReserveFS // spare descriptors for Pebble (fdreserve.go)

	// reserve state (reserve.go), guarded by writeMu except reserveGone,
	// which the disk-full callback sets from inside a Pebble write.
	reserveGone  atomic.Bool
	reserveTried time.Time     // the last attempt to write the reserve again
	reserveRetry time.Duration // how often to try; tests set 0
	commits      int           // synced Pebble commits (tests count them)

	// proposeMu (a one-slot semaphore, so that waiting for it honours the
	// proposal's deadline) serializes the typed methods in replicated
	// mode: held from validation through Propose to the apply of the
	// proposed records, and never with writeMu (the applier needs writeMu
	// while a proposal waits). Lock order: proposeMu, writeMu, mu.
	proposeMu chan struct{}

	// writeMu serializes changes (Append and the typed methods in local
	// mode, ApplyReplicated, Rebuild, Close) and is held across the Pebble
	// commit. Holding it, a writer may read st without mu: only writers
	// change st.
	writeMu sync.Mutex
	// failed is set when a commit fails: Pebble may or may not hold the
	// batch, so memory can no longer be trusted to match it. The next
	// change reopens Pebble and reloads the state from disk (commit.go);
	// until that succeeds every change returns the error. Guarded by
	// writeMu.
	failed error

	// mu guards the fields below. Lock order: writeMu, then mu. Readers
	// take it shared; writers take it exclusively only to install a change
	// that Pebble has already committed.
	mu      sync.RWMutex
	st      *state
	next    uint64 // the next log offset
	repNext int64  // the next replicated offset to apply
	// applied is closed and replaced by every ApplyReplicated that
	// advances repNext, and closed by Close (WaitReplicated).
	applied chan struct{}
	// pending collects the outcomes of every replicated offset applied
	// while a proposal is in flight (replicated.go); nil otherwise.
	pending map[int64]outcome
	closed  bool
}

// Open opens the store in dir, creating it if missing. The state is read
// from its keys (no replay) and checked for consistency; the next offset is
// the one after the last log record.
func Open(dir string, opts Options) (*Store, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Store{opts: opts, dir: dir, reserveRetry: time.Second,
		proposeMu: make(chan struct{}, 1), applied: make(chan struct{})}
	s.fdr = newFDReserveFS(opts.FS)
	s.fs = vfs.OnDiskFull(s.fdr, s.releaseReserve)
	db, err := s.openDB()
	if err != nil {
		s.fdr.Close()
		return nil, err
	}
	st, next, rep, err := load(db)
	if err != nil {
		db.Close()
		s.fdr.Close()
		return nil, err
	}
	s.db, s.st, s.next, s.repNext = db, st, next, rep
	s.ensureReserve()
	return s, nil
}

// openDB opens Pebble in s.dir. A panic from Pebble (its Fatalf, or a
// failed file operation) is returned as an ErrStorage error.
func (s *Store) openDB() (db *pebble.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("%w: open %s: pebble panicked: %v", ErrStorage, s.dir, r)
		}
	}()
	cache := pebble.NewCache(s.opts.CacheSize)
	defer cache.Unref()
	db, err = pebble.Open(s.dir, &pebble.Options{
		FS:           s.fs,
		Cache:        cache,
		MemTableSize: s.opts.MemTableSize,
		Logger:       pebbleLogger{s.opts.Logger},
	})
	if err != nil {
		return nil, fmt.Errorf("meta: open %s: %w", s.dir, err)
	}
	return db, nil
}

// load checks the format key (writing it into an empty database), reads the
// state and finds the next offset and the next replicated offset.
func load(db *pebble.DB) (st *state, next uint64, rep int64, err error) {
	st, next, err = loadLog(db)
	if err != nil {
		return nil, 0, 0, err
	}
	if v, ok, err := get(db, keyReplicated); err != nil {
		return nil, 0, 0, err
	} else if ok {
		if rep, err = decodeReplicatedNext(v); err != nil {
			return nil, 0, 0, err
		}
	}
	return st, next, rep, nil
}

func loadLog(db *pebble.DB) (st *state, next uint64, err error) {
	v, ok, err := get(db, keyFormat)
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		it, err := db.NewIter(nil)
		if err != nil {
			return nil, 0, err
		}
		empty := !it.First()
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return nil, 0, err
		}
		if !empty {
			return nil, 0, fmt.Errorf("%w: no format key in a non-empty database", ErrCorrupt)
		}
		if err := db.Set([]byte(keyFormat), []byte{formatVersion}, pebble.Sync); err != nil {
			return nil, 0, err
		}
	} else if len(v) != 1 || v[0] != formatVersion {
		return nil, 0, fmt.Errorf("%w: format version % x, want %d", ErrCorrupt, v, formatVersion)
	}
	if st, err = loadState(db); err != nil {
		return nil, 0, err
	}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte(keyLogPrefix), UpperBound: prefixEnd(keyLogPrefix)})
	if err != nil {
		return nil, 0, err
	}
	if it.Last() {
		off, ok := parseLogKey(it.Key())
		if !ok {
			it.Close()
			return nil, 0, fmt.Errorf("%w: log key %x", ErrCorrupt, it.Key())
		}
		next = off + 1
	} else if next, err = logBase(db); err != nil { // no record since the last restore
		it.Close()
		return nil, 0, err
	}
	if err := it.Error(); err != nil {
		it.Close()
		return nil, 0, err
	}
	return st, next, it.Close()
}

// Close closes the store. Later changes and log reads return ErrClosed.
func (s *Store) Close() error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	close(s.applied) // wakes WaitReplicated, which then sees closed
	defer s.fdr.Close()
	if s.db == nil {
		return nil
	}
	return closeDB(s.db)
}

// Offset returns the next log offset: the number of records applied.
func (s *Store) Offset() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.next
}

// Records returns the log records from offset from to the end; record i
// has offset from+i. It returns nothing when from >= Offset(), and
// ErrRestored when from is below the first record after the last
// RestoreState.
func (s *Store) Records(from uint64) ([]Record, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	if from >= s.next {
		return nil, nil
	}
	if s.db == nil { // failed (s.failed is writeMu's, not read here)
		return nil, fmt.Errorf("%w: the store failed and has not reopened yet", ErrStorage)
	}
	if base, err := logBase(s.db); err != nil {
		return nil, err
	} else if from < base {
		return nil, fmt.Errorf("%w: the local log starts at offset %d (a restored state replaced the records before it), not %d", ErrRestored, base, from)
	}
	recs := make([]Record, 0, s.next-from)
	err := scanLog(s.db, from, s.next, func(off uint64, r Record) error {
		recs = append(recs, r)
		return nil
	})
	return recs, err
}

// scanLog calls fn for each record with offset in [from, to), checking
// that the offsets are contiguous and complete.
func scanLog(r pebble.Reader, from, to uint64, fn func(off uint64, rec Record) error) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: logKey(from), UpperBound: logKey(to)})
	if err != nil {
		return err
	}
	defer it.Close()
	want := from
	for it.First(); it.Valid(); it.Next() {
		off, ok := parseLogKey(it.Key())
		if !ok || off != want {
			return fmt.Errorf("%w: log key %x where offset %d was expected", ErrCorrupt, it.Key(), want)
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		rec, err := DecodeRecord(v)
		if err != nil {
			return fmt.Errorf("log offset %d: %w", off, err)
		}
		if err := fn(off, rec); err != nil {
			return err
		}
		want++
	}
	if err := it.Error(); err != nil {
		return err
	}
	if want != to {
		return fmt.Errorf("%w: log ends at offset %d, want %d", ErrCorrupt, want, to)
	}
	return nil
}

// Append validates rec against the current state, then writes it to the
// log and applies it, in one synced Pebble batch. It returns the record's
// local log offset. The typed methods build records and call it. A
// BrokerRegistered is stamped with its offset (its Epoch is ignored). In
// replicated mode Append proposes rec as a typed method does.
func (s *Store) Append(rec Record) (uint64, error) {
	outs, err := s.change(func(*state) ([]Record, error) { return []Record{rec}, nil })
	if err != nil {
		return 0, err
	}
	return outs[0].off, outs[0].err
}

// outcome is what applying one record did: err is its validation error
// (it was then not applied), otherwise off is its local log offset, rec
// the record as applied (stamped) and d its delta.
type outcome struct {
	off uint64
	err error
	rec Record
	d   delta
}

// stamp returns rec with a BrokerRegistered's Epoch set to off.
func stamp(rec Record, off int64) Record {
	if r, ok := rec.(BrokerRegistered); ok {
		r.Epoch = off
		return r
	}
	return rec
}

// appendManyLocked validates each record against the state as the records
// before it leave it, and writes the valid ones (log entries and state
// changes) in ONE synced Pebble batch. outs[i].err is record i's
// validation error (it is then not written); err is a failure of the whole
// batch, in which case nothing was applied.
//
// With replicated set, recs are the replicated offsets repFirst, ...: a
// BrokerRegistered is stamped with its replicated offset, replicated/next
// becomes repFirst+len(recs) in the same batch (committed even if no
// record applies), and the outcomes go to a waiting proposal. Otherwise a
// BrokerRegistered is stamped with its local log offset.
func (s *Store) appendManyLocked(recs []Record, replicated bool, repFirst int64) (outs []outcome, err error) {
	if err := s.writableLocked(); err != nil {
		return nil, err
	}
	work := s.st
	if len(recs) > 1 {
		work = s.st.clone()
	}
	outs = make([]outcome, len(recs))
	var deltas []delta
	off := s.next
	b := s.db.NewBatch()
	defer b.Close()
	for i, rec := range recs {
		if replicated {
			rec = stamp(rec, repFirst+int64(i))
		} else {
			rec = stamp(rec, int64(off))
		}
		d, err := work.plan(rec)
		if err != nil {
			outs[i].err = err
			if replicated {
				s.opts.Logger.Debug("meta: replicated record refused", "offset", repFirst+int64(i), "record", rec.String(), "err", err)
			}
			continue
		}
		if err := b.Set(logKey(off), EncodeRecord(rec), nil); err != nil {
			return nil, err
		}
		if err := d.write(b); err != nil {
			return nil, err
		}
		if len(recs) > 1 {
			work.apply(d)
		}
		deltas = append(deltas, d)
		outs[i] = outcome{off: off, rec: rec, d: d}
		off++
	}
	repNext := repFirst + int64(len(recs))
	what := fmt.Sprintf("log offsets [%d, %d)", s.next, off)
	if replicated {
		if err := b.Set([]byte(keyReplicated), encodeReplicatedNext(repNext), nil); err != nil {
			return nil, err
		}
		what += fmt.Sprintf(", replicated offsets [%d, %d)", repFirst, repNext)
	} else if len(deltas) == 0 {
		return outs, nil
	}
	if err := s.commitLocked(b, what); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if len(recs) > 1 {
		s.st = work
	} else if len(deltas) == 1 {
		s.st.apply(deltas[0])
	}
	s.next = off
	if replicated {
		s.repNext = repNext
		if s.pending != nil {
			for i, o := range outs {
				s.pending[repFirst+int64(i)] = o
			}
		}
		close(s.applied)
		s.applied = make(chan struct{})
	}
	s.mu.Unlock()
	return outs, nil
}

// Rebuild recomputes the state from the log alone (after a RestoreState:
// from the restored state and the log records after it) and replaces the stored
// state with it in one synced batch. The state is always equal to what
// Rebuild computes; Rebuild is the check, and the repair after state keys
// were damaged. A log record that does not apply is ErrCorrupt.
func (s *Store) Rebuild() error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.writableLocked(); err != nil {
		return err
	}
	st, err := replay(s.db, s.next)
	if err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, p := range statePrefixes {
		if err := b.DeleteRange([]byte(p), prefixEnd(p), nil); err != nil {
			return err
		}
	}
	if err := st.writeAll(b); err != nil {
		return err
	}
	if err := s.commitLocked(b, "rebuilt state"); err != nil {
		return err
	}
	s.mu.Lock()
	s.st = st
	s.mu.Unlock()
	return nil
}

// replay applies the log records up to to to the restored state (doc.go,
// "State snapshots"), or from 0 to an empty state if none was restored.
func replay(db *pebble.DB, to uint64) (*state, error) {
	st, from, err := restoredBase(db)
	if err != nil {
		return nil, err
	}
	err = scanLog(db, from, to, func(off uint64, rec Record) error {
		d, err := st.plan(rec)
		if err != nil {
			return fmt.Errorf("%w: log offset %d (%v) does not apply: %v", ErrCorrupt, off, rec, err)
		}
		st.apply(d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// pebbleLogger keeps Pebble quiet: informational messages are dropped,
// errors go to the slog.Logger, and Fatalf logs and panics.
type pebbleLogger struct{ l *slog.Logger }

func (pebbleLogger) Infof(string, ...any) {}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("meta: pebble: " + fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := "meta: pebble: " + fmt.Sprintf(format, args...)
	p.l.Error(msg)
	panic(msg)
}

// Commits returns how many synced Pebble commits the store has made since
// it was opened (one per change, or per CreateTopics call).
func (s *Store) Commits() int {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.commits
}
