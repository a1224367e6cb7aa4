package statestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/storage"
)

// The in-memory backend is this package's Store: the operator keeps the
// working copy in memory and the folder holds the delta and snapshot files.
// A disk-backed backend (statestore/pebblestore) keeps a working copy on
// local disk and writes the same delta files, plus its own snapshot files;
// it marks the folder with a backend file so that the in-memory Store,
// which cannot read those snapshots, refuses it instead of loading a
// partial state.
const (
	// BackendMemory is the in-memory backend; its folders carry no backend
	// file (every folder written before backends existed is one).
	BackendMemory = "memory"
	// backendFileName is the marker object: the backend's name and a
	// newline.
	backendFileName = "backend"
)

// Sum is the SHA-256 of a delta file's bytes: CommitSum returns it,
// DeltaSum and ReadDelta recompute it.
type Sum [sha256.Size]byte

// String returns the sum in hex.
func (s Sum) String() string { return hex.EncodeToString(s[:]) }

// ReadBackend returns the backend that keeps the folder st: the content of
// its backend file, or BackendMemory when it has none.
func ReadBackend(ctx context.Context, st storage.Store) (string, error) {
	data, err := st.Get(ctx, backendFileName)
	if storage.IsNotExist(err) {
		return BackendMemory, nil
	}
	if err != nil {
		return "", fmt.Errorf("statestore: read %s/%s: %w", st.URL(), backendFileName, err)
	}
	name := strings.TrimSuffix(string(data), "\n")
	if name == "" || strings.ContainsAny(name, "\n\x00") || len(name) > 64 {
		return "", &CorruptionError{File: st.URL() + "/" + backendFileName, Offset: -1, Reason: fmt.Sprintf("not a backend name: %q", data)}
	}
	return name, nil
}

// checkBackend refuses a folder another backend keeps, and marks the folder
// for a backend other than memory (put-if-absent: the first opener wins).
// A memory folder opened by another backend is taken over: its deltas and
// snapshots are this package's files, which every backend reads.
func (s *Store) checkBackend(ctx context.Context) error {
	want := s.opts.Backend
	have, err := ReadBackend(ctx, s.st)
	if err != nil {
		return err
	}
	switch {
	case have == want:
		return nil
	case have == BackendMemory && want != BackendMemory:
		err := s.st.PutIfAbsent(ctx, backendFileName, []byte(want+"\n"))
		if err == nil {
			return nil
		}
		if !storage.IsExist(err) {
			return fmt.Errorf("statestore: write %s: %w", s.file(backendFileName), err)
		}
		if have, err = ReadBackend(ctx, s.st); err != nil {
			return err
		}
		if have == want {
			return nil
		}
	}
	return &BackendMismatchError{Dir: s.st.URL(), Have: have, Want: want}
}

// Backend returns the backend this Store was opened for (Options.Backend).
func (s *Store) Backend() string { return s.opts.Backend }

// Delta is one version's delta file, read back by ReadDelta.
type Delta struct {
	Upserts []arrow.RecordBatch // Schema()
	Deletes []arrow.RecordBatch // KeySchema()
	Sum     Sum                 // of the file's bytes
}

// Release releases the records.
func (d *Delta) Release() {
	releaseAll(d.Upserts)
	releaseAll(d.Deletes)
	d.Upserts, d.Deletes = nil, nil
}

// ReadDelta reads and checks version's delta file. A missing file is an
// error matching ErrMissing, a damaged one a *CorruptionError. The caller
// releases the Delta.
func (s *Store) ReadDelta(ctx context.Context, version int64) (*Delta, error) {
	name := fileName(version, kindDelta)
	data, err := s.st.Get(ctx, name)
	if err != nil {
		if storage.IsNotExist(err) {
			return nil, fmt.Errorf("statestore: read delta %d: %w", version, &missingError{name: name, dir: s.st.URL()})
		}
		return nil, fmt.Errorf("statestore: read %s: %w", s.file(name), err)
	}
	sum := Sum(sha256.Sum256(data))
	f, err := s.readFile(ctx, version, kindDelta)
	if err != nil {
		return nil, fmt.Errorf("statestore: read delta %d: %w", version, err)
	}
	d := &Delta{Upserts: f.sections[0].recs, Deletes: f.sections[1].recs, Sum: sum}
	return d, nil
}

// DeltaSum returns the Sum of version's delta file, or an error matching
// ErrMissing when the folder has none.
func (s *Store) DeltaSum(ctx context.Context, version int64) (Sum, error) {
	name := fileName(version, kindDelta)
	data, err := s.st.Get(ctx, name)
	if err != nil {
		if storage.IsNotExist(err) {
			return Sum{}, fmt.Errorf("statestore: read delta %d: %w", version, &missingError{name: name, dir: s.st.URL()})
		}
		return Sum{}, fmt.Errorf("statestore: read %s: %w", s.file(name), err)
	}
	return Sum(sha256.Sum256(data)), nil
}

