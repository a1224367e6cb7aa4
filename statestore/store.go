package statestore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/storage"
)

// Store is the versioned state of one (operator, partition). It holds no
// mutable state but a few spare encoding buffers, a cache of which deltas
// are full and the Maintain passes in flight: every method reads the
// folder afresh, so it is safe for concurrent use within the limits doc.go
// states.
type Store struct {
	st        storage.Store
	opts      Options
	keySchema *arrow.Schema
	valSchema *arrow.Schema
	rowSchema *arrow.Schema // Join(key, value)
	nkeys     int
	mem       memory.Allocator

	snapshotRows int // rows per record batch in a snapshot; tests shrink it
	concatRun    int // see chunker; tests change it to take both ways

	// spare holds encoding buffers of earlier commits. A delta is about
	// as large from one batch to the next; reusing its buffer spares the
	// allocation and the page faults of fresh memory on every commit.
	spare chan []byte

	// full remembers which deltas are full (flagFull), by version, as
	// Commit wrote them or a read found them, so that Maintain and Purge
	// find the newest full delta without reading files. It is a cache of
	// what the files say: a committed delta is not rewritten, and a
	// re-commit of the newest version updates its entry.
	full *fullCache
}

// fullCache is Store.full. It also keeps the versions of the Maintain
// passes in flight, which Purge leaves their files to: a full delta lets a
// purge drop the deltas just before a newer version, which a lagging
// snapshot pass may be reading.
type fullCache struct {
	mu       sync.Mutex
	m        map[int64]bool
	maintain map[int64]int // version → passes in flight

	// purgeMu orders a Maintain's registration against a whole Purge:
	// a pass registered before a Purge lists is honoured by it, one
	// registered after lists the folder after the deletes.
	purgeMu sync.Mutex
}

// beginMaintain registers a pass over version; the returned func ends it.
func (c *fullCache) beginMaintain(version int64) func() {
	c.purgeMu.Lock()
	c.mu.Lock()
	c.maintain[version]++
	c.mu.Unlock()
	c.purgeMu.Unlock()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.maintain[version]--; c.maintain[version] == 0 {
			delete(c.maintain, version)
		}
	}
}

// oldestMaintained returns the oldest version a pass in flight reads, or
// v when none is older.
func (c *fullCache) oldestMaintained(v int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	for m := range c.maintain {
		v = min(v, m)
	}
	return v
}

// Spare buffers: how many a Store keeps, and the largest it keeps.
const (
	spareBuffers   = 2
	spareBufferMax = 16 << 20
)

// buffer returns a spare encoding buffer, or nil.
func (s *Store) buffer() []byte {
	select {
	case b := <-s.spare:
		return b
	default:
		return nil
	}
}

// recycle keeps b for a later commit unless it is too large or enough are
// kept. Only a buffer whose Put succeeded comes back: the store is done
// with it.
func (s *Store) recycle(b []byte) {
	if cap(b) > spareBufferMax {
		return
	}
	select {
	case s.spare <- b:
	default:
	}
}

// Info summarizes a state folder.
type Info struct {
	NewestVersion  int64 // newest version with a delta or snapshot file; -1 when none
	NewestSnapshot int64 // newest version with a snapshot file; -1 when none
	Files          int   // objects in the folder (schema, deltas, snapshots, others)
	Bytes          int64 // their total size
}

