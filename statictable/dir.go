package statictable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/contract"
	"github.com/onceflow/onceflow/source/files"
)

var _ contract.StaticTable = (*Dir)(nil)

// Dir is a directory of Parquet, CSV or JSON-lines files, read whole.
//
// Its version is the listing itself, {"files":[{"name","size","modTime"},
// …]} sorted by name: the files the glob takes (the files source's
// landing rules: hidden, "_" and ".tmp" names are skipped; WithMinFileAge
// leaves out files still being written), each with its size and
// modification time. ReadVersion reads exactly those files with the files
// source's readers, so a file added or deleted since is not seen by a
// replay; a listed file that is gone or has another size or modification
// time fails it with ErrVersionChanged (and a *files.ChangedError naming
// the file) instead of joining other data. The recorded listing makes
// offsets/N grow with the number of files (about 80 bytes each): a
// directory of thousands of files belongs in a lake table.
type Dir struct {
	src *files.Source
}

// NewDir returns the files of format in dir, parsed into schema, as a
// static table. opts are the files source's (WithGlob, WithMinFileAge,
// WithTimestampLayout, the CSV options, WithBatchSize, WithAllocator);
// WithDeadLetter does not apply: bad input fails the read.
func NewDir(dir string, format files.Format, schema *arrow.Schema, opts ...files.Option) (*Dir, error) {
	src, err := files.New(dir, format, schema, opts...)
	if err != nil {
		return nil, err
	}
	return &Dir{src: src}, nil
}

// Schema implements contract.StaticTable.
func (d *Dir) Schema() *arrow.Schema { return d.src.Schema() }

// Description implements contract.StaticTable: files[<dir>/<glob>].
func (d *Dir) Description() string { return d.src.Description() }

type dirVersion struct {
	Files []files.FileRecord `json:"files"`
}

// LatestVersion implements contract.StaticTable: the listing now.
func (d *Dir) LatestVersion(context.Context) (json.RawMessage, error) {
	recs, err := d.src.Listing()
	if err != nil {
		return nil, err
	}
	if recs == nil {
		recs = []files.FileRecord{}
	}
	return json.Marshal(dirVersion{Files: recs})
}

// ReadVersion implements contract.StaticTable: the rows of the listed
// files, file by file in name order.
func (d *Dir) ReadVersion(ctx context.Context, version json.RawMessage, emit func(arrow.RecordBatch) error) error {
	var v dirVersion
	if err := json.Unmarshal(version, &v); err != nil || v.Files == nil {
		return fmt.Errorf("%w: %.200s is not a version of %s", ErrBadVersion, version, d.Description())
	}
	err := d.src.ReadFiles(ctx, v.Files, emit)
	if errors.Is(err, files.ErrFileChanged) {
		return fmt.Errorf("%w: %s at the recorded listing of %d files: the directory changed under a replay: %w", ErrVersionChanged, d.Description(), len(v.Files), err)
	}
	if err != nil {
		return fmt.Errorf("%s at the recorded listing of %d files: %w", d.Description(), len(v.Files), err)
	}
	return nil
}

var _ contract.StaticSizer = (*Dir)(nil)

// StaticSize implements contract.StaticSizer from the listing: its files
// and bytes; rows are unknown (-1) without parsing the files.
func (d *Dir) StaticSize(context.Context) (files int, rows, bytes int64, err error) {
	recs, err := d.src.Listing()
	if err != nil {
		return 0, 0, 0, err
	}
	for _, r := range recs {
		bytes += r.Size
	}
	return len(recs), -1, bytes, nil
}
