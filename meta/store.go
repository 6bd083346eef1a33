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
	// It is read under the write lock, so it need not be safe for
	// concurrent use.
	Rand io.Reader
	// ReserveBytes is the size of the space reserve: a file of zeros kept
	// in the store's folder (reserveName) and removed when the disk fills,
	// so the write that found the disk full still succeeds. While the
	// reserve is gone every change fails with ErrStorage (before Pebble
	// sees it) until the reserve can be written again, that is, until space
	// returns. Bytes; default 8 MiB; negative keeps no reserve.
	ReserveBytes int64
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

	// writeMu serializes changes (Append, the typed methods, Rebuild,
	// Close) and is held across the Pebble commit. Holding it, a writer may
	// read st without mu: only writers change st.
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
	mu     sync.RWMutex
	st     *state
	next   uint64 // the next log offset
	closed bool
}

// Open opens the store in dir, creating it if missing. The state is read
// from its keys (no replay) and checked for consistency; the next offset is
// the one after the last log record.
func Open(dir string, opts Options) (*Store, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Store{opts: opts, dir: dir, reserveRetry: time.Second}
	s.fdr = newFDReserveFS(opts.FS)
	s.fs = vfs.OnDiskFull(s.fdr, s.releaseReserve)
	db, err := s.openDB()
	if err != nil {
		s.fdr.Close()
		return nil, err
	}
	st, next, err := load(db)
	if err != nil {
		db.Close()
		s.fdr.Close()
		return nil, err
	}
	s.db, s.st, s.next = db, st, next
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
// state and finds the next offset.
func load(db *pebble.DB) (st *state, next uint64, err error) {
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
// has offset from+i. It returns nothing when from >= Offset().
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
// offset. The typed methods build records and call it; a node following a
// replicated log will call it for each committed record.
func (s *Store) Append(rec Record) (uint64, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.appendLocked(rec)
}

// appendLocked is Append with writeMu held.
func (s *Store) appendLocked(rec Record) (uint64, error) {
	offs, errs, err := s.appendManyLocked([]Record{rec})
	if err != nil {
		return 0, err
	}
	return offs[0], errs[0]
}

// appendManyLocked validates each record against the state as the records
// before it leave it, and writes the valid ones (log entries and state
// changes) in ONE synced Pebble batch. errs[i] is record i's validation
// error (it is then not written); err is a failure of the whole batch, in
// which case nothing was applied.
func (s *Store) appendManyLocked(recs []Record) (offs []uint64, errs []error, err error) {
	if err := s.writableLocked(); err != nil {
		return nil, nil, err
	}
	work := s.st
	if len(recs) > 1 {
		work = s.st.clone()
	}
	offs, errs = make([]uint64, len(recs)), make([]error, len(recs))
	var deltas []delta
	off := s.next
	b := s.db.NewBatch()
	defer b.Close()
	for i, rec := range recs {
		d, err := work.plan(rec)
		if err != nil {
			errs[i] = err
			continue
		}
		if err := b.Set(logKey(off), EncodeRecord(rec), nil); err != nil {
			return nil, nil, err
		}
		if err := d.write(b); err != nil {
			return nil, nil, err
		}
		if len(recs) > 1 {
			work.apply(d)
		}
		deltas = append(deltas, d)
		offs[i] = off
		off++
	}
	if len(deltas) == 0 {
		return offs, errs, nil
	}
	if err := s.commitLocked(b, fmt.Sprintf("log offsets [%d, %d)", s.next, off)); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	if len(recs) > 1 {
		s.st = work
	} else {
		s.st.apply(deltas[0])
	}
	s.next = off
	s.mu.Unlock()
	return offs, errs, nil
}

// Rebuild recomputes the state from the log alone and replaces the stored
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

// replay applies the log records [0, to) to an empty state.
func replay(r pebble.Reader, to uint64) (*state, error) {
	st := newState()
	err := scanLog(r, 0, to, func(off uint64, rec Record) error {
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