// Open opens the state kept in st (the folder of one operator and
// partition). The first Open records the schemas in the folder's schema
// file; a later Open with other schemas fails with a *SchemaMismatchError
// and writes nothing.
func Open(ctx context.Context, st storage.Store, o Options) (*Store, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s := &Store{
		st:        st,
		opts:      o,
		keySchema: o.KeySchema,
		valSchema: o.ValueSchema,
		rowSchema: Join(o.KeySchema, o.ValueSchema),
		nkeys:     o.KeySchema.NumFields(),
		mem:       o.Allocator,

		snapshotRows: chunkRows,
		concatRun:    concatRun,
		spare:        make(chan []byte, spareBuffers),
		full:         &fullCache{m: map[int64]bool{}, maintain: map[int64]int{}},
	}
	if err := s.checkSchemaFile(ctx); err != nil {
		return nil, err
	}
	if err := s.checkBackend(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// KeySchema returns the schema of the key columns.
func (s *Store) KeySchema() *arrow.Schema { return s.keySchema }

// ValueSchema returns the schema of the value columns.
func (s *Store) ValueSchema() *arrow.Schema { return s.valSchema }

// Schema returns the schema of the rows Load returns and Commit takes as
// upserts: Join(KeySchema, ValueSchema).
func (s *Store) Schema() *arrow.Schema { return s.rowSchema }

// URL returns where the state folder lives, for messages.
func (s *Store) URL() string { return s.st.URL() }

func (s *Store) file(name string) string { return s.st.URL() + "/" + name }

func (s *Store) checkSchemaFile(ctx context.Context) error {
	data, err := s.st.Get(ctx, schemaFileName)
	if storage.IsNotExist(err) {
		mine, eerr := encodeFile(kindSchema, 0, []section{{schema: s.keySchema}, {schema: s.valSchema}}, s.mem)
		if eerr != nil {
			return fmt.Errorf("statestore: encode schema file: %w", eerr)
		}
		err = s.st.PutIfAbsent(ctx, schemaFileName, mine)
		if err == nil {
			return nil
		}
		if !storage.IsExist(err) {
			return fmt.Errorf("statestore: write %s: %w", s.file(schemaFileName), err)
		}
		data, err = s.st.Get(ctx, schemaFileName) // another opener won the race
	}
	if err != nil {
		return fmt.Errorf("statestore: read %s: %w", s.file(schemaFileName), err)
	}
	oldKey, oldVal, err := decodeSchemas(s.file(schemaFileName), data, s.mem)
	if err != nil {
		return err
	}
	keyDiff := !schemasMatch(oldKey, s.keySchema)
	valDiff := !schemasMatch(oldVal, s.valSchema)
	if keyDiff || valDiff {
		return &SchemaMismatchError{
			Dir:    s.st.URL(),
			OldKey: schemaString(oldKey), OldValue: schemaString(oldVal),
			NewKey: schemaString(s.keySchema), NewValue: schemaString(s.valSchema),
			KeyDiff: keyDiff, ValueDiff: valDiff,
		}
	}
	return nil
}

// schemaString renders a schema on one line: {a: int64, b: utf8 (nullable)}.
func schemaString(sc *arrow.Schema) string {
	out := "{"
	for i, f := range sc.Fields() {
		if i > 0 {
			out += ", "
		}
		out += f.Name + ": " + f.Type.String()
		if f.Nullable {
			out += " (nullable)"
		}
	}
	return out + "}"
}

// Commit writes version's delta: upserts holds the key and value columns
// (Schema()) of the rows batch version changed, deletes the key columns
// (KeySchema()) of the rows it removed. Either may be nil. A key may appear
// at most once across both. A delta a crashed earlier attempt left for
// version is replaced. Commit writes one file and reads none: its cost
// depends on the changed rows only.
//
// The caller commits versions in order (0, 1, 2, …, each after the one
// before it is durable) and re-commits only the newest version, the one
// whose batch is being re-run; nothing checks this, as that would need a
// listing per commit.
func (s *Store) Commit(ctx context.Context, version int64, upserts, deletes arrow.RecordBatch) error {
	_, err := s.commit(ctx, version, upserts, deletes, 0, false)
	return err
}

// CommitFull is Commit of a version whose every live row is in rows (the
// caller knows: every group of the state changed in this batch, none was
// removed). It writes a delta marked full: Load of this version or a later
// one starts from it instead of the snapshot before it, Maintain counts it
// as a snapshot (no snapshot is written while every version is full), and
// Purge drops what comes before it. Its cost is Commit's: one file, sized
// by rows. A later re-commit of the version with Commit replaces it with
// an ordinary delta.
//
// rows must hold every live row: a key of the previous version missing
// from rows would be lost, not kept. Nothing checks this, as that would
// need the previous version.
func (s *Store) CommitFull(ctx context.Context, version int64, rows arrow.RecordBatch) error {
	_, err := s.commit(ctx, version, rows, nil, flagFull, false)
	return err
}

// CommitSum is Commit that also returns the SHA-256 of the delta file it
// wrote, which identifies this attempt's delta: a disk-backed backend
// records it beside what it applied, to tell later whether its working
// copy holds this delta or one a re-run replaced (DeltaSum).
func (s *Store) CommitSum(ctx context.Context, version int64, upserts, deletes arrow.RecordBatch) (Sum, error) {
	return s.commit(ctx, version, upserts, deletes, 0, true)
}

// commit writes version's delta with flags, and returns its Sum when
// wantSum (SHA-256 of the file costs about a tenth of a commit's CPU, so
// only a backend that records it pays for it).
func (s *Store) commit(ctx context.Context, version int64, upserts, deletes arrow.RecordBatch, flags byte, wantSum bool) (Sum, error) {
	name := fileName(version, kindDelta)
	if version < 0 {
		return Sum{}, fmt.Errorf("statestore: commit version %d: versions start at 0", version)
	}
	var ups, dels []arrow.RecordBatch
	defer func() {
		for _, r := range append(ups, dels...) {
			r.Release()
		}
	}()
	if upserts != nil {
		if !schemasMatch(s.rowSchema, upserts.Schema()) {
			return Sum{}, fmt.Errorf("statestore: commit version %d: upserts have schema %s, the store takes %s", version, schemaString(upserts.Schema()), schemaString(s.rowSchema))
		}
		if upserts.NumRows() > 0 {
			ups = append(ups, recast(s.rowSchema, upserts))
		}
	}
	if deletes != nil {
		if !schemasMatch(s.keySchema, deletes.Schema()) {
			return Sum{}, fmt.Errorf("statestore: commit version %d: deletes have schema %s, the store's keys are %s", version, schemaString(deletes.Schema()), schemaString(s.keySchema))
		}
		if deletes.NumRows() > 0 {
			dels = append(dels, recast(s.keySchema, deletes))
		}
	}
	if len(dels) > 0 || !s.opts.UniqueUpserts {
		if err := s.checkUniqueKeys(ups, dels); err != nil {
			return Sum{}, fmt.Errorf("statestore: commit version %d: %w", version, err)
		}
	}
	data, err := encodeFileTo(s.buffer(), kindDelta, version, flags, []section{{schema: s.rowSchema, recs: ups}, {schema: s.keySchema, recs: dels}}, s.mem)
	if err != nil {
		return Sum{}, fmt.Errorf("statestore: commit version %d: %w", version, err)
	}
	// Until the Put is known to have succeeded, the file may be the old
	// delta or this one: forget what the cache said.
	s.setFull(version, false, false)
	if err := s.st.Put(ctx, name, data); err != nil {
		return Sum{}, fmt.Errorf("statestore: commit version %d: write %s: %w", version, name, err)
	}
	s.setFull(version, flags&flagFull != 0, true)
	var sum Sum
	if wantSum {
		sum = Sum(sha256.Sum256(data))
	}
	s.recycle(data)
	return sum, nil
}

// setFull records (known) or forgets (!known) whether version's delta is
// full.
func (s *Store) setFull(version int64, full, known bool) {
	s.full.mu.Lock()
	defer s.full.mu.Unlock()
	if !known {
		delete(s.full.m, version)
		return
	}
	s.full.m[version] = full
}

// forgetFullBefore drops the cache entries of versions before v (purged).
func (s *Store) forgetFullBefore(v int64) {
	s.full.mu.Lock()
	defer s.full.mu.Unlock()
	for k := range s.full.m {
		if k < v {
			delete(s.full.m, k)
		}
	}
}

// isFull reports whether version's delta is full, from the cache or else
// by reading the file (once: the answer is cached). A file that cannot be
// read or decoded counts as not full here; the load that needs it reports
// the damage.
func (s *Store) isFull(ctx context.Context, version int64) (bool, error) {
	s.full.mu.Lock()
	full, ok := s.full.m[version]
	s.full.mu.Unlock()
	if ok {
		return full, nil
	}
	f, err := s.readFile(ctx, version, kindDelta)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, nil
	}
	full = f.full
	f.release()
	s.setFull(version, full, true)
	return full, nil
}

// base returns the version a load of version starts from: the newest full
// delta after the newest snapshot at or before version, else that snapshot
// (-1: the empty state), and whether it is a full delta. A delta missing
// from the listing ends the search (broken: the load will report it).
func (s *Store) base(ctx context.Context, l *listing, version int64) (base int64, full, broken bool, err error) {
	snap := l.snapshotAtOrBefore(version)
	for v := version; v > snap; v-- {
		if !l.deltas[v] {
			return snap, false, true, nil
		}
		full, err := s.isFull(ctx, v)
		if err != nil {
			return 0, false, false, err
		}
		if full {
			return v, true, false, nil
		}
	}
	return snap, false, false, nil
}

// purgedPast reports whether the listing holds a base newer than version
// (a snapshot, or a delta this Store committed full): a Purge may then have
// dropped version's files, and a snapshot of it is of no use.
func (s *Store) purgedPast(l *listing, version int64) bool {
	if n := len(l.snapshots); n > 0 && l.snapshots[n-1] > version {
		return true
	}
	s.full.mu.Lock()
	defer s.full.mu.Unlock()
	for v, full := range s.full.m {
		if full && v > version && l.deltas[v] {
			return true
		}
	}
	return false
}

// checkUniqueKeys fails when a key appears twice among the upserts and
// deletes of one commit: the operator's intent would be ambiguous.
func (s *Store) checkUniqueKeys(ups, dels []arrow.RecordBatch) error {
	n := 0
	for _, r := range append(slices.Clip(ups), dels...) {
		n += int(r.NumRows())
	}
	seen := make(map[string]string, n) // key → "upserts" or "deletes"
	var buf []byte
	for part, recs := range [][]arrow.RecordBatch{ups, dels} {
		where := "upserts"
		if part == 1 {
			where = "deletes"
		}
		for _, r := range recs {
			enc := newKeyEncoder(r, s.nkeys)
			for i := 0; i < int(r.NumRows()); i++ {
				buf = enc.encode(buf[:0], i)
				if prev, dup := seen[string(buf)]; dup {
					return fmt.Errorf("key %s appears in %s and again in %s (row %d); a commit holds each changed key once", formatKey(r, s.nkeys, i), prev, where, i)
				}
				seen[string(buf)] = where
			}
		}
	}
	return nil
}

// listing is the parsed content of the folder.
type listing struct {
	deltas    map[int64]bool
	sizes     map[string]int64 // bytes of each delta and snapshot file, by name
	snapshots []int64          // ascending
	deltaList []int64          // ascending
	files     int
	bytes     int64
}

func (s *Store) list(ctx context.Context) (*listing, error) {
	infos, err := s.st.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("statestore: list %s: %w", s.st.URL(), err)
	}
	l := &listing{deltas: map[int64]bool{}, sizes: map[string]int64{}}
	for _, in := range infos {
		l.files++
		l.bytes += in.Size
		v, k, ok := parseFileName(in.Name)
		if !ok {
			continue
		}
		l.sizes[in.Name] = in.Size
		switch k {
		case kindDelta:
			l.deltas[v] = true
			l.deltaList = append(l.deltaList, v)
		case kindSnapshot:
			l.snapshots = append(l.snapshots, v)
		}
	}
	slices.Sort(l.snapshots)
	slices.Sort(l.deltaList)
	return l, nil
}

