package files

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
)

// Read implements the source contract: it reads exactly the files the
// files log holds for entries start+1..end, in logged order, and emits
// their rows in records of at most the batch size, released after emit
// returns. Bad input fails the call with an *InputError, or, with
// WithDeadLetter, goes to the dead-letter file of its entry.
func (s *Source) Read(ctx context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	ids, lists, err := s.entriesIn(start, end)
	if err != nil {
		return err
	}
	r := &readRun{s: s, emit: emit, b: newBuilders(s.cfg.mem, s.schema, s.cols)}
	defer r.b.release()
	if s.format == JSON {
		r.json = newJSONParser(s.cols, s.cfg.layout)
	}
	r.cells = make([]cell, len(s.cols))
	for n, k := range ids {
		r.dead = r.dead[:0]
		for _, f := range lists[n] {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := r.readFile(f); err != nil {
				return err
			}
		}
		if len(r.dead) > 0 {
			if err := s.writeDeadLetters(ctx, k, r.dead); err != nil {
				return err
			}
		}
	}
	return r.b.flush(emit)
}

// readRun is the state of one Read call.
type readRun struct {
	s     *Source
	emit  func(arrow.RecordBatch) error
	b     *builders
	json  *jsonParser
	cells []cell // CSV and Parquet rows
	dead  []deadLetter
}

// bad reports bad input at file:line: an error, or a dead letter.
func (r *readRun) bad(file string, line int, bv *badValue, raw []byte) error {
	if r.s.cfg.deadLetter == "" {
		return &InputError{File: file, Line: line, Column: bv.column, Reason: bv.reason}
	}
	r.dead = append(r.dead, deadLetter{File: file, Line: line, Column: bv.column, Reason: bv.reason, Raw: string(raw)})
	return nil
}

// row appends a row whose cells all parsed and flushes a full record.
func (r *readRun) row(cells []cell) error {
	r.b.appendRow(cells)
	if r.b.rows >= r.s.cfg.batchSize {
		return r.b.flush(r.emit)
	}
	return nil
}

// open opens a taken file: in the landing directory or, once archived, in
// the archive.
func (r *readRun) open(f FileRecord) (string, *os.File, int64, error) {
	path := filepath.Join(r.s.dir, f.Name)
	fh, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && r.s.cfg.cleanup.archive != "" {
		if fa, aerr := os.Open(filepath.Join(r.s.cfg.cleanup.archive, f.Name)); aerr == nil {
			path, fh, err = fa.Name(), fa, nil
		}
	}
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", nil, 0, fmt.Errorf("%w: %s is gone", ErrFileChanged, path)
		}
		return "", nil, 0, fmt.Errorf("files: %w", err)
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return "", nil, 0, fmt.Errorf("files: %w", err)
	}
	if st.Size() < f.Size || (r.s.format == Parquet && st.Size() != f.Size) {
		fh.Close()
		return "", nil, 0, fmt.Errorf("%w: %s has %d bytes, %d when taken", ErrFileChanged, path, st.Size(), f.Size)
	}
	return path, fh, st.Size(), nil
}

func (r *readRun) readFile(f FileRecord) error {
	path, fh, size, err := r.open(f)
	if err != nil {
		return err
	}
	defer fh.Close()
	if r.s.format != Parquet && size > f.Size && f.Size > 0 {
		// The file grew after it was taken. Its taken bytes are only a
		// whole set of lines if they end in a newline; otherwise the last
		// one was torn by a writer still writing, and parsing it as a
		// complete row would take part of a value (12 of 1250) silently.
		var last [1]byte
		if _, err := fh.ReadAt(last[:], f.Size-1); err != nil {
			return fmt.Errorf("files: read %s: %w", path, err)
		}
		if last[0] != '\n' {
			return fmt.Errorf("%w: %s grew after it was taken (%d bytes then, %d now) and its last taken line is incomplete: the landing contract (write elsewhere, then rename) was broken", ErrFileChanged, path, f.Size, size)
		}
	}
	switch r.s.format {
	case JSON:
		return r.readJSON(path, io.LimitReader(fh, f.Size))
	case CSV:
		data, err := io.ReadAll(io.LimitReader(fh, f.Size))
		if err != nil {
			return fmt.Errorf("files: read %s: %w", path, err)
		}
		return r.readCSV(path, data)
	default:
		return r.readParquet(path, fh, f.Size)
	}
}

// readJSON reads one JSON object per line. Blank lines are skipped; every
// line counts for line numbers.
func (r *readRun) readJSON(path string, in io.Reader) error {
	br := bufio.NewReaderSize(in, 256<<10)
	var long []byte
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("files: read %s: %w", path, err)
		}
		line = trimEOL(line)
		if ws(line, 0) < len(line) { // not blank
			if bv := r.json.parse(line); bv != nil {
				if err := r.bad(path, lineNo, bv, line); err != nil {
					return err
				}
			} else if err := r.row(r.json.cells); err != nil {
				return err
			}
		}
		if err != nil { // io.EOF
			return nil
		}
	}
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}
