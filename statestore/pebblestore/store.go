package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/cockroachdb/pebble/v2"

	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

// Keys of the LSM: 'd' + the state's key encoding for a row, 'm' for the
// working copy's metadata (which version it holds, the Sum of that
// version's delta, and the folder it belongs to).
var (
	metaKey    = []byte("m")
	pendingKey = []byte("p") // a version being applied over the one 'm' names (apply, rebuild)
	dataLower  = []byte("d")
	dataUpper  = []byte("e")
	dataPrefix = byte('d')
)

// applyRows is how many rows go into one pebble batch when a delta is
// applied: a large delta becomes several batches, so that a crash between
// them leaves part of version N over version N-1. The first batch writes
// 'p' (pendingKey) and the last deletes it with the version recorded: a
// copy that holds 'p' is not version N-1 (N may never be committed, and
// the re-run of its batch would read part of N as N-1), so openLocal
// does not reuse it.
const applyRows = 64 << 10

// Store is the state of one (operator, partition) on the pebble backend.
// Its methods are safe for concurrent use within the limits doc.go states.
type Store struct {
	meta      *statestore.Store
	st        storage.Store
	opts      Options
	schema    *arrow.Schema
	keySchema *arrow.Schema
	nkeys     int
	idx       timeIndex // Options.TimeIndex (index.go)
	cache     *pebble.Cache
	ownCache  bool

	// mu guards the working copy; commits, lookups and restores hold it,
	// and Maintain holds it while it flushes and links the files it
	// uploads.
	mu struct {
		sync.Mutex
		db      *pebble.DB
		version int64 // applied to db; meaningful when db != nil
		sum     statestore.Sum
	}
	// up serializes uploads, purges and restores' cleanup of the folder's
	// snapshot files. Taken before mu when both are held.
	up struct {
		sync.Mutex
		uploaded   map[string]bool // content-addressed objects known in the folder; nil until listed
		lastUpload int64           // newest manifest's version; valid when known
		known      bool
		collected  bool // an SST collection ran since Open
		stats      UploadStats
		seq        int
	}
}

var _ statestore.DiskStore = (*Store)(nil)

// Open opens the state folder st (one operator and partition) with the
// pebble backend. Like statestore.Open it records the schemas on first use
// and refuses other schemas (*statestore.SchemaMismatchError). A folder of
// the in-memory backend is taken over, a migration: its snapshot and
// deltas are read by the first Restore, and the folder is marked as this
// backend's, which the in-memory backend then refuses
// (*statestore.BackendMismatchError). The working copy is not opened until
// Restore.
func Open(ctx context.Context, st storage.Store, o Options) (*Store, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	meta, err := statestore.Open(ctx, st, o.State)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("pebblestore: create working directory %s: %w", o.Dir, err)
	}
	idx, err := bindTimeIndex(o.TimeIndex, meta.Schema())
	if err != nil {
		return nil, err
	}
	s := &Store{
		idx:       idx,
		meta:      meta,
		st:        st,
		opts:      o,
		schema:    meta.Schema(),
		keySchema: meta.KeySchema(),
		nkeys:     meta.KeySchema().NumFields(),
		cache:     o.Cache,
	}
	if s.cache == nil {
		s.cache, s.ownCache = pebble.NewCache(8<<20), true
	}
	return s, nil
}

// Schema returns the schema of the rows Lookup, Scan and Load return and
// Commit takes as upserts: the key columns, then the value columns.
func (s *Store) Schema() *arrow.Schema { return s.schema }

// KeySchema returns the schema of the key columns.
func (s *Store) KeySchema() *arrow.Schema { return s.keySchema }

// URL returns where the state folder lives, for messages.
func (s *Store) URL() string { return s.st.URL() }

// Version returns the version the working copy holds, or -2 before the
// first Restore.
func (s *Store) Version() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.db == nil {
		return -2
	}
	return s.mu.version
}

func (s *Store) dbDir() string { return filepath.Join(s.opts.Dir, "db") }

