package storage_test

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/onceflow/onceflow/storage"
)

// errInjected is the error faultFS injects.
var errInjected = errors.New("injected fault")

// faultFS passes calls to an FS and fails the failAt-th one (1-based),
// counting every FS and File call. With sticky set every later call fails
// too, as if the process had died there. A failed Write writes half its
// bytes first, as a full disk might.
type faultFS struct {
	storage.FS
	failAt int
	sticky bool

	mu    sync.Mutex
	calls int
	fired bool
	ops   []string // the calls made, for messages
}

func (f *faultFS) hit(op, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.ops = append(f.ops, op+" "+path.Base(name))
	if f.calls == f.failAt || (f.sticky && f.fired) {
		f.fired = true
		return fmt.Errorf("%s %s: %w", op, name, errInjected)
	}
	return nil
}

// op names the nth call made, or says there was none.
func (f *faultFS) op(n int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n < 1 || n > len(f.ops) {
		return "no such call"
	}
	return f.ops[n-1]
}

func (f *faultFS) injected() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fired
}

func (f *faultFS) Create(name string) (storage.File, error) {
	if err := f.hit("create", name); err != nil {
		return nil, err
	}
	file, err := f.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, name: name}, nil
}

func (f *faultFS) ReadFile(name string) ([]byte, error) {
	if err := f.hit("read", name); err != nil {
		return nil, err
	}
	return f.FS.ReadFile(name)
}

func (f *faultFS) Link(oldname, newname string) error {
	if err := f.hit("link", newname); err != nil {
		return err
	}
	return f.FS.Link(oldname, newname)
}

func (f *faultFS) Rename(oldname, newname string) error {
	if err := f.hit("rename", newname); err != nil {
		return err
	}
	return f.FS.Rename(oldname, newname)
}

func (f *faultFS) Remove(name string) error {
	if err := f.hit("remove", name); err != nil {
		return err
	}
	return f.FS.Remove(name)
}

func (f *faultFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := f.hit("mkdir", dir); err != nil {
		return err
	}
	return f.FS.MkdirAll(dir, perm)
}

func (f *faultFS) SyncDir(dir string) error {
	if err := f.hit("syncdir", dir); err != nil {
		return err
	}
	return f.FS.SyncDir(dir)
}

func (f *faultFS) WalkDir(root string, fn fs.WalkDirFunc) error {
	if err := f.hit("walk", root); err != nil {
		return err
	}
	return f.FS.WalkDir(root, fn)
}

type faultFile struct {
	storage.File
	fs   *faultFS
	name string
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.hit("write", f.name); err != nil {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, err
	}
	return f.File.Write(p)
}

func (f *faultFile) Sync() error {
	if err := f.fs.hit("sync", f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultFile) Close() error {
	err := f.fs.hit("close", f.name)
	// Close the real file whatever happens, so no descriptor leaks.
	return errors.Join(err, f.File.Close())
}

// memFS is an in-memory FS that can crash: Crash keeps only what was made
// durable, the way a power cut treats a POSIX file system with the usual
// rules (pebble's CrashableMem follows the same idea):
//
//   - a file's bytes survive once the file was synced (the bytes at the
//     last Sync);
//   - a directory entry (a created, linked, renamed or removed name, and a
//     new directory's entry in its parent) survives once that directory was
//     synced with SyncDir.
//
// Everything else may be lost, and Crash loses all of it: the harshest
// outcome the rules allow.
type memFS struct {
	mu  sync.Mutex
	top *memNode // "/"
}

type memNode struct {
	dir bool
	// Directories: the entries now, and as of the last SyncDir.
	live, durable map[string]*memNode
	// Files: the bytes now, and as of the last Sync.
	data, synced []byte
}

func newMemDir() *memNode {
	return &memNode{dir: true, live: map[string]*memNode{}, durable: map[string]*memNode{}}
}

func newMemFS() *memFS { return &memFS{top: newMemDir()} }

// Crash drops everything that was not made durable.
func (m *memFS) Crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[*memNode]*memNode{}
	var rebuild func(n *memNode) *memNode
	rebuild = func(n *memNode) *memNode {
		if c, ok := seen[n]; ok {
			return c // a hard link: keep the sharing
		}
		if !n.dir {
			c := &memNode{data: slices.Clone(n.synced), synced: slices.Clone(n.synced)}
			seen[n] = c
			return c
		}
		c := newMemDir()
		seen[n] = c
		for name, child := range n.durable {
			cc := rebuild(child)
			c.live[name] = cc
			c.durable[name] = cc
		}
		return c
	}
	m.top = rebuild(m.top)
}

func pathErr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

// split returns the elements of an absolute, clean path.
func (m *memFS) split(name string) ([]string, error) {
	if name == "/" {
		return nil, nil
	}
	rest, ok := strings.CutPrefix(name, "/")
	if !ok || path.Clean(name) != name {
		return nil, fs.ErrInvalid
	}
	return strings.Split(rest, "/"), nil
}