// purgedHint explains a missing file when version is older than anything
// the folder still loads (purged), or newer than anything it holds.
func (l *listing) purgedHint(version int64) string {
	oldest := int64(-1) // oldest loadable version: a snapshot, or delta 0's
	if len(l.snapshots) > 0 {
		oldest = l.snapshots[0]
	}
	if l.deltas[0] {
		oldest = 0
	}
	newest := int64(-1)
	if n := len(l.deltaList); n > 0 {
		newest = l.deltaList[n-1]
	}
	switch {
	case oldest > version:
		return fmt.Sprintf("version %d is older than the oldest kept (%d): purged", version, oldest)
	case version > newest:
		return fmt.Sprintf("version %d is newer than the newest committed (%d)", version, newest)
	}
	return ""
}

// snapshotAtOrBefore returns the newest snapshot version <= v, or -1.
func (l *listing) snapshotAtOrBefore(v int64) int64 {
	i, found := slices.BinarySearch(l.snapshots, v)
	if found {
		return v
	}
	if i == 0 {
		return -1
	}
	return l.snapshots[i-1]
}

// Versions returns the versions that have a delta file and those that have
// a snapshot file, ascending.
func (s *Store) Versions(ctx context.Context) (deltas, snapshots []int64, err error) {
	l, err := s.list(ctx)
	if err != nil {
		return nil, nil, err
	}
	return l.deltaList, l.snapshots, nil
}

