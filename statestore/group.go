package statestore

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/onceflow/onceflow/storage"
)

// A Group is the state of one store of an operator across its partitions,
// so that a batch's deltas of every partition can be written as one file,
// a bundle (format version 3, docs/format/state.md), instead of one file
// per partition: creating a file is the dominant cost of a small commit on
// a local disk (README, performance item 14).
//
// Each partition's Store is opened, as before, on a storage view of its
// folder; Partition returns that view. A delta Put through a view under a
// context carrying a Bundle (WithBundle) is not written: the bundle keeps
// its bytes, and Bundle.Flush writes every partition's delta of the
// version as one bundle file in the group's bundle folder, through the
// same storage (so under a storage.SyncGroup it is deferred like any other
// Put). Reads through a view find a version's delta in the partition's
// own folder or, when there is none, in the partition's section of the
// version's bundle, read alone (a ranged read). Listing a view shows each
// bundled delta as the partition's own `<N>.delta`, and deleting it
// there marks the partition done with the bundle; the bundle file goes
// when every partition it holds is done. So a Store works on a view as on
// a plain folder, and readers of format 2 folders keep working: a folder
// may hold deltas of either kind.
//
// A version has one delta per partition: a bundle write first deletes the
// partition's own file of that version (left by an earlier attempt of an
// uncommitted batch), and a delta Put through a view without a bundle
// first deletes the version's bundle (every partition's delta of it is
// being written again). Both happen only for an uncommitted version, as
// only a re-run batch writes a version again.
//
// A Group keeps in memory what it learned of the bundle folder at its
// first use and what it wrote and deleted since, as the one process that
// runs a checkpoint may (the engine's lock keeps others out). Methods are
// safe for concurrent use.
type Group struct {
	st  storage.Store // the operator's folder
	dir string        // the bundle folder, relative to st

	mu      sync.Mutex
	loaded  bool
	bundles map[int64]*bundleInfo
	nparts  int // partitions with a view: the index a bundle reserves

	// spare is the memory of the last bundle written, which the next one
	// is assembled in: a bundle is about as large from one batch to the
	// next, and fresh memory costs its page faults every time.
	spare []byte
}

// bundleInfo is what a Group knows of one bundle file.
type bundleInfo struct {
	entries map[int]bundleEntry // partition → its delta's bytes
	done    map[int]bool        // partitions whose view deleted the delta
	// written is set for a bundle this Group wrote: its Put may have been
	// deferred (storage.SyncGroup) and then aborted, leaving an earlier
	// attempt's file, or none, under the name. The first read checks the
	// file's index before trusting entries.
	written bool
	// damaged is the error reading the bundle's header or index gave:
	// which partitions it holds is unknown, so every partition lists it,
	// and a read of it (only a load that needs the version reads it)
	// fails with that error. A damaged bundle of a version no load needs
	// any more is purged like any other.
	damaged error
}

// bundleEntry locates a partition's delta in a bundle file.
type bundleEntry struct{ off, n int64 }

// BundleDir is the folder of a store's bundles within its operator's
// folder: "deltas" for the unnamed store, "deltas/<store>" for a named
// one.
func BundleDir(store string) string {
	if store == "" {
		return "deltas"
	}
	return "deltas/" + store
}

// NewGroup returns the group of the store named store ("" for the
// operator's one store) of the operator whose folder is op. It reads
// nothing until used.
func NewGroup(op storage.Store, store string) *Group {
	return &Group{st: op, dir: BundleDir(store)}
}

// URL returns where the group's bundles live, for messages.
func (g *Group) URL() string { return g.st.URL() + "/" + g.dir }

// Partition returns the view of partition p's folder, folder, on which
// its Store is opened.
func (g *Group) Partition(p int, folder storage.Store) storage.Store {
	g.mu.Lock()
	g.nparts = max(g.nparts, p+1)
	g.mu.Unlock()
	return &partView{g: g, p: p, st: folder, own: map[int64]bool{}}
}

