package pebblestore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/onceflow/onceflow/statestore"
)

// Snapshot files in the state folder (docs/format/pebble.md):
//
//	<N zero-padded to 20>.pebble   manifest: the files of the LSM at version N
//	sst/<sha256>.sst (or .blob)    a file of the LSM, named by its content
//
// The manifest is written last, after every file it names.
const (
	manifestFormat = 1
	manifestExt    = ".pebble"
	objectPrefix   = "sst/"
	inlineMax      = 64 << 10 // files smaller than this (not SSTs) go inside the manifest
)

// manifest lists the files of a checkpoint of the working copy.
type manifest struct {
	Format  int    `json:"format"`
	Version int64  `json:"version"`
	Delta   string `json:"delta"` // hex Sum of the delta of Version
	Files   []mfile
}

type mfile struct {
	Name   string `json:"name"`             // in the pebble directory
	Size   int64  `json:"size"`             // bytes
	SHA256 string `json:"sha256"`           // hex, of the content
	Object string `json:"object,omitempty"` // folder object holding it, or
	Data   []byte `json:"data,omitempty"`   // the content itself
}

// ManifestName returns the object name of version's manifest.
func ManifestName(version int64) string {
	s := strconv.FormatInt(version, 10)
	return strings.Repeat("0", max(0, 20-len(s))) + s + manifestExt
}

// ParseManifestName returns the version a name made by ManifestName holds.
func ParseManifestName(name string) (int64, bool) {
	num, ok := strings.CutSuffix(name, manifestExt)
	if !ok || len(num) != 20 || strings.Contains(name, "/") {
		return 0, false
	}
	v, err := strconv.ParseInt(num, 10, 64)
	return v, err == nil && v >= 0
}

// UploadStats describes the newest upload of a Store.
type UploadStats struct {
	Version  int64 // of the manifest
	Files    int   // in the checkpoint
	Bytes    int64 // in the checkpoint
	NewFiles int   // uploaded this time (the others were in the folder)
	NewBytes int64 // uploaded this time, manifest included
}

// LastUpload returns the figures of the newest upload since Open.
func (s *Store) LastUpload() UploadStats {
	s.up.Lock()
	defer s.up.Unlock()
	return s.up.stats
}

// folderListing is what the state folder holds, for snapshots.
type folderListing struct {
	manifests []int64 // ascending
	deltas    []int64 // ascending
	snapshots []int64 // of the in-memory backend, ascending
	objects   map[string]bool
}

func (s *Store) listFolder(ctx context.Context) (*folderListing, error) {
	infos, err := s.st.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("pebblestore: list %s: %w", s.st.URL(), err)
	}
	l := &folderListing{objects: map[string]bool{}}
	for _, in := range infos {
		if strings.HasPrefix(in.Name, objectPrefix) {
			l.objects[in.Name] = true
			continue
		}
		if v, ok := ParseManifestName(in.Name); ok {
			l.manifests = append(l.manifests, v)
			continue
		}
		if v, snap, ok := statestore.ParseFileName(in.Name); ok {
			if snap {
				l.snapshots = append(l.snapshots, v)
			} else {
				l.deltas = append(l.deltas, v)
			}
		}
	}
	return l, nil
}

// newestAtOrBefore returns the newest of vs (ascending) at or before v, or -1.
func newestAtOrBefore(vs []int64, v int64) int64 {
	i, found := slices.BinarySearch(vs, v)
	if found {
		return v
	}
	if i == 0 {
		return -1
	}
	return vs[i-1]
}

// dropManifestsAfter deletes the manifests of versions after target.
// s.up is held.
func (s *Store) dropManifestsAfter(ctx context.Context, target int64) error {
	l, err := s.listFolder(ctx)
	if err != nil {
		return err
	}
	var names []string
	for _, v := range l.manifests {
		if v > target {
			names = append(names, ManifestName(v))
		}
	}
	if len(names) > 0 {
		if err := s.st.Delete(ctx, names...); err != nil {
			return fmt.Errorf("pebblestore: delete the snapshots of uncommitted versions after %d in %s: %w", target, s.st.URL(), err)
		}
	}
	s.up.uploaded = l.objects
	s.up.lastUpload, s.up.known = newestAtOrBefore(l.manifests, target), true
	return nil
}

func (s *Store) readManifest(ctx context.Context, version int64) (*manifest, error) {
	name := ManifestName(version)
	data, err := s.st.Get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", s.st.URL(), name, err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, &statestore.CorruptionError{File: s.st.URL() + "/" + name, Offset: -1, Reason: "not a pebble manifest: " + err.Error()}
	}
	if m.Format != manifestFormat {
		return nil, &statestore.CorruptionError{File: s.st.URL() + "/" + name, Offset: -1, Reason: fmt.Sprintf("manifest format %d is not read by this build (it reads %d)", m.Format, manifestFormat)}
	}
	if m.Version != version {
		return nil, &statestore.CorruptionError{File: s.st.URL() + "/" + name, Offset: -1, Reason: fmt.Sprintf("holds version %d, its name says %d", m.Version, version)}
	}
	return &m, nil
}

