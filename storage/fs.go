package storage

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// FS holds the file-system calls the local store makes, and no others, so
// tests can inject faults or simulate a crash (pebble's vfs).
type FS interface {
	Create(name string) (File, error)
	ReadFile(name string) ([]byte, error)
	Link(oldname, newname string) error
	Rename(oldname, newname string) error
	Remove(name string) error
	MkdirAll(dir string, perm os.FileMode) error
	SyncDir(dir string) error
	WalkDir(root string, fn fs.WalkDirFunc) error
}

// File is a file opened for writing.
type File interface {
	io.Writer
	Sync() error
	Close() error
}

// OSFS is the operating system's file system.
type OSFS struct{}

// Create implements FS; the file must not exist.
func (OSFS) Create(name string) (File, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
}

// ReadFile implements FS.
func (OSFS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }

// Link implements FS.
func (OSFS) Link(oldname, newname string) error { return os.Link(oldname, newname) }

// Rename implements FS.
func (OSFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// Remove implements FS.
func (OSFS) Remove(name string) error { return os.Remove(name) }

// MkdirAll implements FS.
func (OSFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

// SyncDir implements FS.
func (OSFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// WalkDir implements FS.
func (OSFS) WalkDir(root string, fn fs.WalkDirFunc) error { return filepath.WalkDir(root, fn) }