// quietLogger drops pebble's informational messages; its background
// errors surface in the calls that meet them.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebblestore: pebble: "+format, args...))
}

func (s *Store) pebbleOptions() *pebble.Options {
	o := &pebble.Options{
		DisableWAL:                  true, // the delta files are the log
		Cache:                       s.cache,
		MemTableSize:                uint64(s.opts.MemTableSize),
		MemTableStopWritesThreshold: 2,
		Logger:                      quietLogger{},
	}
	size := int64(2 << 20)
	for i := range o.TargetFileSizes {
		o.TargetFileSizes[i] = min(size, s.opts.MaxSSTableSize)
		size *= 2
	}
	// No bloom filters: Lookup seeks its sorted keys with SeekGE, and
	// pebble continues each seek from the previous position
	// (TrySeekUsingNext) when the keys are dense. Filters on L0–L5 with
	// SeekPrefixGE cost 2.3× the CPU per row of agg-int64 on this
	// backend (4M rows over 1M merchants; see the README).
	return o
}

// openDB opens (or creates) the LSM in dir and reads its metadata: the
// version it holds (-1 for a new one) and that version's delta Sum.
func (s *Store) openDB(dir string) (db *pebble.DB, version int64, sum statestore.Sum, folder string, err error) {
	db, err = pebble.Open(dir, s.pebbleOptions())
	if err != nil {
		return nil, 0, sum, "", fmt.Errorf("pebblestore: open working copy %s: %w", dir, err)
	}
	val, closer, err := db.Get(metaKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return db, -1, sum, "", nil
	}
	if err != nil {
		return nil, 0, sum, "", errors.Join(fmt.Errorf("pebblestore: read %s's metadata: %w", dir, err), db.Close())
	}
	defer closer.Close()
	if len(val) < 8+len(sum) {
		return nil, 0, sum, "", errors.Join(fmt.Errorf("pebblestore: %s's metadata has %d bytes, want at least %d", dir, len(val), 8+len(sum)), db.Close())
	}
	version = int64(binary.BigEndian.Uint64(val))
	copy(sum[:], val[8:])
	return db, version, sum, string(val[8+len(sum):]), nil
}

func (s *Store) metaValue(version int64, sum statestore.Sum) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(version))
	b = append(b, sum[:]...)
	return append(b, s.st.URL()...)
}

// Restore makes the working copy hold version target, the last committed
// version (-1: the empty state), as the engine's startup does: the local
// copy when it holds target or an earlier version of this folder, else the
// newest uploaded snapshot at or before target; then the deltas after it.
// Snapshot manifests of versions after target are an uncommitted attempt's
// and are deleted: the versions will be committed again.
func (s *Store) Restore(ctx context.Context, target int64) error {
	if target < -1 {
		return fmt.Errorf("pebblestore: restore version %d: versions start at -1 (the empty state)", target)
	}
	s.up.Lock()
	defer s.up.Unlock()
	if err := s.dropManifestsAfter(ctx, target); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.restoreLocked(ctx, target, s.dbDir()); err != nil {
		return fmt.Errorf("pebblestore: restore version %d of %s: %w", target, s.st.URL(), err)
	}
	return nil
}

// restoreLocked positions the working copy in dir at target; s.mu is held.
func (s *Store) restoreLocked(ctx context.Context, target int64, dir string) error {
	if db := s.mu.db; db != nil && s.mu.version > target {
		s.mu.db = nil
		if err := db.Close(); err != nil {
			return fmt.Errorf("close working copy %s: %w", dir, err)
		}
	}
	if s.mu.db == nil {
		if err := s.openLocal(ctx, target, dir); err != nil {
			return err
		}
	}
	if s.mu.db == nil {
		if err := s.rebuild(ctx, target, dir); err != nil {
			return err
		}
	}
	if err := s.checkIndex(ctx); err != nil {
		return err
	}
	return s.replay(ctx, target)
}