// Info summarizes the folder.
func (s *Store) Info(ctx context.Context) (Info, error) {
	l, err := s.list(ctx)
	if err != nil {
		return Info{}, err
	}
	in := Info{NewestVersion: -1, NewestSnapshot: -1, Files: l.files, Bytes: l.bytes}
	if n := len(l.deltaList); n > 0 {
		in.NewestVersion = l.deltaList[n-1]
	}
	if n := len(l.snapshots); n > 0 {
		in.NewestSnapshot = l.snapshots[n-1]
		in.NewestVersion = max(in.NewestVersion, in.NewestSnapshot)
	}
	return in, nil
}

// Maintain writes committed's snapshot when it is due (snapshotDue): the
// newest base at or before committed (a snapshot or a full delta; the
// empty state, version -1, counts as a snapshot of no bytes) is
// SnapshotEvery or more versions older and
// the deltas after it weigh SnapshotDeltaRatio of it, or it is
// SnapshotMaxEvery versions older. It builds the snapshot from the files
// alone, so it may run in its own goroutine while later versions are
// committed. committed must be a committed version: its delta is durable
// and will not be rewritten.
func (s *Store) Maintain(ctx context.Context, committed int64) error {
	if committed < 0 {
		return nil
	}
	s.full.mu.Lock()
	full := s.full.m[committed]
	s.full.mu.Unlock()
	if full && s.opts.SnapshotEvery >= 1 {
		// committed's delta is full, so committed is its own base: no
		// snapshot is due, and the folder need not be listed (a listing
		// per batch cost more than the rest of the pass).
		return nil
	}
	defer s.full.beginMaintain(committed)()
	l, err := s.list(ctx)
	if err != nil {
		return err
	}
	base, full, broken, err := s.base(ctx, l, committed)
	if err != nil {
		return err
	}
	if broken && s.purgedPast(l, committed) {
		// A pass that started late, after a Purge that a newer full
		// delta let drop committed's files: nothing to snapshot.
		return nil
	}
	if !s.snapshotDue(l, base, full, committed) {
		return nil
	}
	// Each 64Ki-row chunk is encoded as soon as it is built: the snapshot
	// never exists twice in memory, as records and as bytes.
	enc := newFileEncoder(nil, int(l.snapshotSizeHint(base, full, committed)), kindSnapshot, committed, 0, 1, s.mem)
	enc.beginSection(s.rowSchema)
	ch := newChunker(ctx, s.rowSchema, s.mem, s.snapshotRows, s.concatRun)
	ch.emit = enc.write
	if _, err := s.loadInto(ctx, committed, l, ch, true); err != nil {
		return fmt.Errorf("statestore: snapshot version %d: %w", committed, errors.Join(err, enc.abort()))
	}
	if err := enc.endSection(); err != nil {
		return fmt.Errorf("statestore: snapshot version %d: %w", committed, err)
	}
	data := enc.finish()
	name := fileName(committed, kindSnapshot)
	if err := s.st.Put(ctx, name, data); err != nil {
		return fmt.Errorf("statestore: snapshot version %d: write %s: %w", committed, name, err)
	}
	return nil
}