// load lists the bundle folder and reads each bundle's index, once.
// The caller holds g.mu.
func (g *Group) load(ctx context.Context) error {
	if g.loaded {
		return nil
	}
	infos, err := g.st.List(ctx, g.dir+"/")
	if err != nil {
		return fmt.Errorf("statestore: list %s: %w", g.URL(), err)
	}
	bundles := map[int64]*bundleInfo{}
	for _, in := range infos {
		rest := strings.TrimPrefix(in.Name, g.dir+"/")
		v, k, ok := parseFileName(rest)
		if !ok || k != kindDelta {
			continue
		}
		entries, err := g.readIndex(ctx, v)
		var ce *CorruptionError
		if errors.As(err, &ce) {
			bundles[v] = &bundleInfo{damaged: err, done: map[int]bool{}}
			continue
		}
		if err != nil {
			return err
		}
		bundles[v] = &bundleInfo{entries: entries, done: map[int]bool{}}
	}
	g.bundles, g.loaded = bundles, true
	return nil
}

// name is the object name of version's bundle, relative to the operator
// folder.
func (g *Group) name(version int64) string { return g.dir + "/" + fileName(version, kindDelta) }

// readIndex reads and checks the header and index of version's bundle.
func (g *Group) readIndex(ctx context.Context, version int64) (map[int]bundleEntry, error) {
	name := g.name(version)
	head, err := storage.GetRange(ctx, g.st, name, 0, bundleReadAhead)
	if err != nil {
		return nil, fmt.Errorf("statestore: read %s/%s: %w", g.st.URL(), name, err)
	}
	file := g.st.URL() + "/" + name
	n, err := checkBundleHeader(file, head, version)
	if err != nil {
		return nil, err
	}
	if need := bundleIndexEnd(n); int64(len(head)) < need {
		head, err = storage.GetRange(ctx, g.st, name, 0, need)
		if err != nil {
			return nil, fmt.Errorf("statestore: read %s: %w", file, err)
		}
	}
	return decodeBundleIndex(file, head, n)
}

// section reads partition p's delta from version's bundle; ok is false
// when the group knows no such bundle or p is not in it (or is done).
func (g *Group) section(ctx context.Context, p int, version int64) (data []byte, ok bool, err error) {
	g.mu.Lock()
	if err := g.load(ctx); err != nil {
		g.mu.Unlock()
		return nil, false, err
	}
	b := g.bundles[version]
	if b != nil && b.written {
		// Check the file holds what this Group wrote (g.mu is held: the
		// read is one small read, once per bundle written).
		disk, err := g.readIndex(ctx, version)
		switch {
		case storage.IsNotExist(err):
			delete(g.bundles, version)
			b = nil
		case err != nil:
			g.mu.Unlock()
			return nil, false, err
		case !maps.Equal(disk, b.entries):
			b.entries = disk // an earlier attempt's bundle
		}
		if b != nil {
			b.written = false
		}
	}
	if b != nil && b.damaged != nil && !b.done[p] {
		g.mu.Unlock()
		return nil, false, b.damaged
	}
	var e bundleEntry
	if b != nil && !b.done[p] {
		e, ok = b.entries[p]
	}
	g.mu.Unlock()
	if !ok {
		return nil, false, nil
	}
	name := g.name(version)
	data, err = storage.GetRange(ctx, g.st, name, e.off, e.n)
	if err != nil {
		return nil, false, fmt.Errorf("statestore: read %s/%s: %w", g.st.URL(), name, err)
	}
	if int64(len(data)) != e.n {
		return nil, false, &CorruptionError{File: g.st.URL() + "/" + name, Offset: e.off + int64(len(data)),
			Reason: fmt.Sprintf("partition %d's delta runs past the end of the file (%d of %d bytes): truncated or not written whole", p, len(data), e.n)}
	}
	return data, true, nil
}

// bundled lists the versions whose bundle holds a delta of p that p has
// not deleted, with their sizes.
func (g *Group) bundled(ctx context.Context, p int) (map[int64]int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.load(ctx); err != nil {
		return nil, err
	}
	out := map[int64]int64{}
	for v, b := range g.bundles {
		if b.damaged != nil && !b.done[p] {
			out[v] = 0
		} else if e, ok := b.entries[p]; ok && !b.done[p] {
			out[v] = e.n
		}
	}
	return out, nil
}