// rebuild creates the working copy in dir from the newest uploaded
// snapshot at or before target whose delta is the folder's (else from the
// in-memory backend's newest snapshot, else empty). s.mu is held; the
// deltas after the base are replayed by the caller.
func (s *Store) rebuild(ctx context.Context, target int64, dir string) error {
	l, err := s.listFolder(ctx)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	for i := len(l.manifests) - 1; i >= 0; i-- {
		v := l.manifests[i]
		if v > target {
			continue
		}
		m, err := s.readManifest(ctx, v)
		if err != nil {
			return err
		}
		sum, err := s.meta.DeltaSum(ctx, v)
		if errors.Is(err, statestore.ErrMissing) || err == nil && sum.String() != m.Delta {
			continue // a crashed attempt's snapshot, or one whose delta is purged
		}
		if err != nil {
			return err
		}
		return s.download(ctx, m, sum, dir)
	}
	db, _, _, _, err := s.openDB(dir)
	if err != nil {
		return err
	}
	s.mu.db, s.mu.version = db, -1
	// A folder of the in-memory backend: start from its newest snapshot,
	// or the newest full delta after it (the files before may be purged).
	snap, err := s.meta.Base(ctx, target)
	if err != nil {
		return err
	}
	if snap < 0 {
		return nil
	}
	// Until apply records snap, the new copy is not version -1: mark it
	// (apply deletes the mark), so that a restore interrupted here does
	// not leave an empty copy that the next one takes for version -1.
	if err := db.Set(pendingKey, binary.BigEndian.AppendUint64(nil, uint64(snap)), pebble.NoSync); err != nil {
		return err
	}
	recs, err := s.meta.Load(ctx, snap)
	if err != nil {
		return err
	}
	defer releaseAll(recs)
	sum, err := s.meta.DeltaSum(ctx, snap)
	if err != nil && !errors.Is(err, statestore.ErrMissing) {
		return err
	}
	return s.apply(ctx, snap, sum, recs, nil)
}

