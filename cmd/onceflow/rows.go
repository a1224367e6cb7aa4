package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// rowWriter prints rows of named columns (state dump, lake query) in one
// of the output formats: a table with a header, one JSON array of
// objects, or one object a line. Objects keep the columns' order.
type rowWriter struct {
	w    io.Writer
	f    format
	tw   *tabwriter.Writer
	rows int
	line bytes.Buffer
}

func newRowWriter(w io.Writer, f format) *rowWriter { return &rowWriter{w: w, f: f} }

// write prints one row; cols names its values and is the same for every
// row of a writer.
func (rw *rowWriter) write(cols []string, row []any) error {
	rw.rows++
	if rw.f == formatTable {
		if rw.tw == nil {
			rw.tw = tabwriter.NewWriter(rw.w, 0, 4, 2, ' ', 0)
			for i, c := range cols {
				if i > 0 {
					fmt.Fprint(rw.tw, "\t")
				}
				fmt.Fprint(rw.tw, c)
			}
			fmt.Fprintln(rw.tw)
		}
		for i, v := range row {
			if i > 0 {
				fmt.Fprint(rw.tw, "\t")
			}
			fmt.Fprint(rw.tw, cell(v))
		}
		_, err := fmt.Fprintln(rw.tw)
		return err
	}
	l := &rw.line
	l.Reset()
	if rw.f == formatJSON {
		if rw.rows == 1 {
			l.WriteString("[\n  ")
		} else {
			l.WriteString(",\n  ")
		}
	}
	l.WriteByte('{')
	for i, c := range cols {
		if i > 0 {
			l.WriteByte(',')
		}
		k, _ := json.Marshal(c)
		l.Write(k)
		l.WriteByte(':')
		v, err := marshalValue(row[i])
		if err != nil {
			return fmt.Errorf("column %s: %w", c, err)
		}
		l.Write(v)
	}
	l.WriteByte('}')
	if rw.f == formatJSONL {
		l.WriteByte('\n')
	}
	_, err := rw.w.Write(l.Bytes())
	return err
}

// close ends the output: flushes the table, closes the JSON array.
func (rw *rowWriter) close() error {
	switch {
	case rw.tw != nil:
		return rw.tw.Flush()
	case rw.f == formatJSON && rw.rows == 0:
		_, err := io.WriteString(rw.w, "[]\n")
		return err
	case rw.f == formatJSON:
		_, err := io.WriteString(rw.w, "\n]\n")
		return err
	}
	return nil
}

// cell shows a value (as memsink.Value returns it) in a table: instants in
// RFC 3339 UTC, bytes in base64, nulls as (null), like arrow's ValueStr.
func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return "(null)"
	case time.Time:
		return fmtTime(x)
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	}
	return fmt.Sprint(v)
}
