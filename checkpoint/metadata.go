package checkpoint

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

// EncodeMetadata returns the bytes of a metadata file holding m (a
// Metadata or a ForkMetadata): indented JSON and a final newline.
func EncodeMetadata(m any) ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ReadMetadata reads a checkpoint's metadata file. It refuses a format
// version other than FormatVersion.
func ReadMetadata(ctx context.Context, store storage.Store) (Metadata, error) {
	var m Metadata
	b, err := store.Get(ctx, MetadataFile)
	if err != nil {
		return m, fmt.Errorf("checkpoint: read %s/%s: %w", store.URL(), MetadataFile, err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("checkpoint: %s/%s: %w: %v", store.URL(), MetadataFile, offsetlog.ErrCorrupt, err)
	}
	if m.Version != FormatVersion {
		return m, fmt.Errorf("checkpoint: %s/%s: checkpoint format version %d, this build reads %d", store.URL(), MetadataFile, m.Version, FormatVersion)
	}
	return m, nil
}

// ReadForkedFrom returns where a forked checkpoint came from, or ok=false
// for a checkpoint that is not a fork.
func ReadForkedFrom(ctx context.Context, store storage.Store) (ForkedFrom, bool, error) {
	b, err := store.Get(ctx, MetadataFile)
	if err != nil {
		return ForkedFrom{}, false, fmt.Errorf("checkpoint: read %s/%s: %w", storage.Redact(store.URL()), MetadataFile, err)
	}
	var fm ForkMetadata
	if err := json.Unmarshal(b, &fm); err != nil {
		return ForkedFrom{}, false, fmt.Errorf("checkpoint: %s/%s: %w: %v", storage.Redact(store.URL()), MetadataFile, offsetlog.ErrCorrupt, err)
	}
	return fm.ForkedFrom, fm.ForkedFrom.QueryID != "", nil
}
