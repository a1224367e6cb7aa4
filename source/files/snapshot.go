package files

import (
	"context"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
)

// Listing returns the landing files Read would consider now (the glob and
// WithMinFileAge apply; nothing is taken or logged), sorted by name, with
// their size and modification time and no digest. It serves readers that
// take the directory whole at a version, such as a static table: they
// record the listing and read it back with ReadFiles.
func (s *Source) Listing() ([]FileRecord, error) {
	s.mu.Lock()
	out, err := s.listEligible()
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ReadFiles reads the landing files recs, in order, exactly as Read reads
// the files of a batch: each must still have its recorded size and
// modification time (and bytes, when its XXH64 is recorded), or the call
// fails with a *ChangedError (Entry -1: the record is the caller's, not
// the files log's). Bad input fails with an *InputError; WithDeadLetter
// does not apply. Records of at most the batch size are released after
// emit returns.
func (s *Source) ReadFiles(ctx context.Context, recs []FileRecord, emit func(arrow.RecordBatch) error) error {
	r := &readRun{s: s, strict: true, emit: emit, b: newBuilders(s.cfg.Mem, s.schema, s.cols)}
	defer r.b.release()
	if s.format == JSON {
		r.json = newJSONParser(s.cols, s.cfg.layout)
	}
	r.cells = make([]cell, len(s.cols))
	for _, f := range recs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.readFile(-1, f); err != nil {
			return err
		}
	}
	return r.b.flush(emit)
}
