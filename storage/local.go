package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

const tmpSuffix = ".tmp"

// LocalOptions configures a local store. The zero value works.
type LocalOptions struct {
	// FS is the file system the store uses; nil means the operating
	// system's. Tests pass a fault-injecting FS here.
	FS FS
	// NoSync skips fsync calls. Only for benchmarks that measure
	// everything but the disk; never for a query.
	NoSync bool
}

// Local is a Store on a local directory. Writes go to a temporary file in the
// target directory, are fsynced, then linked (put-if-absent) or renamed
// (overwrite) into place, and the directory is fsynced, so a crash leaves the
// old object or the new one and, at worst, a temporary file that the next
// Open deletes.
type Local struct {
	root string
	fs   FS
	sync bool
	seq  atomic.Uint64
	// dirs holds the directories below root that this store has created
	// or found, with their entries in their parents made durable, so each
	// costs its MkdirAll and parent fsyncs once per process.
	dirs sync.Map // string → struct{}
}

// OpenLocal opens (creating if needed) a store rooted at dir and deletes
// the temporary files a crash left behind (not those of another process
// still running).
func OpenLocal(dir string, o LocalOptions) (*Local, error) {
	if o.FS == nil {
		o.FS = OSFS{}
	}
	dir = filepath.Clean(dir)
	if err := o.FS.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("storage: create %s: %w", dir, err)
	}
	l := &Local{root: dir, fs: o.FS, sync: !o.NoSync}
	// The root may have just been created: make its entry durable.
	if err := l.syncDir(dir); err != nil {
		return nil, err
	}
	if err := l.syncDir(filepath.Dir(dir)); err != nil {
		return nil, err
	}
	if err := l.removeTemps(); err != nil {
		return nil, err
	}
	return l, nil
}

// Root returns the directory the store lives in.
func (l *Local) Root() string { return l.root }

// URL implements Store.
func (l *Local) URL() string { return "file://" + filepath.ToSlash(l.root) }

// Close implements Store.
func (l *Local) Close() error { return nil }

func (l *Local) path(name string) (string, error) {
	if err := ValidateName(name); err != nil {
		return "", err
	}
	return filepath.Join(l.root, filepath.FromSlash(name)), nil
}

func (l *Local) removeTemps() error {
	err := l.fs.WalkDir(l.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, tmpSuffix) && !otherWriterAlive(p) {
			if err := l.fs.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove leftover %s: %w", p, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storage: clean temporary files in %s: %w", l.root, err)
	}
	return nil
}

// otherWriterAlive reports whether the temporary file p belongs to another
// process that is still running (its pid is in the name), so that opening a
// directory, say by a second driver about to find the checkpoint locked,
// does not pull a file from under a live writer. Leftovers of a dead
// process, of this process (an earlier incarnation with the same pid, as in
// a restarted container), and names that carry no pid are removed. A pid
// reused by an unrelated process only delays the cleanup of a file that
// List never shows.
func otherWriterAlive(p string) bool {
	s := strings.TrimSuffix(filepath.Base(p), tmpSuffix)
	i := strings.LastIndexByte(s, '.') // before the sequence number
	if i < 0 {
		return false
	}
	s = s[:i]
	j := strings.LastIndexByte(s, '.') // before the pid
	if j < 0 {
		return false
	}
	pid, err := strconv.Atoi(s[j+1:])
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	err = syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// ensureDir creates dir (a directory at or below the root) and makes every
// entry on the way down durable: MkdirAll alone leaves a crash free to forget
// the new directories, and with them the file about to be linked into them.
func (l *Local) ensureDir(dir string) error {
	if dir == l.root {
		return nil
	}
	if _, ok := l.dirs.Load(dir); ok {
		return nil
	}
	if err := l.fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("storage: create %s: %w", dir, err)
	}
	for d := dir; d != l.root; d = filepath.Dir(d) {
		if _, ok := l.dirs.Load(d); ok {
			break
		}
		if err := l.syncDir(filepath.Dir(d)); err != nil {
			return err
		}
		l.dirs.Store(d, struct{}{})
	}
	return nil
}

// forgetDir drops dir and its ancestors from the cache of known directories,
// for when one was removed behind the store's back.
func (l *Local) forgetDir(dir string) {
	for d := dir; d != l.root && len(d) > len(l.root); d = filepath.Dir(d) {
		l.dirs.Delete(d)
	}
}

// writeTemp writes data to a fresh temporary file beside final and syncs it.
func (l *Local) writeTemp(final string, data []byte) (string, error) {
	return l.writeTempSync(final, data, l.sync)
}

// writeTempSync is writeTemp, syncing the file only when sync is set.
func (l *Local) writeTempSync(final string, data []byte, sync bool) (string, error) {
	tmp, f, err := l.writeTempOpen(final, data)
	if err != nil {
		return "", err
	}
	var werr error
	if sync {
		werr = f.Sync()
	}
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = l.fs.Remove(tmp)
		return "", fmt.Errorf("storage: write %s: %w", tmp, err)
	}
	return tmp, nil
}