// drop deletes version's bundle and forgets it: a partition's delta of the
// version is being written again on its own, so the whole bundle is an
// earlier attempt's.
func (g *Group) drop(ctx context.Context, version int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.load(ctx); err != nil {
		return err
	}
	if _, ok := g.bundles[version]; !ok {
		return nil
	}
	if err := g.st.Delete(ctx, g.name(version)); err != nil {
		return fmt.Errorf("statestore: delete %s/%s: %w", g.st.URL(), g.name(version), err)
	}
	delete(g.bundles, version)
	return nil
}

// done marks p done with version's bundle and deletes the bundle when
// every partition it holds is done.
func (g *Group) done(ctx context.Context, p int, version int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.load(ctx); err != nil {
		return err
	}
	b := g.bundles[version]
	if b == nil {
		return nil
	}
	holds := len(b.entries)
	if b.damaged != nil {
		holds = g.nparts // unknown: every partition with a view is done with it
	} else if _, ok := b.entries[p]; !ok {
		return nil
	}
	b.done[p] = true
	if len(b.done) < holds {
		return nil
	}
	if err := g.st.Delete(ctx, g.name(version)); err != nil {
		delete(b.done, p)
		return fmt.Errorf("statestore: delete %s/%s: %w", g.st.URL(), g.name(version), err)
	}
	delete(g.bundles, version)
	return nil
}

// Bundle collects the deltas that Stores on Group views commit under a
// context carrying it (WithBundle), so that Flush writes one file per
// group and version. A Bundle is for one batch: Flush once, after the
// last commit.
type Bundle struct {
	mu     sync.Mutex
	staged map[*Group]*staged
	done   bool
}

// staged is one group's deltas in a Bundle, assembled in buf after room
// for the header and an index of reserved entries.
type staged struct {
	version  int64
	reserved int
	parts    map[int]*partView // the views that put, by partition
	at       map[int]bundleEntry
	buf      []byte
}

type bundleKey struct{}

// NewBundle returns an empty bundle.
func NewBundle() *Bundle { return &Bundle{staged: map[*Group]*staged{}} }

// WithBundle returns a context under which a delta Put through a Group's
// view is kept by b instead of written (see Group).
func WithBundle(ctx context.Context, b *Bundle) context.Context {
	return context.WithValue(ctx, bundleKey{}, b)
}

func bundleOf(ctx context.Context) *Bundle {
	b, _ := ctx.Value(bundleKey{}).(*Bundle)
	return b
}

// stage copies data, partition p's delta of version in v's group, into
// the group's bundle. False when b is already flushed (the caller writes
// it itself).
func (b *Bundle) stage(v *partView, version int64, data []byte) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return false, nil
	}
	s := b.staged[v.g]
	if s == nil {
		v.g.mu.Lock()
		reserved, buf := v.g.nparts, v.g.spare
		v.g.spare = nil
		v.g.mu.Unlock()
		end := bundleIndexEnd(reserved)
		if int64(cap(buf)) < end {
			buf = make([]byte, end, end+int64(len(data))*int64(reserved)+trailerSize)
		}
		s = &staged{version: version, reserved: reserved, parts: map[int]*partView{}, at: map[int]bundleEntry{}, buf: buf[:end]}
		b.staged[v.g] = s
	}
	if s.version != version {
		return false, fmt.Errorf("statestore: bundle of %s holds version %d, not %d: a bundle is for one batch", v.g.URL(), s.version, version)
	}
	if _, dup := s.at[v.p]; dup {
		return false, fmt.Errorf("statestore: bundle of %s: partition %d put version %d twice", v.g.URL(), v.p, version)
	}
	s.parts[v.p] = v
	s.at[v.p] = bundleEntry{off: int64(len(s.buf)), n: int64(len(data))}
	s.buf = append(s.buf, data...)
	return true, nil
}

