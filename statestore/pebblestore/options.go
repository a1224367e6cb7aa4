package pebblestore

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/onceflow/onceflow/statestore"
)

// BackendName is the name this backend records in a state folder's backend
// file (statestore.ReadBackend).
const BackendName = "pebble"

// Defaults applied by EnsureDefaults.
const (
	DefaultMemTableSize   = 4 << 20
	DefaultUploadEvery    = 10
	DefaultMaxSSTableSize = 16 << 20
)

// Options configures a Store. State and Dir are required; every other zero
// field takes its default.
type Options struct {
	// State configures the folder's files as for the in-memory backend:
	// schemas, MinVersionsToRetain, Allocator, UniqueUpserts. Its Backend
	// is set to BackendName; its snapshot policy is not used (see
	// UploadEvery).
	State statestore.Options
	// Dir is the local working directory of this (operator, partition):
	// the pebble LSM lives in Dir/db. It is a cache: losing it costs a
	// restore, never data. One Store uses it at a time.
	Dir string
	// Cache is the block cache, shared by every Store of a process (make
	// it with NewCache and Unref it when the last Store is closed).
	// Default: a cache of 8 MiB for this Store alone.
	Cache *pebble.Cache
	// MemTableSize is the size of one memtable; at most two exist per
	// Store, so the memory of N stores is about Cache + 2·N·MemTableSize.
	// Default 4 MiB.
	MemTableSize int
	// UploadEvery is how many versions Maintain lets pass between two
	// uploads of the LSM's files to the folder (an incremental snapshot:
	// files uploaded before are referenced, not uploaded again). A restore
	// on a machine without the working copy replays at most about this
	// many deltas. Default 10.
	UploadEvery int
	// MaxSSTableSize caps the size of one SST file, and so the memory an
	// upload holds at once (one file) and the granularity of incremental
	// uploads. Default 16 MiB.
	MaxSSTableSize int64
	// TimeIndex names a timestamp column of the state (key or value) that
	// the working copy indexes by time, so that ScanBefore finds the rows
	// a watermark expires in O(those rows). Default "": no index. Changing
	// it on an existing folder rebuilds the working copy's index once.
	TimeIndex string
}

// NewCache returns a block cache of size bytes to share among Stores. The
// caller calls its Unref when no Store uses it any more.
func NewCache(size int64) *pebble.Cache { return pebble.NewCache(size) }

// EnsureDefaults fills the zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	o.State.Backend = BackendName
	o.State.EnsureDefaults()
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.UploadEvery == 0 {
		o.UploadEvery = DefaultUploadEvery
	}
	if o.MaxSSTableSize == 0 {
		o.MaxSSTableSize = DefaultMaxSSTableSize
	}
}

// Validate reports every problem with o, joined; call it after
// EnsureDefaults.
func (o Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("pebblestore: options: "+format, args...))
	}
	if err := o.State.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.State.ValueSchema != nil {
		for _, f := range o.State.ValueSchema.Fields() {
			if err := checkValueType(f.Type); err != nil {
				bad("value column %q: %v", f.Name, err)
			}
		}
	}
	if o.State.KeySchema != nil {
		for _, f := range o.State.KeySchema.Fields() {
			if err := checkValueType(f.Type); err != nil {
				bad("key column %q: %v", f.Name, err)
			}
		}
	}
	if o.Dir == "" {
		bad("Dir is required (the local working directory of this operator partition)")
	}
	if o.MemTableSize < 1<<20 {
		bad("MemTableSize is %d; it must be at least 1 MiB (0 means the default, %d)", o.MemTableSize, DefaultMemTableSize)
	}
	if o.UploadEvery < 1 {
		bad("UploadEvery is %d; it must be at least 1 (0 means the default, %d)", o.UploadEvery, DefaultUploadEvery)
	}
	if o.MaxSSTableSize < 1<<20 {
		bad("MaxSSTableSize is %d; it must be at least 1 MiB (0 means the default, %d)", o.MaxSSTableSize, DefaultMaxSSTableSize)
	}
	return errors.Join(errs...)
}