// writeTempOpen writes data to a fresh temporary file beside final and
// returns it still open, neither synced nor closed.
func (l *Local) writeTempOpen(final string, data []byte) (string, File, error) {
	dir := filepath.Dir(final)
	if err := l.ensureDir(dir); err != nil {
		return "", nil, err
	}
	tmp := final + "." + strconv.Itoa(os.Getpid()) + "." + strconv.FormatUint(l.seq.Add(1), 10) + tmpSuffix
	f, err := l.fs.Create(tmp)
	if errors.Is(err, fs.ErrNotExist) {
		// A directory this store made was removed by someone else.
		l.forgetDir(dir)
		if err := l.ensureDir(dir); err != nil {
			return "", nil, err
		}
		f, err = l.fs.Create(tmp)
	}
	if err != nil {
		return "", nil, fmt.Errorf("storage: create %s: %w", tmp, err)
	}
	if _, err := f.Write(data); err != nil {
		err = errors.Join(err, f.Close())
		_ = l.fs.Remove(tmp)
		return "", nil, fmt.Errorf("storage: write %s: %w", tmp, err)
	}
	return tmp, f, nil
}

func (l *Local) syncDir(dir string) error {
	if !l.sync {
		return nil
	}
	if err := l.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("storage: sync directory %s: %w", dir, err)
	}
	return nil
}

// PutIfAbsent implements Store with link(2), which fails if the target
// exists, so concurrent writers (goroutines or processes) race safely.
func (l *Local) PutIfAbsent(ctx context.Context, name string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := l.path(name)
	if err != nil {
		return err
	}
	tmp, err := l.writeTemp(p, data)
	if err != nil {
		return err
	}
	lerr := l.fs.Link(tmp, p)
	rerr := l.fs.Remove(tmp)
	if lerr != nil {
		if errors.Is(lerr, fs.ErrExist) {
			// The winner may not have synced the directory yet; do it so
			// that what this caller now acts upon survives a crash.
			if err := l.syncDir(filepath.Dir(p)); err != nil {
				return err
			}
			return fmt.Errorf("put %s: %w", name, ErrExist)
		}
		return fmt.Errorf("storage: link %s: %w", p, lerr)
	}
	if rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		return fmt.Errorf("storage: remove %s: %w", tmp, rerr)
	}
	return l.syncDir(filepath.Dir(p))
}

// Put implements Store with rename(2), which replaces atomically. Under a
// context with a SyncGroup it only writes the temporary file; the group's
// Sync fsyncs, renames and fsyncs the directory.
func (l *Local) Put(ctx context.Context, name string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := l.path(name)
	if err != nil {
		return err
	}
	if g := syncGroupOf(ctx); g != nil {
		tmp, f, err := l.writeTempOpen(p, data)
		if err != nil {
			return err
		}
		added, err := g.add(deferredPut{l: l, f: f, tmp: tmp, final: p})
		if err != nil {
			return err
		}
		if added {
			return nil
		}
		if f != nil {
			removeTemps([]deferredPut{{l: l, f: f, tmp: tmp}})
		}
	}
	tmp, err := l.writeTemp(p, data)
	if err != nil {
		return err
	}
	if err := l.fs.Rename(tmp, p); err != nil {
		_ = l.fs.Remove(tmp)
		return fmt.Errorf("storage: rename %s: %w", p, err)
	}
	return l.syncDir(filepath.Dir(p))
}

// PutVolatile implements VolatilePutter: Put's temporary file and
// rename(2), without the fsync of the file or of the directory. Readers
// see the old object or the whole new one while the machine runs; after a
// crash the object may be the old one, missing, empty or cut short.
func (l *Local) PutVolatile(ctx context.Context, name string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := l.path(name)
	if err != nil {
		return err
	}
	tmp, err := l.writeTempSync(p, data, false)
	if err != nil {
		return err
	}
	if err := l.fs.Rename(tmp, p); err != nil {
		_ = l.fs.Remove(tmp)
		return fmt.Errorf("storage: rename %s: %w", p, err)
	}
	return nil
}

// Get implements Store.
func (l *Local) Get(ctx context.Context, name string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := l.path(name)
	if err != nil {
		return nil, err
	}
	b, err := l.fs.ReadFile(p)
	if err != nil {
		// A folder ("a" while "a/b" exists) or a path through an object
		// ("a/b" while "a" is an object) names no object either.
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR) {
			return nil, fmt.Errorf("get %s: %w", name, ErrNotExist)
		}
		return nil, fmt.Errorf("storage: read %s: %w", p, err)
	}
	return b, nil
}

// List implements Store.
func (l *Local) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	// Walk the deepest directory that the prefix fully names.
	base := l.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		base = filepath.Join(l.root, filepath.FromSlash(prefix[:i]))
	}
	var out []ObjectInfo
	err := l.fs.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil // no such folder, or a prefix through an object
			}
			return err
		}
		if d.IsDir() || strings.HasSuffix(p, tmpSuffix) {
			return nil
		}
		rel, err := filepath.Rel(l.root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !strings.HasPrefix(rel, prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // deleted while listing
			}
			return err
		}
		out = append(out, ObjectInfo{Name: rel, Size: info.Size(), ModTime: info.ModTime().UnixNano()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: list %s: %w", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Delete implements Store.
func (l *Local) Delete(ctx context.Context, names ...string) error {
	var errs []error
	dirs := map[string]bool{}
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		p, err := l.path(n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		err = l.fs.Remove(p)
		switch {
		case err == nil:
			dirs[filepath.Dir(p)] = true
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST):
			// Already gone, a path through an object, or a folder (which
			// names no object): nothing to do.
		default:
			errs = append(errs, fmt.Errorf("storage: delete %s: %w", p, err))
		}
	}
	// Sync in a fixed order so a failure reads the same every time.
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if err := l.syncDir(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