// openLocal opens the local copy in dir when it is usable for target: of
// this folder, at target or before, and holding the delta the folder has
// for its version (not one a crashed attempt wrote and a re-run replaced).
// Otherwise it deletes it.
func (s *Store) openLocal(ctx context.Context, target int64, dir string) error {
	// pebble v2 names its current manifest by a marker file (no CURRENT).
	if m, _ := filepath.Glob(filepath.Join(dir, "marker.manifest.*")); len(m) == 0 {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("remove %s: %w", dir, err)
		}
		return nil
	}
	db, v, sum, folder, err := s.openDB(dir)
	if err != nil {
		// An unreadable cache is rebuilt, not a failure.
		if rerr := os.RemoveAll(dir); rerr != nil {
			return errors.Join(err, rerr)
		}
		return nil
	}
	// An empty copy (version -1) serves only the empty state: for a later
	// target the deltas from 0 on may be purged, and the newest snapshot
	// is the cheaper start anyway.
	ok := v <= target && (v >= 0 && folder == s.st.URL() || v == -1 && target == -1)
	if _, closer, err := db.Get(pendingKey); err == nil {
		closer.Close()
		ok = false // part of a version was applied over v: not v
	} else if !errors.Is(err, pebble.ErrNotFound) {
		ok = false
	}
	if ok && v >= 0 {
		have, err := s.meta.DeltaSum(ctx, v)
		if err != nil && !errors.Is(err, statestore.ErrMissing) {
			return errors.Join(err, db.Close())
		}
		ok = err == nil && have == sum
	}
	if !ok {
		if err := db.Close(); err != nil {
			return err
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("remove %s: %w", dir, err)
		}
		return nil
	}
	s.mu.db, s.mu.version, s.mu.sum = db, v, sum
	return nil
}

