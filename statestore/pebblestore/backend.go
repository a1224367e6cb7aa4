package pebblestore

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

// BackendOptions configures a Backend: one per query (or process), sharing
// one block cache among every operator partition it opens.
type BackendOptions struct {
	// Dir is the local root of the working copies: partition p of operator
	// op lives in Dir/<op>/<p>. Required.
	Dir string
	// CacheSize is the bytes of the shared block cache. Default 64 MiB.
	CacheSize int64
	// MemTableSize, UploadEvery and MaxSSTableSize are as in Options.
	MemTableSize   int
	UploadEvery    int
	MaxSSTableSize int64
}

// Backend opens pebble Stores for an engine (statestore.Backend). Memory:
// CacheSize + 2·MemTableSize per open partition, plus Go memory for the
// batch being merged.
type Backend struct {
	opts  BackendOptions
	cache *pebble.Cache

	mu     sync.Mutex
	closed bool
}

var _ statestore.IndexedBackend = (*Backend)(nil)

// NewBackend returns a Backend. Close it after the query stops.
func NewBackend(o BackendOptions) (*Backend, error) {
	if o.Dir == "" {
		return nil, fmt.Errorf("pebblestore: backend options: Dir is required (the local root of the working copies)")
	}
	if o.CacheSize == 0 {
		o.CacheSize = 64 << 20
	}
	if o.CacheSize < 0 {
		return nil, fmt.Errorf("pebblestore: backend options: CacheSize is %d; it must be positive (0 means 64 MiB)", o.CacheSize)
	}
	return &Backend{opts: o, cache: pebble.NewCache(o.CacheSize)}, nil
}

// Name returns BackendName.
func (b *Backend) Name() string { return BackendName }

// Open opens partition p of operator op (statestore.Backend).
func (b *Backend) Open(ctx context.Context, st storage.Store, op string, p int, o statestore.Options) (statestore.DiskStore, error) {
	return b.open(ctx, st, op, p, o, "")
}

// OpenIndexed opens partition p of operator op with a time index on the
// column timeColumn (Options.TimeIndex; statestore.IndexedBackend).
func (b *Backend) OpenIndexed(ctx context.Context, st storage.Store, op string, p int, o statestore.Options, timeColumn string) (statestore.IndexedStore, error) {
	if timeColumn == "" {
		return nil, fmt.Errorf("pebblestore: open %s with a time index: no column named", st.URL())
	}
	return b.open(ctx, st, op, p, o, timeColumn)
}

func (b *Backend) open(ctx context.Context, st storage.Store, op string, p int, o statestore.Options, timeColumn string) (*Store, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("pebblestore: open %s: the backend is closed", st.URL())
	}
	s, err := Open(ctx, st, Options{
		State:          o,
		Dir:            filepath.Join(b.opts.Dir, filepath.FromSlash(op), strconv.Itoa(p)),
		Cache:          b.cache,
		MemTableSize:   b.opts.MemTableSize,
		UploadEvery:    b.opts.UploadEvery,
		MaxSSTableSize: b.opts.MaxSSTableSize,
		TimeIndex:      timeColumn,
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Close releases the shared cache once every Store is closed (pebble keeps
// it alive while a Store uses it).
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		b.cache.Unref()
	}
	return nil
}