// KeyEncoder writes the key columns of a record's rows in the state's key
// encoding (docs/format/state.md): byte order is key order, and equal keys,
// only they, encode equal. A disk-backed backend uses it as the key of its
// ordered store.
type KeyEncoder struct{ e *keyEncoder }

// NewKeyEncoder returns an encoder of the first n columns of rec, which
// must have the store's key types (as Commit checks).
func NewKeyEncoder(rec arrow.RecordBatch, n int) KeyEncoder {
	return KeyEncoder{newKeyEncoder(rec, n)}
}

// Append appends the encoding of row i's key to dst.
func (k KeyEncoder) Append(dst []byte, i int) []byte { return k.e.encode(dst, i) }

// FormatKey renders row i's key (the first n columns of rec) for a message.
func FormatKey(rec arrow.RecordBatch, n, i int) string { return formatKey(rec, n, i) }

// DiskStore is the state of one (operator, partition) kept by a backend
// that holds the working copy itself (on local disk), so that an operator
// reads only the keys a batch touches instead of loading the whole state.
// It writes the same delta files as Store, which are what make a version
// durable. The engine drives it in this order: Restore(last committed);
// per batch N, Lookup(the batch's keys), Scan (complete output) or an
// IndexedStore's ScanBefore (eviction by the watermark), then Commit(N,
// changes, removals) before the sink sees N; after
// commits/N, Maintain(N) (may run in the background) and Purge(N).
type DiskStore interface {
	// Restore makes the working copy hold version (the last committed; -1
	// is the empty state). Files of later versions are an uncommitted
	// attempt's.
	Restore(ctx context.Context, version int64) error
	// Lookup returns the rows (key then value columns) of the keys in
	// keys (whose first columns are the key columns) that the state holds,
	// in ascending key order.
	Lookup(ctx context.Context, keys arrow.RecordBatch) (arrow.RecordBatch, error)
	// Commit writes version's delta (upserts: key and value columns;
	// deletes: key columns) and applies it. The working copy holds
	// version-1.
	Commit(ctx context.Context, version int64, upserts, deletes arrow.RecordBatch) error
	// Scan calls fn with the rows whose keys are in [lo, hi) in key order;
	// lo and hi are one-row records of the first key columns, nil for no
	// bound.
	Scan(ctx context.Context, lo, hi arrow.RecordBatch, rows int, fn func(arrow.RecordBatch) error) error
	// Load returns every row of version, for inspection.
	Load(ctx context.Context, version int64) ([]arrow.RecordBatch, error)
	// Maintain uploads a snapshot when one is due; committed is committed.
	Maintain(ctx context.Context, committed int64) error
	// Purge deletes the files no retained version needs.
	Purge(ctx context.Context, committed int64) error
	// Close releases the working copy; the folder is untouched.
	Close() error
}

// Backend opens the DiskStores of a query: the engine takes one
// (engine.WithStateStore) and never imports the module that implements it.
type Backend interface {
	// Name is recorded in each folder's backend file.
	Name() string
	// Open opens the folder st of an operator's partition. o carries the
	// schemas and retention, as for Open.
	Open(ctx context.Context, st storage.Store, operator string, partition int, o Options) (DiskStore, error)
}

// Base returns the version a load of version starts from: its newest full
// delta after its newest snapshot (CommitFull), else that snapshot, else
// -1 (the empty state). A disk-backed backend taking over a folder of the
// in-memory backend loads Base and replays the deltas after it: the files
// before it may be purged.
func (s *Store) Base(ctx context.Context, version int64) (int64, error) {
	if version < 0 {
		return -1, nil
	}
	l, err := s.list(ctx)
	if err != nil {
		return 0, err
	}
	base, _, _, err := s.base(ctx, l, version)
	if err != nil {
		return 0, fmt.Errorf("statestore: base of version %d: %w", version, err)
	}
	return base, nil
}

// IndexedStore is a DiskStore that keeps an ordered index on one timestamp
// column of its rows (key or value), so that the rows a watermark expires
// are read in O(those rows) instead of a scan of the whole state: the
// eviction of windows, of a group-by or deduplication keyed by event time,
// and of DropDuplicatesWithinWatermark. The index is a property of the
// working copy, kept by Commit and Restore from the same delta files;
// the folder's files do not change.
type IndexedStore interface {
	DiskStore
	// ScanBefore calls fn with the rows whose indexed column, in Unix ms
	// rounded down, is below boundMs, or null, in ascending time order.
	ScanBefore(ctx context.Context, boundMs int64, rows int, fn func(arrow.RecordBatch) error) error
}

// IndexedBackend is a Backend that opens IndexedStores.
type IndexedBackend interface {
	Backend
	// OpenIndexed opens as Open does, with an index on timeColumn (a
	// timestamp column of o's key or value schema).
	OpenIndexed(ctx context.Context, st storage.Store, operator string, partition int, o Options, timeColumn string) (IndexedStore, error)
}