// download fetches the files of m into dir and opens it.
func (s *Store) download(ctx context.Context, m *manifest, sum statestore.Sum, dir string) error {
	tmp := dir + ".restore"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("remove %s: %w", tmp, err)
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	for _, f := range m.Files {
		if f.Name == "" || strings.ContainsAny(f.Name, "/\\") || f.Name == "." || f.Name == ".." {
			return &statestore.CorruptionError{File: s.st.URL() + "/" + ManifestName(m.Version), Offset: -1, Reason: fmt.Sprintf("bad file name %q", f.Name)}
		}
		data := f.Data
		if f.Object != "" {
			var err error
			if data, err = s.st.Get(ctx, f.Object); err != nil {
				return fmt.Errorf("read %s/%s (in %s): %w", s.st.URL(), f.Object, ManifestName(m.Version), err)
			}
		}
		if h := sha256.Sum256(data); hex.EncodeToString(h[:]) != f.SHA256 || int64(len(data)) != f.Size {
			where := f.Object
			if where == "" {
				where = ManifestName(m.Version) + ":" + f.Name
			}
			return &statestore.CorruptionError{File: s.st.URL() + "/" + where, Offset: -1, Reason: fmt.Sprintf("content of %d bytes does not match the manifest's size %d and SHA-256", len(data), f.Size)}
		}
		if err := os.WriteFile(filepath.Join(tmp, f.Name), data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", filepath.Join(tmp, f.Name), err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	db, v, have, _, err := s.openDB(dir)
	if err != nil {
		return err
	}
	if v != m.Version || have != sum {
		return errors.Join(&statestore.CorruptionError{File: s.st.URL() + "/" + ManifestName(m.Version), Offset: -1, Reason: fmt.Sprintf("its files hold version %d, not %d", v, m.Version)}, db.Close())
	}
	s.mu.db, s.mu.version, s.mu.sum = db, v, have
	return nil
}

// Maintain uploads the working copy's files when UploadEvery versions
// have passed since the newest upload: it flushes the memtables, links
// the LSM's files into a checkpoint directory (briefly holding off
// commits), uploads the files the folder does not hold yet under their
// content's SHA-256, and writes the manifest last. The manifest is of the
// version the working copy holds then, committed or later. committed must
// be a committed version.
func (s *Store) Maintain(ctx context.Context, committed int64) error {
	s.up.Lock()
	defer s.up.Unlock()
	if !s.up.known {
		l, err := s.listFolder(ctx)
		if err != nil {
			return err
		}
		s.up.uploaded = l.objects
		s.up.lastUpload, s.up.known = newestAtOrBefore(l.manifests, committed), true
	}
	if committed-s.up.lastUpload < int64(s.opts.UploadEvery) {
		return nil
	}
	s.mu.Lock()
	db, version, sum := s.mu.db, s.mu.version, s.mu.sum
	if db == nil || version < committed {
		s.mu.Unlock()
		return fmt.Errorf("pebblestore: maintain version %d of %s: the working copy holds %d", committed, s.st.URL(), version)
	}
	s.up.seq++
	ck := filepath.Join(s.opts.Dir, fmt.Sprintf("upload-%d", s.up.seq))
	err := os.RemoveAll(ck)
	if err == nil {
		err = db.Flush()
	}
	if err == nil {
		err = db.Checkpoint(ck)
	}
	s.mu.Unlock()
	defer os.RemoveAll(ck)
	if err != nil {
		return fmt.Errorf("pebblestore: maintain version %d of %s: checkpoint: %w", committed, s.st.URL(), err)
	}
	if err := s.upload(ctx, ck, version, sum); err != nil {
		return fmt.Errorf("pebblestore: maintain version %d of %s: %w", committed, s.st.URL(), err)
	}
	return nil
}

// upload puts the files of checkpoint directory ck and then its manifest.
func (s *Store) upload(ctx context.Context, ck string, version int64, sum statestore.Sum) error {
	ents, err := os.ReadDir(ck)
	if err != nil {
		return err
	}
	m := manifest{Format: manifestFormat, Version: version, Delta: sum.String()}
	stats := UploadStats{Version: version}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(ck, e.Name()))
		if err != nil {
			return err
		}
		h := sha256.Sum256(data)
		f := mfile{Name: e.Name(), Size: int64(len(data)), SHA256: hex.EncodeToString(h[:])}
		stats.Files++
		stats.Bytes += f.Size
		ext := filepath.Ext(e.Name())
		if ext == ".sst" || ext == ".blob" || len(data) >= inlineMax {
			f.Object = objectPrefix + f.SHA256 + ext
			if !s.up.uploaded[f.Object] {
				if err := s.st.Put(ctx, f.Object, data); err != nil {
					return fmt.Errorf("write %s/%s: %w", s.st.URL(), f.Object, err)
				}
				s.up.uploaded[f.Object] = true
				stats.NewFiles++
				stats.NewBytes += f.Size
			}
		} else {
			f.Data = data
		}
		m.Files = append(m.Files, f)
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	name := ManifestName(version)
	if err := s.st.Put(ctx, name, data); err != nil {
		return fmt.Errorf("write %s/%s: %w", s.st.URL(), name, err)
	}
	stats.NewFiles++
	stats.NewBytes += int64(len(data))
	s.up.lastUpload = version
	s.up.stats = stats
	return nil
}

// Purge deletes what no version in [committed-MinVersionsToRetain+1,
// committed] needs: manifests older than the newest one at or before the
// oldest retained version (the base), deltas before the base (the base's
// own delta stays: it proves the base is the folder's version), the
// in-memory backend's snapshots at or before the base, and uploaded files
// no remaining manifest names. Files of versions after committed are left
// alone. Without a base it purges as the in-memory backend does.
func (s *Store) Purge(ctx context.Context, committed int64) error {
	s.up.Lock()
	defer s.up.Unlock()
	l, err := s.listFolder(ctx)
	if err != nil {
		return err
	}
	oldest := committed - int64(s.opts.State.MinVersionsToRetain) + 1
	base := newestAtOrBefore(l.manifests, oldest)
	if base < 0 {
		return s.meta.Purge(ctx, committed)
	}
	var names []string
	dropped := false
	for _, v := range l.manifests {
		if v < base {
			names = append(names, ManifestName(v))
			dropped = true
		}
	}
	for _, v := range l.deltas {
		if v < base {
			names = append(names, statestore.FileName(v, false))
		}
	}
	for _, v := range l.snapshots {
		if v <= base {
			names = append(names, statestore.FileName(v, true))
		}
	}
	if dropped || !s.up.collected {
		keep := map[string]bool{}
		for _, v := range l.manifests {
			if v < base {
				continue
			}
			m, err := s.readManifest(ctx, v)
			if err != nil {
				return fmt.Errorf("pebblestore: purge %s: %w", s.st.URL(), err)
			}
			for _, f := range m.Files {
				if f.Object != "" {
					keep[f.Object] = true
				}
			}
		}
		for obj := range l.objects {
			if !keep[obj] {
				names = append(names, obj)
				if s.up.uploaded != nil {
					delete(s.up.uploaded, obj)
				}
			}
		}
		s.up.collected = true
	}
	if len(names) == 0 {
		return nil
	}
	if err := s.st.Delete(ctx, names...); err != nil {
		return fmt.Errorf("pebblestore: purge %s before version %d: %w", s.st.URL(), oldest, err)
	}
	return nil
}