// replay applies the deltas after the working copy's version up to target.
func (s *Store) replay(ctx context.Context, target int64) error {
	for v := s.mu.version + 1; v <= target; v++ {
		d, err := s.meta.ReadDelta(ctx, v)
		if err != nil {
			return err
		}
		err = s.apply(ctx, v, d.Sum, d.Upserts, d.Deletes)
		d.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// apply writes one version's changes into the working copy, and records
// the version last.
func (s *Store) apply(ctx context.Context, version int64, sum statestore.Sum, upserts, deletes []arrow.RecordBatch) error {
	db := s.mu.db
	newBatch := func() *pebble.Batch { return db.NewBatch() }
	if s.idx.col >= s.nkeys {
		newBatch = db.NewIndexedBatch // the index reads a row's previous time
	}
	b := newBatch()
	defer func() { b.Close() }()
	if err := b.Set(pendingKey, binary.BigEndian.AppendUint64(nil, uint64(version)), nil); err != nil {
		return err
	}
	rows := 0
	flush := func() error {
		if err := db.Apply(b, pebble.NoSync); err != nil {
			return fmt.Errorf("apply version %d to the working copy: %w", version, err)
		}
		b.Close()
		b = newBatch()
		rows = 0
		return ctx.Err()
	}
	iw := &indexWriter{s: s}
	var key, val []byte
	for _, r := range upserts {
		ke := statestore.NewKeyEncoder(r, s.nkeys)
		re := newRowEncoder(r)
		for i := 0; i < int(r.NumRows()); i++ {
			key = ke.Append(append(key[:0], dataPrefix), i)
			val = re.encode(val[:0], i)
			if s.idx.col >= 0 {
				if err := iw.upsert(b, r, i, key); err != nil {
					return err
				}
			}
			if err := b.Set(key, val, nil); err != nil {
				return err
			}
			if rows++; rows == applyRows {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	for _, r := range deletes {
		ke := statestore.NewKeyEncoder(r, s.nkeys)
		for i := 0; i < int(r.NumRows()); i++ {
			key = ke.Append(append(key[:0], dataPrefix), i)
			if s.idx.col >= 0 {
				if err := iw.remove(b, r, i, key); err != nil {
					return err
				}
			}
			if err := b.Delete(key, nil); err != nil {
				return err
			}
			if rows++; rows == applyRows {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if err := b.Set(indexSpecKey, s.indexSpecValue(version), nil); err != nil {
		return err
	}
	if err := b.Set(metaKey, s.metaValue(version, sum), nil); err != nil {
		return err
	}
	if err := b.Delete(pendingKey, nil); err != nil {
		return err
	}
	if err := db.Apply(b, pebble.NoSync); err != nil {
		return fmt.Errorf("apply version %d to the working copy: %w", version, err)
	}
	s.mu.version, s.mu.sum = version, sum
	return nil
}

// Commit writes version's delta (statestore's format: this is what makes
// the version durable) and then applies the changes to the working copy.
// upserts has Schema(), deletes KeySchema(); either may be nil. Its cost
// depends on the changed rows only. The working copy must hold version-1
// (Restore, then one Commit per version); a re-run of a batch after a
// crash is a Restore of the version before it, then its Commit.
func (s *Store) Commit(ctx context.Context, version int64, upserts, deletes arrow.RecordBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.db == nil {
		return fmt.Errorf("pebblestore: commit version %d of %s: the working copy is not restored (call Restore first)", version, s.st.URL())
	}
	if version != s.mu.version+1 {
		return fmt.Errorf("pebblestore: commit version %d of %s: the working copy holds version %d; commit %d, or Restore(%d) to re-run version %d", version, s.st.URL(), s.mu.version, s.mu.version+1, version-1, version)
	}
	sum, err := s.meta.CommitSum(ctx, version, upserts, deletes)
	if err != nil {
		return err
	}
	var ups, dels []arrow.RecordBatch
	if upserts != nil && upserts.NumRows() > 0 {
		ups = []arrow.RecordBatch{upserts}
	}
	if deletes != nil && deletes.NumRows() > 0 {
		dels = []arrow.RecordBatch{deletes}
	}
	if err := s.apply(ctx, version, sum, ups, dels); err != nil {
		// The delta is durable; the working copy may hold part of it
		// (and 'p'). Close it: the next Restore rebuilds it.
		db := s.mu.db
		s.mu.db = nil
		return fmt.Errorf("pebblestore: commit version %d of %s: %w", version, s.st.URL(), errors.Join(err, db.Close()))
	}
	return nil
}

// Lookup returns the rows (Schema()) of the keys in keys that the working
// copy holds, in ascending key order, each once. keys' first columns are
// the key columns (KeySchema's types); later columns are ignored. The
// keys are sorted before the LSM is read, so the reads walk it forward.
func (s *Store) Lookup(ctx context.Context, keys arrow.RecordBatch) (arrow.RecordBatch, error) {
	if err := s.checkKeys("lookup", keys, s.nkeys); err != nil {
		return nil, err
	}
	refs, arena := sortedKeys(keys, s.nkeys)
	key := func(r keyRef) []byte { return arena[r.off:r.end] }

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.db == nil {
		return nil, fmt.Errorf("pebblestore: lookup in %s: the working copy is not restored (call Restore first)", s.st.URL())
	}
	it, err := s.mu.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: dataLower, UpperBound: dataUpper})
	if err != nil {
		return nil, fmt.Errorf("pebblestore: lookup in %s: %w", s.st.URL(), err)
	}
	dec := newRowDecoder(s.schema)
	var prev []byte
	for j, r := range refs {
		k := key(r)
		if j > 0 && bytes.Equal(k, prev) {
			continue
		}
		prev = k
		if it.SeekGE(k) && bytes.Equal(it.Key(), k) {
			if err := dec.add(it.Value()); err != nil {
				return nil, errors.Join(s.corrupt(keys, int(r.row), err), it.Close())
			}
		}
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("pebblestore: lookup in %s: %w", s.st.URL(), err)
	}
	return dec.record(), nil
}

// keyRef is one row's LSM key in an arena: arena[off:end]. head is the
// key's first 8 bytes after the prefix byte, big endian (zero-padded), so
// that most comparisons while sorting are one integer comparison.
type keyRef struct {
	head     uint64
	off, end uint32
	row      int32
}

// sortedKeys encodes the LSM keys of keys' rows (the first n columns) into
// one arena and returns their references sorted by key (equal keys
// adjacent): one allocation for the keys and one for the references,
// whatever the number of rows.
func sortedKeys(keys arrow.RecordBatch, n int) ([]keyRef, []byte) {
	rows := int(keys.NumRows())
	enc := statestore.NewKeyEncoder(keys, n)
	refs := make([]keyRef, rows)
	var arena []byte
	for i := range rows {
		off := len(arena)
		if i == 1 {
			// Size the arena by the first key (exact for fixed-width keys).
			arena = slices.Grow(arena, (len(arena)+1)*rows)
		}
		arena = enc.Append(append(arena, dataPrefix), i)
		var h [8]byte
		copy(h[:], arena[off+1:])
		refs[i] = keyRef{head: binary.BigEndian.Uint64(h[:]), off: uint32(off), end: uint32(len(arena)), row: int32(i)}
	}
	slices.SortFunc(refs, func(a, b keyRef) int {
		if a.head != b.head {
			if a.head < b.head {
				return -1
			}
			return 1
		}
		return bytes.Compare(arena[a.off:a.end], arena[b.off:b.end])
	})
	return refs, arena
}

func (s *Store) corrupt(keys arrow.RecordBatch, i int, err error) error {
	return fmt.Errorf("pebblestore: working copy %s: the row of key %s does not decode (%w); delete the directory to restore it from %s", s.dbDir(), statestore.FormatKey(keys, s.nkeys, i), err, s.st.URL())
}

// checkKeys checks that rec's first n columns have the types of the first
// n key columns.
func (s *Store) checkKeys(op string, rec arrow.RecordBatch, n int) error {
	if int(rec.NumCols()) < n {
		return fmt.Errorf("pebblestore: %s in %s: the keys have %d columns, want %d (%s)", op, s.st.URL(), rec.NumCols(), n, s.keySchema)
	}
	for c := 0; c < n; c++ {
		if got, want := rec.Schema().Field(c).Type, s.keySchema.Field(c).Type; !arrow.TypeEqual(got, want) {
			return fmt.Errorf("pebblestore: %s in %s: key column %d is %s, want %s (%q)", op, s.st.URL(), c, got, want, s.keySchema.Field(c).Name)
		}
	}
	return nil
}

// Scan calls fn with the rows (Schema()) whose keys are in [lo, hi), in
// ascending key order, at most rows rows per record (default 64Ki). lo and
// hi are one-row records of the first m key columns (a prefix of the key:
// m may be less than the key's columns); nil is unbounded. For example,
// with keys (window_start, user), hi = (watermark) scans every window that
// starts before the watermark. fn must not keep the record past its
// return without Retain.
func (s *Store) Scan(ctx context.Context, lo, hi arrow.RecordBatch, rows int, fn func(arrow.RecordBatch) error) error {
	if rows <= 0 {
		rows = 64 << 10
	}
	io := &pebble.IterOptions{LowerBound: dataLower, UpperBound: dataUpper}
	for _, b := range []struct {
		rec   arrow.RecordBatch
		bound *[]byte
	}{{lo, &io.LowerBound}, {hi, &io.UpperBound}} {
		if b.rec == nil {
			continue
		}
		if b.rec.NumRows() != 1 || b.rec.NumCols() == 0 || int(b.rec.NumCols()) > s.nkeys {
			return fmt.Errorf("pebblestore: scan of %s: a bound is one row of the first key columns; got %d rows of %d columns", s.st.URL(), b.rec.NumRows(), b.rec.NumCols())
		}
		if err := s.checkKeys("scan", b.rec, int(b.rec.NumCols())); err != nil {
			return err
		}
		*b.bound = statestore.NewKeyEncoder(b.rec, int(b.rec.NumCols())).Append([]byte{dataPrefix}, 0)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.db == nil {
		return fmt.Errorf("pebblestore: scan of %s: the working copy is not restored (call Restore first)", s.st.URL())
	}
	return s.scanLocked(ctx, io, rows, fn)
}

func (s *Store) scanLocked(ctx context.Context, io *pebble.IterOptions, rows int, fn func(arrow.RecordBatch) error) (err error) {
	it, err := s.mu.db.NewIterWithContext(ctx, io)
	if err != nil {
		return fmt.Errorf("pebblestore: scan of %s: %w", s.st.URL(), err)
	}
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("pebblestore: scan of %s: %w", s.st.URL(), cerr)
		}
	}()
	dec := newRowDecoder(s.schema)
	emit := func() error {
		rec := dec.record()
		defer rec.Release()
		return fn(rec)
	}
	for ok := it.First(); ok; ok = it.Next() {
		if err := dec.add(it.Value()); err != nil {
			return fmt.Errorf("pebblestore: working copy %s: key %x does not decode (%w); delete the directory to restore it from %s", s.dbDir(), it.Key()[1:], err, s.st.URL())
		}
		if dec.n == rows {
			if err := emit(); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	if dec.n > 0 {
		return emit()
	}
	return nil
}

// Load returns every row of version (-1: the empty state) in ascending key
// order, for inspection: from the working copy when it holds version, else
// from a restore into a temporary directory under Dir. It reads the whole
// state into memory. The caller releases the records.
func (s *Store) Load(ctx context.Context, version int64) ([]arrow.RecordBatch, error) {
	if version < -1 {
		return nil, fmt.Errorf("pebblestore: load version %d: versions start at -1 (the empty state)", version)
	}
	if version == -1 {
		return nil, nil
	}
	var out []arrow.RecordBatch
	collect := func(r arrow.RecordBatch) error {
		r.Retain()
		out = append(out, r)
		return nil
	}
	s.mu.Lock()
	if s.mu.db != nil && s.mu.version == version {
		err := s.scanLocked(ctx, &pebble.IterOptions{LowerBound: dataLower, UpperBound: dataUpper}, 0, collect)
		s.mu.Unlock()
		if err != nil {
			releaseAll(out)
			return nil, err
		}
		return out, nil
	}
	s.mu.Unlock()
	tmp, err := os.MkdirTemp(s.opts.Dir, "load-")
	if err != nil {
		return nil, fmt.Errorf("pebblestore: load version %d: %w", version, err)
	}
	defer os.RemoveAll(tmp)
	o := s.opts
	o.Dir, o.Cache = tmp, s.cache
	t := &Store{meta: s.meta, st: s.st, opts: o, schema: s.schema, keySchema: s.keySchema, nkeys: s.nkeys, idx: s.idx, cache: s.cache}
	t.mu.Lock()
	err = t.restoreLocked(ctx, version, t.dbDir())
	if err == nil {
		err = t.scanLocked(ctx, &pebble.IterOptions{LowerBound: dataLower, UpperBound: dataUpper}, 0, collect)
	}
	if t.mu.db != nil {
		err = errors.Join(err, t.mu.db.Close())
	}
	t.mu.Unlock()
	if err != nil {
		releaseAll(out)
		return nil, fmt.Errorf("pebblestore: load version %d of %s: %w", version, s.st.URL(), err)
	}
	return out, nil
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// Close flushes the working copy (so that the next Restore on this
// machine replays nothing) and closes it. The folder is untouched.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if db := s.mu.db; db != nil {
		s.mu.db = nil
		err = errors.Join(db.Flush(), db.Close())
		if err != nil {
			err = fmt.Errorf("pebblestore: close working copy %s: %w", s.dbDir(), err)
		}
	}
	if s.ownCache {
		s.cache.Unref()
		s.ownCache = false
	}
	return err
}
