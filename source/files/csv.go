package files

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"unsafe"
)

// sbytes views s as bytes without copying; the bytes must not be written.
func sbytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// readCSV parses a whole CSV file. With a header, columns map by name
// (undeclared columns are ignored, a declared nullable column the header
// lacks is null, a declared non-nullable one is an error for the file);
// without one, fields map to the declared columns by position. An empty
// field is null for non-string columns and "" for string columns.
func (r *readRun) readCSV(path string, data []byte) error {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // UTF-8 byte order mark
	cr := csv.NewReader(bytes.NewReader(data))
	cr.Comma = r.s.cfg.csvDelimiter
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	cols := r.s.cols
	var mapping []int // field position → declared column, -1 to ignore
	if r.s.cfg.csvHeader {
		hdr, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return r.bad(path, 1, &badValue{reason: "header: " + csvReason(err)}, firstLine(data))
		}
		mapping = make([]int, len(hdr))
		byName := make(map[string]int, len(cols))
		for i, c := range cols {
			byName[c.name] = i
		}
		found := make([]bool, len(cols))
		for j, name := range hdr {
			mapping[j] = -1
			if i, ok := byName[name]; ok {
				if found[i] {
					return r.bad(path, 1, &badValue{name, "appears twice in the header"}, firstLine(data))
				}
				found[i] = true
				mapping[j] = i
			}
		}
		for i, c := range cols {
			if !found[i] && !c.nullable {
				return r.bad(path, 1, &badValue{c.name, "missing from the header (the column is not nullable)"}, firstLine(data))
			}
		}
	} else {
		mapping = make([]int, len(cols))
		for i := range mapping {
			mapping[i] = i
		}
	}
	cells := r.cells
	for {
		from := cr.InputOffset()
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		raw := trimEOL(data[from:cr.InputOffset()])
		if err != nil {
			line := 0
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				line = pe.StartLine
			}
			if err := r.bad(path, line, &badValue{reason: csvReason(err)}, raw); err != nil {
				return err
			}
			continue
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != len(mapping) {
			bv := &badValue{reason: fmt.Sprintf("%d fields, want %d", len(rec), len(mapping))}
			if err := r.bad(path, line, bv, raw); err != nil {
				return err
			}
			continue
		}
		if bv := r.csvRow(rec, mapping, cells); bv != nil {
			if err := r.bad(path, line, bv, raw); err != nil {
				return err
			}
			continue
		}
		if err := r.row(cells); err != nil {
			return err
		}
	}
}

func (r *readRun) csvRow(rec []string, mapping []int, cells []cell) *badValue {
	for k := range cells {
		cells[k].set = false
	}
	for j, v := range rec {
		i := mapping[j]
		if i < 0 {
			continue
		}
		col, c := &r.s.cols[i], &cells[i]
		if v == "" && col.kind != kindString {
			if !col.nullable {
				return &badValue{col.name, "empty (the column is not nullable)"}
			}
			c.set, c.null = true, true
			continue
		}
		if bv := col.parseText(c, sbytes(v), r.s.cfg.layout, func() string { return quote(v) }); bv != nil {
			return bv
		}
	}
	for i := range cells {
		if !cells[i].set {
			cells[i].set, cells[i].null = true, true // nullable: checked at the header
		}
	}
	return nil
}

func quote(v string) string {
	if len(v) > 48 {
		v = v[:48] + "…"
	}
	return fmt.Sprintf("%q", v)
}

// csvReason is a csv error without the position csv puts in it (the
// InputError gives the line).
func csvReason(err error) string {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		if pe.Column > 0 {
			return fmt.Sprintf("%v (at character %d)", pe.Err, pe.Column)
		}
		return pe.Err.Error()
	}
	return err.Error()
}

func firstLine(data []byte) []byte {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return trimEOL(data[:i+1])
	}
	return data
}