// Flush writes each group's staged deltas as one bundle file (through the
// group's storage, with ctx: under a storage.SyncGroup the write is
// deferred like any Put), after deleting the partitions' own files of
// that version that an earlier attempt left. Until Flush returns nil,
// the staged deltas are written nowhere.
func (b *Bundle) Flush(ctx context.Context) error {
	b.mu.Lock()
	b.done = true
	staged := b.staged
	b.staged = nil
	b.mu.Unlock()
	groups := make([]*Group, 0, len(staged))
	for g := range staged {
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b *Group) int { return strings.Compare(a.URL(), b.URL()) })
	for _, g := range groups {
		if err := g.write(ctx, staged[g]); err != nil {
			return err
		}
	}
	return nil
}

// write writes s as version's bundle of g.
func (g *Group) write(ctx context.Context, s *staged) error {
	for _, v := range s.parts {
		if err := v.dropOwn(ctx, s.version); err != nil {
			return err
		}
	}
	data, entries := s.encode()
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.load(ctx); err != nil {
		return err
	}
	// Until the Put is known to have succeeded, the file may be the old
	// bundle or this one: forget it.
	delete(g.bundles, s.version)
	name := g.name(s.version)
	if err := g.st.Put(ctx, name, data); err != nil {
		return fmt.Errorf("statestore: write %s/%s: %w", g.st.URL(), name, err)
	}
	g.bundles[s.version] = &bundleInfo{entries: entries, done: map[int]bool{}, written: true}
	g.spare = data // Put keeps no reference to it
	return nil
}

// encode fills in the header and index of s's bundle and appends its
// trailer. The deltas sit in the buffer in the order they were staged;
// the index lists them by partition. When fewer partitions staged than
// were reserved, the deltas move down to follow the shorter index.
func (s *staged) encode() ([]byte, map[int]bundleEntry) {
	parts := make([]int, 0, len(s.at))
	for p := range s.at {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	buf := s.buf
	start := bundleIndexEnd(len(parts))
	switch shift := bundleIndexEnd(s.reserved) - start; {
	case shift > 0:
		n := copy(buf[start:], buf[start+shift:])
		buf = buf[:start+int64(n)]
	case shift < 0:
		// More partitions staged than the index reserved (a view made
		// after the first stage): the deltas move up.
		deltas := buf[start+shift:]
		grown := make([]byte, start, start+int64(len(deltas))+trailerSize)
		buf = append(grown, deltas...)
	}
	if shift := bundleIndexEnd(s.reserved) - start; shift != 0 {
		for p, e := range s.at {
			s.at[p] = bundleEntry{off: e.off - shift, n: e.n}
		}
	}
	clear(buf[:bundleIndexEnd(len(parts))])
	copy(buf[0:4], fileMagic)
	binary.LittleEndian.PutUint16(buf[4:], bundleFormatVersion)
	buf[6] = kindBundle
	binary.LittleEndian.PutUint64(buf[8:], uint64(s.version))
	binary.LittleEndian.PutUint32(buf[16:], uint32(len(parts)))
	for i, p := range parts {
		e := buf[headerSize+i*bundleEntrySize:]
		binary.LittleEndian.PutUint32(e[0:], uint32(p))
		binary.LittleEndian.PutUint64(e[8:], uint64(s.at[p].off))
		binary.LittleEndian.PutUint64(e[16:], uint64(s.at[p].n))
	}
	end := bundleIndexEnd(len(parts)) - 8
	binary.LittleEndian.PutUint32(buf[end:], crc32.Checksum(buf[:end], castagnoli))
	// The trailer carries no checksum of the whole file: the header and
	// index have theirs, and each delta its own (checking the bytes twice
	// cost 3% of a commit-bound query's CPU).
	var tr [trailerSize]byte
	copy(tr[4:], fileMagic)
	return append(buf, tr[:]...), s.at
}

// partView is a Group's view of one partition's folder (Group.Partition).
type partView struct {
	g  *Group
	p  int
	st storage.Store

	mu     sync.Mutex
	listed bool
	own    map[int64]bool // versions with a delta file of the partition's own
}

// deltaVersion returns the version a delta file's name holds.
func deltaVersion(name string) (int64, bool) {
	v, k, ok := parseFileName(name)
	return v, ok && k == kindDelta
}

// ownList makes sure v.own holds what the folder has. The caller holds
// v.mu.
func (v *partView) ownList(ctx context.Context) error {
	if v.listed {
		return nil
	}
	infos, err := v.st.List(ctx, "")
	if err != nil {
		return err
	}
	for _, in := range infos {
		if n, ok := deltaVersion(in.Name); ok {
			v.own[n] = true
		}
	}
	v.listed = true
	return nil
}

// dropOwn deletes the partition's own delta of version, if it has one.
func (v *partView) dropOwn(ctx context.Context, version int64) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.ownList(ctx); err != nil {
		return fmt.Errorf("statestore: list %s: %w", v.st.URL(), err)
	}
	if !v.own[version] {
		return nil
	}
	name := fileName(version, kindDelta)
	if err := v.st.Delete(ctx, name); err != nil {
		return fmt.Errorf("statestore: delete %s/%s: %w", v.st.URL(), name, err)
	}
	delete(v.own, version)
	return nil
}

