package faultstore

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/onceflow/onceflow/storage"
)

// FS is a storage.FS for storage.OpenLocal that passes every call to an
// inner FS unless its injector picks the call for a fault. It is where a
// local store's torn writes and failed fsyncs really happen: the store's
// own code meets them and must leave the old object or the new one.
type FS struct {
	inner storage.FS
	root  string
	in    *Injector
}

var _ storage.FS = (*FS)(nil)

// WrapFS returns inner with in's faults on its calls. root is the
// directory the local store will be opened on: rules match file paths
// relative to it, and a temporary file under the name of the object it is
// about to become ("commits/7" for "commits/7.<pid>.<seq>.tmp"). A nil
// inner is the operating system's file system.
func WrapFS(inner storage.FS, root string, in *Injector) *FS {
	if inner == nil {
		inner = storage.OSFS{}
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		abs = root
	}
	return &FS{inner: inner, root: filepath.Clean(abs), in: in}
}

// OpenLocal opens a local store on dir whose file-system calls and store
// calls both go through in: storage.OpenLocal with a WrapFS, wrapped in
// Wrap.
func OpenLocal(dir string, in *Injector) (*Store, error) {
	l, err := storage.OpenLocal(dir, storage.LocalOptions{FS: WrapFS(nil, dir, in)})
	if err != nil {
		return nil, err
	}
	return Wrap(l, in), nil
}

// name is the object name a path stands for.
func (f *FS) name(p string) string {
	rel, err := filepath.Rel(f.root, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		rel = p
	}
	rel = filepath.ToSlash(rel)
	if base, ok := strings.CutSuffix(rel, ".tmp"); ok {
		// <name>.<pid>.<seq>.tmp
		for range 2 {
			i := strings.LastIndexByte(base, '.')
			if i < 0 || !digits(base[i+1:]) {
				return rel
			}
			base = base[:i]
		}
		return base
	}
	return rel
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// fail decides a call without bytes: it returns the call's error, after
// waiting when the fault is Slow.
func (f *FS) fail(op Op, p string) error {
	d, ok := f.in.decide(op, f.name(p), 0)
	if !ok {
		return nil
	}
	if d.ev.Fault == Slow {
		return d.wait(context.Background())
	}
	return d.err()
}

// Create implements storage.FS.
func (f *FS) Create(name string) (storage.File, error) {
	if err := f.fail(OpFSCreate, name); err != nil {
		return nil, err
	}
	file, err := f.inner.Create(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, name: f.name(name)}, nil
}

// ReadFile implements storage.FS.
func (f *FS) ReadFile(name string) ([]byte, error) {
	if err := f.fail(OpFSRead, name); err != nil {
		return nil, err
	}
	return f.inner.ReadFile(name)
}

// Link implements storage.FS; rules match the new name.
func (f *FS) Link(oldname, newname string) error {
	if err := f.fail(OpFSLink, newname); err != nil {
		return err
	}
	return f.inner.Link(oldname, newname)
}

// Rename implements storage.FS; rules match the new name.
func (f *FS) Rename(oldname, newname string) error {
	if err := f.fail(OpFSRename, newname); err != nil {
		return err
	}
	return f.inner.Rename(oldname, newname)
}

// Remove implements storage.FS.
func (f *FS) Remove(name string) error {
	if err := f.fail(OpFSRemove, name); err != nil {
		return err
	}
	return f.inner.Remove(name)
}

// MkdirAll implements storage.FS; it never gets a fault.
func (f *FS) MkdirAll(dir string, perm os.FileMode) error { return f.inner.MkdirAll(dir, perm) }

// SyncDir implements storage.FS.
func (f *FS) SyncDir(dir string) error {
	if err := f.fail(OpFSSyncDir, dir); err != nil {
		return err
	}
	return f.inner.SyncDir(dir)
}

// WalkDir implements storage.FS; rules match the walked directory.
func (f *FS) WalkDir(root string, fn fs.WalkDirFunc) error {
	if err := f.fail(OpFSWalk, root); err != nil {
		return err
	}
	return f.inner.WalkDir(root, fn)
}

// faultFile is a file created through FS.
type faultFile struct {
	storage.File
	fs   *FS
	name string
}

// Write implements storage.File: a Torn fault writes the first part of p
// and reports io.ErrShortWrite.
func (w *faultFile) Write(p []byte) (int, error) {
	d, ok := w.fs.in.decide(OpFSWrite, w.name, len(p))
	if !ok {
		return w.File.Write(p)
	}
	switch d.ev.Fault {
	case Slow:
		_ = d.wait(context.Background())
		return w.File.Write(p)
	case Torn:
		n, err := w.File.Write(p[:d.keep])
		if err != nil {
			return n, err
		}
		return n, d.err()
	}
	return 0, d.err()
}

// Sync implements storage.File.
func (w *faultFile) Sync() error {
	if d, ok := w.fs.in.decide(OpFSSync, w.name, 0); ok {
		if d.ev.Fault != Slow {
			return d.err()
		}
		_ = d.wait(context.Background())
	}
	return w.File.Sync()
}
