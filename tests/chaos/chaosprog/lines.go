package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/onceflow/onceflow/internal/fault"
)

// lineSink is user code of the kind foreachBatch exists for: it appends a
// batch's rows to a JSON-lines file, then a marker line {"done":N}, and
// syncs. On the first batch of a process it finds the last marker and cuts
// off whatever follows (a batch a crash left half-written); a batch at or
// below the last marker is skipped. broken drops both the skip and the
// repair.
type lineSink struct {
	path   string
	broken bool
	opened bool
	last   int64
}

type marker struct {
	Done *int64 `json:"done"`
}

// recover finds the last marker and truncates the file after it.
func (s *lineSink) recover() error {
	f, err := os.OpenFile(s.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var pos, keep int64
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			pos += int64(len(line))
			var m marker
			if bytes.Contains(line, []byte(`"done"`)) && json.Unmarshal(line, &m) == nil && m.Done != nil {
				s.last, keep = *m.Done, pos
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	if err := f.Truncate(keep); err != nil {
		return err
	}
	return f.Sync()
}

func (s *lineSink) apply(_ context.Context, batchID int64, schema *arrow.Schema, records []arrow.RecordBatch) error {
	if !s.opened && !s.broken {
		if err := s.recover(); err != nil {
			return fmt.Errorf("repair %s: %w", s.path, err)
		}
	}
	s.opened = true
	if !s.broken && batchID <= s.last {
		return nil // applied before a crash
	}
	var lines [][]byte
	for _, rec := range records {
		idx := func(name string) int {
			i := schema.FieldIndices(name)
			if len(i) == 0 {
				return -1
			}
			return i[0]
		}
		m, a, b := rec.Column(idx("merchant_id")).(*array.String), rec.Column(idx("amount_cents")).(*array.Int64), rec.Column(idx("batch_id")).(*array.Int64)
		for i := 0; i < int(rec.NumRows()); i++ {
			line, err := json.Marshal(map[string]any{"merchant_id": m.Value(i), "batch_id": b.Value(i), "amount_cents": a.Value(i)})
			if err != nil {
				return err
			}
			lines = append(lines, append(line, '\n'))
		}
	}
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	for i, l := range lines {
		if i == len(lines)/2 {
			if err := f.Sync(); err != nil {
				return err
			}
			fault.Point(fault.LinesMidRows)
		}
		if _, err := f.Write(l); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(f, "{\"done\":%d}\n", batchID); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	s.last = batchID
	fault.Point(fault.LinesAfterMarker)
	return nil
}