func (v *partView) PutIfAbsent(ctx context.Context, name string, data []byte) error {
	return v.st.PutIfAbsent(ctx, name, data)
}

func (v *partView) Put(ctx context.Context, name string, data []byte) error {
	version, ok := deltaVersion(name)
	if !ok {
		return v.st.Put(ctx, name, data)
	}
	if b := bundleOf(ctx); b != nil {
		kept, err := b.stage(v, version, data)
		if kept || err != nil {
			return err
		}
	}
	if err := v.g.drop(ctx, version); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.st.Put(ctx, name, data); err != nil {
		return err
	}
	v.own[version] = true
	return nil
}

func (v *partView) Get(ctx context.Context, name string) ([]byte, error) {
	version, ok := deltaVersion(name)
	if !ok {
		return v.st.Get(ctx, name)
	}
	v.mu.Lock()
	err := v.ownList(ctx)
	own := v.own[version]
	v.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("statestore: list %s: %w", v.st.URL(), err)
	}
	if own {
		data, err := v.st.Get(ctx, name)
		if !storage.IsNotExist(err) {
			return data, err
		}
	}
	data, found, err := v.g.section(ctx, v.p, version)
	if err != nil {
		return nil, err
	}
	if !found {
		return v.st.Get(ctx, name) // the store's own answer: not there
	}
	return data, nil
}

func (v *partView) List(ctx context.Context, prefix string) ([]storage.ObjectInfo, error) {
	infos, err := v.st.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	bundled, err := v.g.bundled(ctx, v.p)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	if !v.listed && prefix == "" {
		clear(v.own)
		for _, in := range infos {
			if n, ok := deltaVersion(in.Name); ok {
				v.own[n] = true
			}
		}
		v.listed = true
	}
	v.mu.Unlock()
	for _, in := range infos {
		if n, ok := deltaVersion(in.Name); ok {
			delete(bundled, n) // the partition's own file is the one read
		}
	}
	if len(bundled) == 0 {
		return infos, nil
	}
	for n, size := range bundled {
		if name := fileName(n, kindDelta); strings.HasPrefix(name, prefix) {
			infos = append(infos, storage.ObjectInfo{Name: name, Size: size})
		}
	}
	slices.SortFunc(infos, func(a, b storage.ObjectInfo) int { return strings.Compare(a.Name, b.Name) })
	return infos, nil
}

func (v *partView) Delete(ctx context.Context, names ...string) error {
	v.mu.Lock()
	err := v.ownList(ctx)
	var own []string
	var bundled []int64
	for _, name := range names {
		n, ok := deltaVersion(name)
		switch {
		case !ok:
			own = append(own, name)
		case v.own[n]:
			own = append(own, name)
			bundled = append(bundled, n) // and any bundle of it
		default:
			bundled = append(bundled, n)
		}
	}
	v.mu.Unlock()
	if err != nil {
		return fmt.Errorf("statestore: list %s: %w", v.st.URL(), err)
	}
	if len(own) > 0 {
		if err := v.st.Delete(ctx, own...); err != nil {
			return err
		}
		v.mu.Lock()
		for _, name := range own {
			if n, ok := deltaVersion(name); ok {
				delete(v.own, n)
			}
		}
		v.mu.Unlock()
	}
	for _, n := range bundled {
		if err := v.g.done(ctx, v.p, n); err != nil {
			return err
		}
	}
	return nil
}

