package statestore

import (
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Defaults applied by EnsureDefaults.
const (
	DefaultSnapshotEvery       = 10
	DefaultSnapshotDeltaRatio  = 0.5
	DefaultSnapshotMaxEvery    = 100
	DefaultMinVersionsToRetain = 100
)

// Options configures a Store. Only the schemas are required; every other
// zero field takes its default.
type Options struct {
	// KeySchema is the schema of the key columns (one or more). Key
	// columns may be booleans, fixed-width types (integers, floats,
	// dates, times, timestamps, durations, decimals, intervals,
	// fixed-size binary), strings and binaries (also large and view
	// forms), and structs of these.
	KeySchema *arrow.Schema
	// ValueSchema is the schema of the value columns; any type Arrow IPC
	// carries (lists included) except unions, at any depth: Load and
	// Maintain concatenate rows, which arrow-go cannot do for unions. It
	// may have no columns (a set of keys). Its field names must differ
	// from the key's.
	ValueSchema *arrow.Schema
	// SnapshotEvery (K) is the fewest versions between two snapshots:
	// Maintain considers writing one when the newest snapshot is K or
	// more versions behind. Default 10.
	SnapshotEvery int
	// SnapshotDeltaRatio scales snapshots to the state: once K versions
	// behind, Maintain writes a snapshot only when the deltas after the
	// newest snapshot hold at least this fraction of its bytes. A snapshot
	// rewrites the whole state, so writing one for a few changed keys
	// costs as much as the state, not the changes; waiting until the
	// changes weigh a fraction r of the state makes the amortized cost of
	// snapshots about 2/r times the bytes of the deltas, and bounds a
	// load's replay to about r times the snapshot's bytes. Default 0.5.
	SnapshotDeltaRatio float64
	// SnapshotMaxEvery is the most versions between two snapshots,
	// whatever the ratio: it bounds how many deltas a load reads and how
	// many files Purge keeps. Default max(100, SnapshotEvery).
	SnapshotMaxEvery int
	// MinVersionsToRetain is how many of the newest versions Purge keeps
	// loadable. Default 100.
	MinVersionsToRetain int
	// Allocator allocates every Arrow buffer the store creates. Default
	// memory.DefaultAllocator.
	Allocator memory.Allocator
	// UniqueUpserts says the caller never passes a key twice among one
	// commit's upserts (a hash group-by's changes cannot repeat a key), so
	// a commit without deletes skips the duplicate-key check, which builds
	// a map of every changed key. A commit with deletes is always checked.
	UniqueUpserts bool
	// Backend names the backend that keeps the folder: BackendMemory (the
	// default) for this package's Store, another name for a disk-backed
	// store built on it (statestore/pebblestore). Open refuses a folder
	// another backend keeps with a *BackendMismatchError, and marks the
	// folder for a backend other than memory. Default BackendMemory.
	Backend string
}

// EnsureDefaults fills the zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.SnapshotEvery == 0 {
		o.SnapshotEvery = DefaultSnapshotEvery
	}
	if o.SnapshotDeltaRatio == 0 {
		o.SnapshotDeltaRatio = DefaultSnapshotDeltaRatio
	}
	if o.SnapshotMaxEvery == 0 {
		o.SnapshotMaxEvery = max(DefaultSnapshotMaxEvery, o.SnapshotEvery)
	}
	if o.MinVersionsToRetain == 0 {
		o.MinVersionsToRetain = DefaultMinVersionsToRetain
	}
	if o.Allocator == nil {
		o.Allocator = memory.DefaultAllocator
	}
	if o.Backend == "" {
		o.Backend = BackendMemory
	}
}

// Validate reports every problem with o, joined; call it after
// EnsureDefaults.
func (o Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("statestore: options: "+format, args...))
	}
	if o.KeySchema == nil {
		bad("KeySchema is required")
	} else {
		if o.KeySchema.NumFields() == 0 {
			bad("KeySchema has no columns; a key needs at least one")
		}
		for _, f := range o.KeySchema.Fields() {
			if err := checkKeyType(f.Type); err != nil {
				bad("key column %q: %v", f.Name, err)
			}
		}
	}
	if o.ValueSchema == nil {
		bad("ValueSchema is required (an empty schema for a set of keys)")
	} else {
		for _, f := range o.ValueSchema.Fields() {
			if u := findUnion(f.Type); u != nil {
				bad("value column %q: type %s holds %s; the store cannot merge unions into snapshots (arrow-go does not concatenate them)", f.Name, f.Type, u)
			}
		}
	}
	if o.KeySchema != nil && o.ValueSchema != nil {
		seen := map[string]bool{}
		for _, f := range o.KeySchema.Fields() {
			if seen[f.Name] {
				bad("column name %q appears twice in KeySchema", f.Name)
			}
			seen[f.Name] = true
		}
		for _, f := range o.ValueSchema.Fields() {
			if seen[f.Name] {
				bad("column name %q appears twice in KeySchema and ValueSchema", f.Name)
			}
			seen[f.Name] = true
		}
	}
	if o.SnapshotEvery < 1 {
		bad("SnapshotEvery is %d; it must be at least 1 (0 means the default, %d)", o.SnapshotEvery, DefaultSnapshotEvery)
	}
	if !(o.SnapshotDeltaRatio > 0) || math.IsInf(o.SnapshotDeltaRatio, 1) {
		bad("SnapshotDeltaRatio is %v; it must be a positive number (0 means the default, %v)", o.SnapshotDeltaRatio, DefaultSnapshotDeltaRatio)
	}
	if o.SnapshotMaxEvery < o.SnapshotEvery {
		bad("SnapshotMaxEvery is %d; it must be at least SnapshotEvery (%d) (0 means max(%d, SnapshotEvery))", o.SnapshotMaxEvery, o.SnapshotEvery, DefaultSnapshotMaxEvery)
	}
	if o.MinVersionsToRetain < 1 {
		bad("MinVersionsToRetain is %d; it must be at least 1 (0 means the default, %d)", o.MinVersionsToRetain, DefaultMinVersionsToRetain)
	}
	if o.Allocator == nil {
		bad("Allocator is nil; call EnsureDefaults first")
	}
	return errors.Join(errs...)
}

// Join returns the schema of a state row: the key columns, then the value
// columns.
func Join(key, value *arrow.Schema) *arrow.Schema {
	fields := make([]arrow.Field, 0, key.NumFields()+value.NumFields())
	fields = append(fields, key.Fields()...)
	fields = append(fields, value.Fields()...)
	return arrow.NewSchema(fields, nil)
}

// findUnion returns the first union type in dt (dt itself or a type nested
// in it), or nil.
func findUnion(dt arrow.DataType) arrow.DataType {
	switch t := dt.(type) {
	case arrow.UnionType:
		return dt
	case arrow.ExtensionType:
		return findUnion(t.StorageType())
	case *arrow.DictionaryType:
		return findUnion(t.ValueType)
	case *arrow.RunEndEncodedType:
		return findUnion(t.Encoded())
	case arrow.NestedType: // lists, maps, structs
		for _, f := range t.Fields() {
			if u := findUnion(f.Type); u != nil {
				return u
			}
		}
	}
	return nil
}
