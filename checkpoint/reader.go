package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

// Reader reads a checkpoint and never writes it. Errors from the logs are
// offsetlog's: ErrNotFound for a missing entry, a *CorruptionError for an
// unreadable one.
type Reader struct {
	store    storage.Store
	offsets  *offsetlog.Log[OffsetsEntry]
	commits  *offsetlog.Log[CommitEntry]
	progress *offsetlog.Log[json.RawMessage]
}

// NewReader returns a Reader of the checkpoint in store. It reads nothing
// yet; Metadata checks that store holds a checkpoint of this format.
func NewReader(store storage.Store) *Reader {
	return &Reader{
		store:    store,
		offsets:  offsetlog.New[OffsetsEntry](store, OffsetsDir),
		commits:  offsetlog.New[CommitEntry](store, CommitsDir),
		progress: offsetlog.New[json.RawMessage](store, ProgressDir),
	}
}

// Store returns the checkpoint's store.
func (r *Reader) Store() storage.Store { return r.store }

// Metadata reads the metadata file (see ReadMetadata).
func (r *Reader) Metadata(ctx context.Context) (Metadata, error) {
	return ReadMetadata(ctx, r.store)
}

// ForkedFrom reads where the checkpoint was forked from (see
// ReadForkedFrom).
func (r *Reader) ForkedFrom(ctx context.Context) (ForkedFrom, bool, error) {
	return ReadForkedFrom(ctx, r.store)
}

// OffsetIDs returns the batch ids that have a write-ahead entry, ascending.
func (r *Reader) OffsetIDs(ctx context.Context) ([]int64, error) { return r.offsets.List(ctx) }

// Offsets returns batch id's write-ahead entry.
func (r *Reader) Offsets(ctx context.Context, id int64) (OffsetsEntry, error) {
	return r.offsets.Get(ctx, id)
}

// LatestOffsets returns the newest write-ahead entry; ok is false when
// there is none.
func (r *Reader) LatestOffsets(ctx context.Context) (id int64, e OffsetsEntry, ok bool, err error) {
	return r.offsets.Latest(ctx)
}

// CommitIDs returns the committed batch ids, ascending.
func (r *Reader) CommitIDs(ctx context.Context) ([]int64, error) { return r.commits.List(ctx) }

// Commit returns batch id's commit entry.
func (r *Reader) Commit(ctx context.Context, id int64) (CommitEntry, error) {
	return r.commits.Get(ctx, id)
}

// LatestCommit returns the newest commit entry; ok is false when no batch
// is committed.
func (r *Reader) LatestCommit(ctx context.Context) (id int64, e CommitEntry, ok bool, err error) {
	return r.commits.Latest(ctx)
}

// ProgressIDs returns the batch ids that have a progress record,
// ascending.
func (r *Reader) ProgressIDs(ctx context.Context) ([]int64, error) { return r.progress.List(ctx) }

// Progress decodes batch id's progress record into into (a pointer to the
// engine's Progress), refusing fields into does not have.
func (r *Reader) Progress(ctx context.Context, id int64, into any) error {
	name := ProgressFile(id)
	data, err := r.store.Get(ctx, name)
	if err != nil {
		if storage.IsNotExist(err) {
			return fmt.Errorf("%w: %s/%s", offsetlog.ErrNotFound, r.store.URL(), name)
		}
		return fmt.Errorf("offsetlog: get %s: %w", name, err)
	}
	return offsetlog.Decode(r.store.URL()+"/"+name, data, into)
}

// LatestProgress decodes the newest readable progress record into into
// and returns its batch id; ok is false when there is none. Progress
// records are written without waiting for the disk (no recovery reads
// them), so a crash can leave one torn: such a record (errors.Is
// offsetlog.ErrCorrupt) is passed over for the one before it.
func (r *Reader) LatestProgress(ctx context.Context, into any) (id int64, ok bool, err error) {
	ids, err := r.progress.List(ctx)
	if err != nil {
		return 0, false, err
	}
	for i := len(ids) - 1; i >= 0; i-- {
		err := r.Progress(ctx, ids[i], into)
		if errors.Is(err, offsetlog.ErrCorrupt) {
			continue
		}
		if err != nil {
			return 0, false, err
		}
		return ids[i], true, nil
	}
	return 0, false, nil
}

// State returns a view of operator's state folder in one partition, for
// statestore to read. Its deltas may be bundled with the other
// partitions' (state format 3) in state/<operator>/deltas/: read it
// through a statestore.Group's view (engine.StateFolder) to see them.
func (r *Reader) State(operator string, partition int) storage.Store {
	return storage.Sub(r.store, StateDir(operator, partition))
}

// StateStore returns a view of one named store of operator's state in a
// partition ("" is State).
func (r *Reader) StateStore(operator string, partition int, store string) storage.Store {
	return storage.Sub(r.store, StoreDir(operator, partition, store))
}

// Source returns a view of source i's folder.
func (r *Reader) Source(i int) storage.Store { return storage.Sub(r.store, SourceDir(i)) }