func (v *partView) URL() string { return v.st.URL() }

func (v *partView) Close() error { return nil }

// GetRange reads part of a file of the folder; a delta is read whole (a
// Store reads it whole) and cut.
func (v *partView) GetRange(ctx context.Context, name string, off, n int64) ([]byte, error) {
	if _, ok := deltaVersion(name); !ok {
		return storage.GetRange(ctx, v.st, name, off, n)
	}
	data, err := v.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	if off >= int64(len(data)) {
		return nil, nil
	}
	return data[off : off+min(n, int64(len(data))-off)], nil
}

// Unwrap returns the partition's folder (storage.LocalDir finds the
// directory through it).
func (v *partView) Unwrap() storage.Store { return v.st }

// Bundle file layout (format version 3; docs/format/state.md):
//
//	header   24 bytes: magic "OFST", format version u16 = 3, kind u8 = 4,
//	         flags u8 = 0, state version i64, entry count u32, 0 u32
//	index    24 bytes an entry: partition u32, 0 u32, offset u64, length u64
//	         (ascending partitions; offset from the file's start)
//	         then CRC-32C of the header and index, u32, and 0 u32
//	deltas   each entry's bytes: one format 2 delta file, whole
//	trailer  8 bytes: 0 u32; magic "OFST" (no checksum of its own: the
//	         index and each delta carry theirs)
const (
	bundleFormatVersion = 3
	kindBundle          = 4
	bundleEntrySize     = 24
	// bundleReadAhead is the first read of a bundle: its header and an
	// index of up to 169 partitions.
	bundleReadAhead = 4096
	// bundleMaxEntries bounds a bundle's index (a partition count).
	bundleMaxEntries = 1 << 20
)

// bundleIndexEnd is the end of the index (and its CRC) of n entries.
func bundleIndexEnd(n int) int64 { return headerSize + int64(n)*bundleEntrySize + 8 }