// lookup walks to name; the caller holds mu.
func (m *memFS) lookup(op, name string) (*memNode, error) {
	els, err := m.split(name)
	if err != nil {
		return nil, pathErr(op, name, err)
	}
	n := m.top
	for _, el := range els {
		if !n.dir {
			return nil, pathErr(op, name, syscall.ENOTDIR)
		}
		c, ok := n.live[el]
		if !ok {
			return nil, pathErr(op, name, fs.ErrNotExist)
		}
		n = c
	}
	return n, nil
}

// parent returns the directory holding name and name's last element.
func (m *memFS) parent(op, name string) (*memNode, string, error) {
	dir, base := path.Dir(name), path.Base(name)
	p, err := m.lookup(op, dir)
	if err != nil {
		return nil, "", err
	}
	if !p.dir {
		return nil, "", pathErr(op, name, syscall.ENOTDIR)
	}
	return p, base, nil
}

func (m *memFS) Create(name string) (storage.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, base, err := m.parent("open", name)
	if err != nil {
		return nil, err
	}
	if _, ok := p.live[base]; ok {
		return nil, pathErr("open", name, fs.ErrExist)
	}
	n := &memNode{}
	p.live[base] = n
	return &memFile{fs: m, n: n}, nil
}

func (m *memFS) ReadFile(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("open", name)
	if err != nil {
		return nil, err
	}
	if n.dir {
		return nil, pathErr("read", name, syscall.EISDIR)
	}
	return slices.Clone(n.data), nil
}

func (m *memFS) Link(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("link", oldname)
	if err != nil {
		return err
	}
	p, base, err := m.parent("link", newname)
	if err != nil {
		return err
	}
	if _, ok := p.live[base]; ok {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: fs.ErrExist}
	}
	p.live[base] = n
	return nil
}

func (m *memFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	op, obase, err := m.parent("rename", oldname)
	if err != nil {
		return err
	}
	n, ok := op.live[obase]
	if !ok {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrNotExist}
	}
	np, nbase, err := m.parent("rename", newname)
	if err != nil {
		return err
	}
	if t, ok := np.live[nbase]; ok && t.dir {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.EISDIR}
	}
	delete(op.live, obase)
	np.live[nbase] = n
	return nil
}

func (m *memFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, base, err := m.parent("remove", name)
	if err != nil {
		return err
	}
	n, ok := p.live[base]
	if !ok {
		return pathErr("remove", name, fs.ErrNotExist)
	}
	if n.dir && len(n.live) > 0 {
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	delete(p.live, base)
	return nil
}

func (m *memFS) MkdirAll(dir string, _ os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	els, err := m.split(dir)
	if err != nil {
		return pathErr("mkdir", dir, err)
	}
	n := m.top
	for _, el := range els {
		c, ok := n.live[el]
		if !ok {
			c = newMemDir()
			n.live[el] = c
		}
		if !c.dir {
			return pathErr("mkdir", dir, syscall.ENOTDIR)
		}
		n = c
	}
	return nil
}

func (m *memFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("open", dir)
	if err != nil {
		return err
	}
	if !n.dir {
		return pathErr("sync", dir, syscall.ENOTDIR)
	}
	n.durable = make(map[string]*memNode, len(n.live))
	for k, v := range n.live {
		n.durable[k] = v
	}
	return nil
}

// WalkDir walks a snapshot of the tree taken at the call, in lexical order.
func (m *memFS) WalkDir(root string, fn fs.WalkDirFunc) error {
	type entry struct {
		path string
		d    memDirEntry
	}
	m.mu.Lock()
	n, err := m.lookup("lstat", root)
	var entries []entry
	if err == nil {
		var walk func(p string, n *memNode)
		walk = func(p string, n *memNode) {
			entries = append(entries, entry{p, memDirEntry{name: path.Base(p), dir: n.dir, size: int64(len(n.data))}})
			if n.dir {
				for _, k := range slices.Sorted(maps.Keys(n.live)) {
					walk(p+"/"+k, n.live[k])
				}
			}
		}
		walk(root, n)
	}
	m.mu.Unlock()
	if err != nil {
		return fn(root, nil, err)
	}
	for _, e := range entries {
		if err := fn(e.path, e.d, nil); err != nil {
			if errors.Is(err, fs.SkipAll) {
				return nil
			}
			return err
		}
	}
	return nil
}

type memFile struct {
	fs     *memFS
	n      *memNode
	closed bool
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, os.ErrClosed
	}
	f.n.data = append(f.n.data, p...)
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return os.ErrClosed
	}
	f.n.synced = slices.Clone(f.n.data)
	return nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return os.ErrClosed
	}
	f.closed = true
	return nil
}

type memDirEntry struct {
	name string
	dir  bool
	size int64
}

func (e memDirEntry) Name() string               { return e.name }
func (e memDirEntry) IsDir() bool                { return e.dir }
func (e memDirEntry) Info() (fs.FileInfo, error) { return e, nil }
func (e memDirEntry) Type() fs.FileMode {
	if e.dir {
		return fs.ModeDir
	}
	return 0
}
func (e memDirEntry) Size() int64        { return e.size }
func (e memDirEntry) Mode() fs.FileMode  { return e.Type() | 0o644 }
func (e memDirEntry) ModTime() time.Time { return time.Time{} }
func (e memDirEntry) Sys() any           { return nil }
