package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

// FormatVersion is the checkpoint format this build writes and reads.
const FormatVersion = checkpoint.FormatVersion

// The checkpoint's file formats, defined in package checkpoint; these
// names keep code written against the engine compiling.
type (
	// Metadata is checkpoint.Metadata: the metadata file, written once.
	Metadata = checkpoint.Metadata
	// OffsetsEntry is checkpoint.OffsetsEntry: offsets/N, the
	// write-ahead plan of batch N.
	OffsetsEntry = checkpoint.OffsetsEntry
	// SourceOffset is checkpoint.SourceOffset: one source's range in a
	// batch.
	SourceOffset = checkpoint.SourceOffset
	// Conf is checkpoint.Conf: the part of the query that must not change
	// across restarts.
	Conf = checkpoint.Conf
	// OperatorConf is checkpoint.OperatorConf: a stateful operator and
	// the shape of its state.
	OperatorConf = checkpoint.OperatorConf
	// CommitEntry is checkpoint.CommitEntry: commits/N, batch N is done.
	CommitEntry = checkpoint.CommitEntry
	// ForkedFrom is checkpoint.ForkedFrom: where a forked checkpoint came
	// from, recorded in its metadata file.
	ForkedFrom = checkpoint.ForkedFrom
)

// checkpointLogs is an open checkpoint directory.
type checkpointLogs struct {
	store    storage.Store
	offsets  *offsetlog.Log[OffsetsEntry]
	commits  *offsetlog.Log[CommitEntry]
	progress *offsetlog.Log[Progress]
	meta     Metadata
}

func newRunID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// openCheckpoint reads the metadata file, creating it on first use.
func openCheckpoint(ctx context.Context, store storage.Store, name string, now time.Time) (*checkpointLogs, error) {
	cp := &checkpointLogs{
		store:    store,
		offsets:  offsetlog.New[OffsetsEntry](store, checkpoint.OffsetsDir),
		commits:  offsetlog.New[CommitEntry](store, checkpoint.CommitsDir),
		progress: offsetlog.New[Progress](store, checkpoint.ProgressDir),
	}
	meta, err := ReadMetadata(ctx, store)
	if errors.Is(err, storage.ErrNotExist) {
		m := Metadata{Version: FormatVersion, ID: newRunID(), Name: name, Created: now.UTC().Format(time.RFC3339Nano)}
		b, _ := checkpoint.EncodeMetadata(m)
		if err := store.PutIfAbsent(ctx, checkpoint.MetadataFile, b); err != nil && !storage.IsExist(err) {
			return nil, fmt.Errorf("engine: write %s/%s: %w", store.URL(), checkpoint.MetadataFile, err)
		}
		meta, err = ReadMetadata(ctx, store) // whoever won the race
	}
	if err != nil {
		return nil, err
	}
	cp.meta = meta
	return cp, nil
}

// StateFolder returns the storage view, in the checkpoint cp, of store
// ("" for an operator's one store) of operator's state in partition, on
// which a statestore.Store opens as the engine opens it: the partition's
// own files, and its deltas that the batches bundled with the other
// partitions' (state format 3, statestore.Group). The view learns which
// bundles exist at its first use: a view of a running query's checkpoint
// is a look at one moment, and a later look takes a new view. Tools read
// a partition's state through it (onceflow checkpoint inspect and state).
func StateFolder(cp storage.Store, operator string, partition int, store string) storage.Store {
	g := statestore.NewGroup(storage.Sub(cp, checkpoint.OperatorDir(operator)), store)
	return g.Partition(partition, storage.Sub(cp, checkpoint.StoreDir(operator, partition, store)))
}

// ReadMetadata reads a checkpoint's metadata file (checkpoint.ReadMetadata).
func ReadMetadata(ctx context.Context, store storage.Store) (Metadata, error) {
	return checkpoint.ReadMetadata(ctx, store)
}