// checkBundleHeader checks the first bytes of a bundle of version and
// returns its entry count.
func checkBundleHeader(file string, b []byte, version int64) (int, error) {
	bad := func(off int64, format string, args ...any) (int, error) {
		return 0, &CorruptionError{File: file, Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case len(b) == 0:
		return bad(0, "empty file")
	case len(b) < 4 || string(b[0:4]) != fileMagic:
		return bad(0, "not a state file (no OFST magic)")
	case len(b) < headerSize:
		return bad(int64(len(b)), "file of %d bytes is shorter than a bundle's header", len(b))
	}
	if fv := binary.LittleEndian.Uint16(b[4:]); fv != bundleFormatVersion {
		return bad(4, "format version %d, a bundle is version %d", fv, bundleFormatVersion)
	}
	if b[6] != kindBundle {
		return bad(6, "kind %d, a bundle is kind %d", b[6], kindBundle)
	}
	if b[7] != 0 {
		return bad(7, "unknown flags %#x", b[7])
	}
	if v := int64(binary.LittleEndian.Uint64(b[8:])); v != version {
		return bad(8, "holds version %d, its name says %d", v, version)
	}
	n := binary.LittleEndian.Uint32(b[16:])
	if n > bundleMaxEntries {
		return bad(16, "%d entries, more than %d", n, bundleMaxEntries)
	}
	if r := binary.LittleEndian.Uint32(b[20:]); r != 0 {
		return bad(20, "reserved field is %d, not 0", r)
	}
	return int(n), nil
}

// decodeBundleIndex checks the index of n entries at the start of b (the
// header is checked) and returns it.
func decodeBundleIndex(file string, b []byte, n int) (map[int]bundleEntry, error) {
	bad := func(off int64, format string, args ...any) (map[int]bundleEntry, error) {
		return nil, &CorruptionError{File: file, Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
	end := bundleIndexEnd(n)
	if int64(len(b)) < end {
		return bad(int64(len(b)), "file of %d bytes is shorter than its index of %d entries: truncated or not written whole", len(b), n)
	}
	crcAt := end - 8
	if got, want := binary.LittleEndian.Uint32(b[crcAt:]), crc32.Checksum(b[:crcAt], castagnoli); got != want {
		return bad(crcAt, "index checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	if r := binary.LittleEndian.Uint32(b[crcAt+4:]); r != 0 {
		return bad(crcAt+4, "reserved field after the index is %d, not 0", r)
	}
	entries := make(map[int]bundleEntry, n)
	prev := int64(-1)
	for i := range n {
		at := int64(headerSize + i*bundleEntrySize)
		e := b[at:]
		p := int64(binary.LittleEndian.Uint32(e[0:]))
		off, size := int64(binary.LittleEndian.Uint64(e[8:])), int64(binary.LittleEndian.Uint64(e[16:]))
		switch {
		case p <= prev:
			return bad(at, "entry %d is partition %d, after partition %d: entries ascend", i, p, prev)
		case binary.LittleEndian.Uint32(e[4:]) != 0:
			return bad(at+4, "entry %d: reserved field is not 0", i)
		case size < headerSize+trailerSize || size > 1<<50 || off < end || off > 1<<50:
			return bad(at+8, "entry %d (partition %d): bytes [%d, +%d) are not a delta after the index", i, p, off, size)
		}
		entries[int(p)] = bundleEntry{off: off, n: size}
		prev = p
	}
	// The deltas follow the index one after the other, in any order.
	byOff := slices.SortedFunc(maps.Values(entries), func(a, b bundleEntry) int { return cmp.Compare(a.off, b.off) })
	next := end
	for _, e := range byOff {
		if e.off != next {
			return bad(e.off, "a delta starts at byte %d, not at %d where the one before it ends", e.off, next)
		}
		next += e.n
	}
	return entries, nil
}

// VerifyBundle checks a whole bundle file's bytes (header, index,
// trailer, and each delta's own envelope checksum; a Store checks the rest
// of a delta when it reads it) and returns its partitions' deltas, for
// tools.
func VerifyBundle(file string, data []byte, version int64) (map[int][]byte, error) {
	n, err := checkBundleHeader(file, data, version)
	if err != nil {
		return nil, err
	}
	entries, err := decodeBundleIndex(file, data, n)
	if err != nil {
		return nil, err
	}
	bad := func(off int64, format string, args ...any) (map[int][]byte, error) {
		return nil, &CorruptionError{File: file, Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
	size := int64(len(data))
	if size < bundleIndexEnd(n)+trailerSize || string(data[size-4:]) != fileMagic {
		return bad(size, "no trailing magic: truncated or not written whole")
	}
	end := size - trailerSize
	if r := binary.LittleEndian.Uint32(data[end:]); r != 0 {
		return bad(end, "reserved field of the trailer is %d, not 0", r)
	}
	out := make(map[int][]byte, n)
	last := bundleIndexEnd(n)
	for p, e := range entries {
		if e.off+e.n > end {
			return bad(e.off, "partition %d's delta runs past the trailer", p)
		}
		d := data[e.off : e.off+e.n]
		crcAt := e.n - trailerSize
		if string(d[e.n-4:]) != fileMagic {
			return bad(e.off+e.n-4, "partition %d's delta has no trailing magic", p)
		}
		if got, want := binary.LittleEndian.Uint32(d[crcAt:]), crc32.Checksum(d[:crcAt], castagnoli); got != want {
			return bad(e.off+crcAt, "partition %d's delta: checksum mismatch (stored %08x, computed %08x)", p, got, want)
		}
		out[p] = d
		last = max(last, e.off+e.n)
	}
	if last != end {
		return bad(last, "%d bytes between the last delta and the trailer", end-last)
	}
	return out, nil
}
