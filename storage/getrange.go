package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// RangeGetter is an optional capability of a Store: GetRange returns the
// bytes of object name from byte off, at most n of them (fewer where the
// object ends, none from its end on), or an error wrapping ErrNotExist. A
// reader of one part of a large object (a partition's section of a
// bundled state file) reads only that part: a pread on a local disk, a
// ranged GET on S3.
type RangeGetter interface {
	GetRange(ctx context.Context, name string, off, n int64) ([]byte, error)
}

// GetRange reads [off, off+n) of name with s's GetRange, or, when s has
// none, with Get and a slice of its bytes.
func GetRange(ctx context.Context, s Store, name string, off, n int64) ([]byte, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("storage: read %s: bad range %d+%d", name, off, n)
	}
	if r, ok := s.(RangeGetter); ok {
		return r.GetRange(ctx, name, off, n)
	}
	data, err := s.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	return cut(data, off, n), nil
}

// cut returns [off, off+n) of data, clipped to its end.
func cut(data []byte, off, n int64) []byte {
	size := int64(len(data))
	if off >= size {
		return nil
	}
	return data[off : off+min(n, size-off)]
}

// rangeReader is an optional capability of an FS: ReadRange reads
// [off, off+n) of a file, fewer bytes at its end.
type rangeReader interface {
	ReadRange(name string, off, n int64) ([]byte, error)
}

// ReadRange implements rangeReader with one pread.
func (OSFS) ReadRange(name string, off, n int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	// The buffer is for the bytes there are, not for n: a reader asks for
	// "up to n" (an index's guess, a length from a file) and a large n
	// must not allocate what the file does not hold.
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, syscall.EISDIR
	}
	if off >= fi.Size() {
		return nil, nil
	}
	buf := make([]byte, min(n, fi.Size()-off))
	got, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:got], nil
}

// GetRange implements RangeGetter: one pread when the store's FS can,
// else a read of the whole file.
func (l *Local) GetRange(ctx context.Context, name string, off, n int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("storage: read %s: bad range %d+%d", name, off, n)
	}
	r, ok := l.fs.(rangeReader)
	if !ok {
		data, err := l.Get(ctx, name)
		if err != nil {
			return nil, err
		}
		return cut(data, off, n), nil
	}
	p, err := l.path(name)
	if err != nil {
		return nil, err
	}
	b, err := r.ReadRange(p, off, n)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR) {
			return nil, fmt.Errorf("get %s: %w", name, ErrNotExist)
		}
		return nil, fmt.Errorf("storage: read %s: %w", p, err)
	}
	return b, nil
}

// GetRange forwards to the base's GetRange (Get and a slice when it has
// none).
func (p *prefixed) GetRange(ctx context.Context, name string, off, n int64) ([]byte, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	return GetRange(ctx, p.base, p.prefix+name, off, n)
}
