package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

// Checkpoint folder and file names.
const (
	metadataName = "metadata"
	offsetsDir   = "offsets"
	commitsDir   = "commits"
	progressDir  = "progress"
	stateDir     = "state"
	sourcesDir   = "sources"

	// FormatVersion is the checkpoint format this build writes and reads.
	FormatVersion = 1
)

// Metadata is the checkpoint's metadata file, written once.
type Metadata struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
	Name    string `json:"name"`
	Created string `json:"created"`
}

// OffsetsEntry is offsets/N: the write-ahead plan of batch N. It is written
// before the batch runs, and a re-run of batch N uses it verbatim.
type OffsetsEntry struct {
	BatchID int64 `json:"batchId"`
	// TimestampMs is the batch timestamp (Unix milliseconds) from the
	// query's clock at planning time.
	TimestampMs int64 `json:"timestampMs"`
	// WatermarkMs is the event-time watermark in force for this batch
	// (Unix milliseconds; math.MinInt64 rendered as 0 when there is none).
	WatermarkMs int64 `json:"watermarkMs"`
	// RunID identifies the driver run that planned the batch.
	RunID   string         `json:"runId"`
	Sources []SourceOffset `json:"sources"`
	Conf    Conf           `json:"conf"`
}

// SourceOffset is one source's range in a batch.
type SourceOffset struct {
	Description string          `json:"description"`
	Start       json.RawMessage `json:"start"`
	End         json.RawMessage `json:"end"`
}

// Conf is the part of the query that must not change across restarts, as
// fixed at the query's first batch.
type Conf struct {
	StatePartitions int            `json:"statePartitions"`
	Operators       []OperatorConf `json:"operators,omitempty"`
	Sources         []string       `json:"sources"`
	// SourceIDs identify what each source reads (see SourceIdentifier);
	// a restart with another source at an index is refused.
	SourceIDs []string `json:"sourceIds,omitempty"`
	Sinks     []string `json:"sinks,omitempty"`
}

// OperatorConf names a stateful operator and the shape of its state.
type OperatorConf struct {
	ID          string   `json:"id"`
	Kind        string   `json:"kind"`
	Keys        []string `json:"keys"`
	KeySchema   string   `json:"keySchema"`
	StateSchema string   `json:"stateSchema"`
}

// CommitEntry is commits/N: batch N is done.
type CommitEntry struct {
	BatchID int64  `json:"batchId"`
	RunID   string `json:"runId"`
	// NextWatermarkMs is the watermark computed at the end of this batch,
	// in force from batch N+1 on.
	NextWatermarkMs int64 `json:"nextWatermarkMs"`
	// EventTimeMaxMs is, per source, the newest event time seen up to and
	// including this batch (0: none yet). The watermark is derived from it.
	EventTimeMaxMs []int64 `json:"eventTimeMaxMs,omitempty"`
}

// checkpoint is an open checkpoint directory.
type checkpoint struct {
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
func openCheckpoint(ctx context.Context, store storage.Store, name string, now time.Time) (*checkpoint, error) {
	cp := &checkpoint{
		store:    store,
		offsets:  offsetlog.New[OffsetsEntry](store, offsetsDir),
		commits:  offsetlog.New[CommitEntry](store, commitsDir),
		progress: offsetlog.New[Progress](store, progressDir),
	}
	meta, err := ReadMetadata(ctx, store)
	if errors.Is(err, storage.ErrNotExist) {
		m := Metadata{Version: FormatVersion, ID: newRunID(), Name: name, Created: now.UTC().Format(time.RFC3339Nano)}
		b, _ := json.MarshalIndent(m, "", "  ")
		if err := store.PutIfAbsent(ctx, metadataName, append(b, '\n')); err != nil && !storage.IsExist(err) {
			return nil, fmt.Errorf("engine: write %s/%s: %w", store.URL(), metadataName, err)
		}
		meta, err = ReadMetadata(ctx, store) // whoever won the race
	}
	if err != nil {
		return nil, err
	}
	cp.meta = meta
	return cp, nil
}

// ReadMetadata reads a checkpoint's metadata file.
func ReadMetadata(ctx context.Context, store storage.Store) (Metadata, error) {
	var m Metadata
	b, err := store.Get(ctx, metadataName)
	if err != nil {
		return m, fmt.Errorf("engine: read %s/%s: %w", store.URL(), metadataName, err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("engine: %s/%s: %w: %v", store.URL(), metadataName, offsetlog.ErrCorrupt, err)
	}
	if m.Version != FormatVersion {
		return m, fmt.Errorf("engine: %s/%s: checkpoint format version %d, this build reads %d", store.URL(), metadataName, m.Version, FormatVersion)
	}
	return m, nil
}