// baseBytes returns the bytes of base's file: its snapshot, its delta when
// full, nothing for the empty state.
func (l *listing) baseBytes(base int64, full bool) int64 {
	switch {
	case base < 0:
		return 0
	case full:
		return l.sizes[fileName(base, kindDelta)]
	}
	return l.sizes[fileName(base, kindSnapshot)]
}

// snapshotSizeHint guesses the bytes of version's snapshot: its base (a
// snapshot or a full delta) plus its largest delta since. (Deltas usually
// change the same keys over and over; when they add new ones, the buffer
// grows.)
func (l *listing) snapshotSizeHint(base int64, full bool, version int64) int64 {
	var delta int64
	for v := base + 1; v <= version; v++ {
		delta = max(delta, l.sizes[fileName(v, kindDelta)])
	}
	return l.baseBytes(base, full) + delta
}

// snapshotDue reports whether Maintain(committed) writes a snapshot, given
// the base a load of committed starts from (a snapshot, a full delta, or
// -1). The sizes come from the listing Maintain makes anyway: deciding
// reads no file (but for full flags the cache does not know yet).
func (s *Store) snapshotDue(l *listing, base int64, full bool, committed int64) bool {
	behind := committed - base
	switch {
	case behind < int64(s.opts.SnapshotEvery):
		return false
	case behind >= int64(s.opts.SnapshotMaxEvery):
		return true
	}
	var deltaBytes int64
	for v := base + 1; v <= committed; v++ {
		deltaBytes += l.sizes[fileName(v, kindDelta)]
	}
	return float64(deltaBytes) >= s.opts.SnapshotDeltaRatio*float64(l.baseBytes(base, full))
}

