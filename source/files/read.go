package files

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
)

// Read implements the source contract: it reads exactly the files the
// files log holds for entries start+1..end, in logged order, as they were
// taken (a file that is not fails it with a *ChangedError), and emits
// their rows in records of at most the batch size, released after emit
// returns. Bad input fails the call with an *InputError, or, with
// WithDeadLetter, goes to the dead-letter file of its entry, as do the
// bytes of the changed files an entry logged.
func (s *Source) Read(ctx context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	ids, lists, err := s.entriesIn(start, end)
	if err != nil {
		return err
	}
	r := &readRun{s: s, emit: emit, b: newBuilders(s.cfg.Mem, s.schema, s.cols)}
	defer r.b.release()
	if s.format == JSON {
		r.json = newJSONParser(s.cols, s.cfg.layout)
	}
	r.cells = make([]cell, len(s.cols))
	for n, k := range ids {
		r.dead = r.dead[:0]
		for _, f := range lists[n].Files {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := r.readFile(k, f); err != nil {
				return err
			}
		}
		for i, c := range lists[n].Changed {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := r.deadLetterChange(ctx, k, i, c); err != nil {
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
	// strict: bad input and changed files fail the call whatever
	// WithDeadLetter says (ReadFiles).
	strict bool
}

// deadLetters reports whether bad input and changed bytes go to the
// dead-letter directory.
func (r *readRun) deadLetters() bool { return r.s.cfg.deadLetter != "" && !r.strict }

// bad reports bad input at file:line: an error, or a dead letter.
func (r *readRun) bad(file string, line int, bv *badValue, raw []byte) error {
	if !r.deadLetters() {
		return &InputError{File: file, Line: line, Column: bv.column, Reason: bv.reason}
	}
	r.dead = append(r.dead, deadLetter{File: file, Line: line, Column: bv.column, Reason: bv.reason, Raw: string(raw)})
	return nil
}

// row appends a row whose cells all parsed and flushes a full record.
func (r *readRun) row(cells []cell) error {
	r.b.appendRow(cells)
	if r.b.rows >= r.s.cfg.BatchSize {
		return r.b.flush(r.emit)
	}
	return nil
}

// open opens a taken file as recorded by f: the landing file when it has
// f's size and modification time, else the archived one (WithCleanup
// Archive) when it has f's size (an archived file is not compared on its
// modification time: builds before version 2 of the log did not keep it
// across file systems), else whichever exists, landing first, for the
// caller to find it changed. A file in neither is a *ChangedError naming
// the landing path.
func (r *readRun) open(k int64, f FileRecord) (path string, fh *os.File, st os.FileInfo, archived bool, err error) {
	path = filepath.Join(r.s.dir, f.Name)
	fh, st, err = openStat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", nil, nil, false, err
	}
	if fh != nil && st.Size() == f.Size && st.ModTime().UnixNano() == f.ModTime {
		return path, fh, st, false, nil
	}
	if r.s.cfg.cleanup.archive != "" {
		apath := filepath.Join(r.s.cfg.cleanup.archive, f.Name)
		afh, ast, aerr := openStat(apath)
		if aerr != nil && !errors.Is(aerr, os.ErrNotExist) {
			if fh != nil {
				fh.Close()
			}
			return "", nil, nil, false, aerr
		}
		if afh != nil && (fh == nil || ast.Size() == f.Size) {
			if fh != nil {
				fh.Close()
			}
			return apath, afh, ast, true, nil
		}
		if afh != nil {
			afh.Close()
		}
	}
	if fh == nil {
		return "", nil, nil, false, &ChangedError{File: path, Entry: k, TakenSize: f.Size, Size: -1, TakenModTime: f.ModTime, ModTime: f.ModTime,
			Reason: "restore it as recorded (or into the archive directory) to read the batch"}
	}
	return path, fh, st, false, nil
}

// openStat opens path and stats the open file.
func openStat(path string) (*os.File, os.FileInfo, error) {
	fh, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("files: %w", err)
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, nil, fmt.Errorf("files: %w", err)
	}
	return fh, st, nil
}

// readFile reads the taken file f of entry k as it was taken: its first
// f.Size bytes, whose XXH64 must be f.XXH64 (when recorded). A file of
// another size or modification time fails it, unless a dead-letter
// directory is configured and the taken bytes are still there, whole
// lines: those are read, and the listing dead-letters the rest in a later
// entry.
func (r *readRun) readFile(k int64, f FileRecord) error {
	path, fh, st, archived, err := r.open(k, f)
	if err != nil {
		return err
	}
	defer fh.Close()
	size, mt := st.Size(), st.ModTime().UnixNano()
	if archived {
		mt = f.ModTime
	}
	changed := func(reason string) error {
		return &ChangedError{File: path, Entry: k, TakenSize: f.Size, Size: size, TakenModTime: f.ModTime, ModTime: mt, Reason: reason}
	}
	if size != f.Size || mt != f.ModTime {
		restore := fmt.Sprintf("restore it as taken (%d bytes, modified at %s)", f.Size, fmtTime(f.ModTime))
		switch {
		case r.strict:
			return changed("the caller recorded it as it was (ReadFiles), and reads nothing else; " + restore)
		case !r.deadLetters():
			return changed("the landing contract (write elsewhere, then rename; never change a landed file) was broken, and what no batch read would be lost. " +
				"To go on: " + restore + ", or configure WithDeadLetter: the taken bytes are then read when they are still there, and the rest is copied to the dead-letter directory by a later batch")
		case size < f.Size:
			return changed("the bytes the batch took are gone, so no attempt can read what it read; " + restore)
		case f.XXH64 == "":
			return changed("the entry was written before the files log recorded digests, so the taken bytes cannot be told from others; " + restore)
		case r.s.format != Parquet && f.Size > 0 && size > f.Size && !endsLine(fh, f.Size):
			return changed("the file grew and its taken bytes end inside a line, so the last taken line was cut (a writer was still writing) and cannot be read as it was taken; " + restore)
		}
	}
	var h hash.Hash
	if f.XXH64 != "" {
		h = newDigest()
	}
	verify := func(n int64) error {
		if n != f.Size {
			return changed(fmt.Sprintf("it ended at byte %d while it was read", n))
		}
		if h != nil {
			if got := sumHex(h); got != f.XXH64 {
				return changed(fmt.Sprintf("its first %d bytes have xxh64 %s, not %s as taken: it was rewritten (keeping its size and modification time, or while it was read); restore it as taken", f.Size, got, f.XXH64))
			}
		}
		return nil
	}
	switch r.s.format {
	case JSON:
		in := &countingReader{r: io.LimitReader(fh, f.Size), h: h}
		if err := r.readJSON(path, in); err != nil {
			var ie *InputError
			if h != nil && errors.As(err, &ie) {
				// Bad input in a file whose bytes are not the taken ones
				// is a changed file, not bad input: say so.
				if _, derr := io.CopyBuffer(io.Discard, in, make([]byte, hashBuf)); derr == nil {
					if verr := verify(in.n); verr != nil {
						return verr
					}
				}
			}
			return err
		}
		return verify(in.n)
	case CSV:
		data, err := io.ReadAll(io.LimitReader(fh, f.Size))
		if err != nil {
			return fmt.Errorf("files: read %s: %w", path, err)
		}
		if h != nil {
			h.Write(data)
		}
		if err := verify(int64(len(data))); err != nil {
			return err
		}
		return r.readCSV(path, data)
	default:
		if h != nil {
			n, err := io.CopyBuffer(h, io.NewSectionReader(fh, 0, f.Size), make([]byte, hashBuf))
			if err != nil {
				return fmt.Errorf("files: read %s: %w", path, err)
			}
			if err := verify(n); err != nil {
				return err
			}
		}
		return r.readParquet(path, fh, f.Size)
	}
}

// endsLine reports whether the byte before at is a newline (a read error
// counts as no).
func endsLine(fh *os.File, at int64) bool {
	var last [1]byte
	_, err := fh.ReadAt(last[:], at-1)
	return err == nil && last[0] == '\n'
}

// countingReader counts and hashes what is read through it.
type countingReader struct {
	r io.Reader
	h hash.Hash // nil: count only
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.h != nil {
		c.h.Write(p[:n])
	}
	return n, err
}

// deadLetterChange copies the bytes no batch read of changed file c, the
// i-th of entry k, to the dead-letter directory (ChangedName(k, i)), after
// checking that the file's first c.Size bytes are still the ones the
// listing hashed, and notes it in the entry's dead letters.
func (r *readRun) deadLetterChange(ctx context.Context, k int64, i int, c ChangedFile) error {
	if r.s.cfg.deadLetter == "" {
		return fmt.Errorf("%w: files log entry %d dead-letters %s, which changed after entry %d recorded it: configure WithDeadLetter to read it", ErrFileChanged, k, c.Name, c.Entry)
	}
	path, fh, st, archived, err := r.open(k, c.FileRecord)
	if err != nil {
		return err
	}
	defer fh.Close()
	size, mt := st.Size(), st.ModTime().UnixNano()
	if archived {
		mt = c.ModTime
	}
	changed := func(reason string) error {
		return &ChangedError{File: path, Entry: k, TakenSize: c.Size, Size: size, TakenModTime: c.ModTime, ModTime: mt,
			Reason: reason + fmt.Sprintf("; restore it as recorded (%d bytes, modified at %s)", c.Size, fmtTime(c.ModTime))}
	}
	if size < c.Size {
		return changed("the bytes the entry copies to the dead-letter directory are gone")
	}
	h := newDigest()
	if _, err := io.CopyBuffer(h, io.NewSectionReader(fh, 0, c.From), make([]byte, hashBuf)); err != nil {
		return fmt.Errorf("files: read %s: %w", path, err)
	}
	rest := make([]byte, c.Size-c.From)
	if _, err := fh.ReadAt(rest, c.From); err != nil && !(errors.Is(err, io.EOF) && len(rest) == 0) {
		return fmt.Errorf("files: read %s: %w", path, err)
	}
	h.Write(rest)
	if got := sumHex(h); got != c.XXH64 {
		return changed(fmt.Sprintf("its first %d bytes have xxh64 %s, not %s as the listing found them", c.Size, got, c.XXH64))
	}
	d := deadLetter{File: path}
	if len(rest) > 0 {
		store, err := r.s.deadLetterStore()
		if err != nil {
			return err
		}
		d.Copy = ChangedName(k, i)
		if err := store.Put(ctx, d.Copy, rest); err != nil {
			return fmt.Errorf("files: write %s: %w", d.Copy, err)
		}
	}
	d.Reason = changeReason(c, d.Copy)
	if c.From > 0 && c.From < c.Size && r.s.format != Parquet && !endsLine(fh, c.From) {
		d.Reason += fmt.Sprintf("; byte %d, the last one read before, is not a newline: the last line read then was cut, and its row may hold part of a value", c.From-1)
	}
	r.dead = append(r.dead, d)
	return nil
}

// changeReason is the dead-letter reason of changed file c whose unread
// bytes are in the dead-letter file named copyName.
func changeReason(c ChangedFile, copyName string) string {
	was := fmt.Sprintf("files log entry %d recorded it with %d bytes, modified at %s; it has %d bytes, modified at %s", c.Entry, c.PrevSize, fmtTime(c.PrevModTime), c.Size, fmtTime(c.ModTime))
	switch {
	case c.From == c.Size:
		return "changed after it was taken (" + was + "), and its bytes are the ones read before: none is unread"
	case c.From > 0:
		return fmt.Sprintf("grew after it was taken (%s): bytes %d to %d, in no batch and no dead letter before, are in %s", was, c.From, c.Size, copyName)
	case c.Size < c.PrevSize:
		return fmt.Sprintf("was cut short after it was taken (%s): none of its bytes as they are now was read, and all %d are in %s", was, c.Size, copyName)
	default:
		return fmt.Sprintf("was replaced after it was taken (%s; its first %d bytes are not the recorded ones, or the record has no digest to tell): none of its bytes as they are now was read, and all %d are in %s", was, c.PrevSize, c.Size, copyName)
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