// Purge deletes the files that no version in
// [committed-MinVersionsToRetain+1, committed] needs (nor the version of a
// Maintain in flight on this Store): with B the base of the oldest
// retained version (its newest full delta after its newest snapshot, or
// that snapshot), the snapshots before B and the deltas before B (and B's
// own delta when B is a snapshot). Files of versions after committed are
// left alone. It returns the error of the first delete that failed; what it
// did not delete, the next Purge deletes.
func (s *Store) Purge(ctx context.Context, committed int64) error {
	s.full.purgeMu.Lock()
	defer s.full.purgeMu.Unlock()
	l, err := s.list(ctx)
	if err != nil {
		return err
	}
	oldest := s.full.oldestMaintained(committed - int64(s.opts.MinVersionsToRetain) + 1)
	base, full, _, err := s.base(ctx, l, oldest)
	if err != nil {
		return err
	}
	if base < 0 {
		return nil // every retained version replays from delta 0
	}
	var names []string
	for _, v := range l.snapshots {
		if v < base {
			names = append(names, fileName(v, kindSnapshot))
		}
	}
	for _, v := range l.deltaList {
		if v < base || v == base && !full {
			names = append(names, fileName(v, kindDelta))
		}
	}
	if len(names) == 0 {
		return nil
	}
	if err := s.st.Delete(ctx, names...); err != nil {
		return fmt.Errorf("statestore: purge %s before version %d: %w", s.st.URL(), oldest, err)
	}
	s.forgetFullBefore(base)
	return nil
}

// Load returns every live row of version (the state after batch version;
// -1 is the empty state), key columns then value columns (Schema()), in
// ascending key order: column by column, each in its natural order, nulls
// first (docs/format/state.md). The caller releases the records.
func (s *Store) Load(ctx context.Context, version int64) ([]arrow.RecordBatch, error) {
	if version < -1 {
		return nil, fmt.Errorf("statestore: load version %d: versions start at -1 (the empty state)", version)
	}
	if version == -1 {
		return nil, nil
	}
	l, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := s.load(ctx, version, l)
	if err != nil {
		return nil, fmt.Errorf("statestore: load version %d: %w", version, err)
	}
	return recs, nil
}

// readFile reads and decodes one state file, checking it holds what its
// name says.
func (s *Store) readFile(ctx context.Context, version int64, k kind) (*decodedFile, error) {
	name := fileName(version, k)
	data, err := s.st.Get(ctx, name)
	if err != nil {
		if storage.IsNotExist(err) {
			return nil, &missingError{name: name, dir: s.st.URL()}
		}
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	f, err := decodeFile(s.file(name), data, s.mem)
	if err != nil {
		return nil, err
	}
	bad := func(reason string) error {
		f.release()
		return &CorruptionError{File: s.file(name), Offset: -1, Reason: reason}
	}
	switch {
	case f.kind != k:
		return nil, bad(fmt.Sprintf("holds a %s, its name says %s", f.kind, k))
	case f.version != version:
		return nil, bad(fmt.Sprintf("holds version %d, its name says %d", f.version, version))
	case !schemasMatch(s.rowSchema, f.sections[0].schema):
		return nil, bad(fmt.Sprintf("rows have schema %s, the store's is %s", schemaString(f.sections[0].schema), schemaString(s.rowSchema)))
	case k == kindDelta && !schemasMatch(s.keySchema, f.sections[1].schema):
		return nil, bad(fmt.Sprintf("deletes have schema %s, the store's keys are %s", schemaString(f.sections[1].schema), schemaString(s.keySchema)))
	}
	for i := range f.sections {
		sc := s.rowSchema
		if i == 1 {
			sc = s.keySchema
		}
		for j, r := range f.sections[i].recs {
			f.sections[i].recs[j] = recast(sc, r)
			r.Release()
		}
		f.sections[i].schema = sc
	}
	return f, nil
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// ReadSchemas returns the key and value schemas recorded in a state folder,
// for tools that open a checkpoint without the query (checkpoint inspect).
// It returns an error wrapping storage.ErrNotExist when the folder has no
// schema file.
func ReadSchemas(ctx context.Context, st storage.Store) (key, value *arrow.Schema, err error) {
	file := st.URL() + "/" + schemaFileName
	data, err := st.Get(ctx, schemaFileName)
	if err != nil {
		return nil, nil, fmt.Errorf("statestore: read %s: %w", file, err)
	}
	return decodeSchemas(file, data, memory.DefaultAllocator)
}

// decodeSchemas decodes a schema file's bytes.
func decodeSchemas(file string, data []byte, mem memory.Allocator) (key, value *arrow.Schema, err error) {
	f, err := decodeFile(file, data, mem)
	if err != nil {
		return nil, nil, err
	}
	defer f.release()
	if f.kind != kindSchema {
		return nil, nil, &CorruptionError{File: file, Offset: 6, Reason: fmt.Sprintf("holds a %s, not a schema", f.kind)}
	}
	return f.sections[0].schema, f.sections[1].schema, nil
}
