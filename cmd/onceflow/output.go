package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"
)

// format is what -o picks: a table for people, or JSON for programs.
type format string

const (
	formatTable format = "table" // aligned columns; times in RFC 3339, UTC
	formatJSON  format = "json"  // one JSON document (a list is one array)
	formatJSONL format = "jsonl" // one JSON value a line
)

// outputArgs is the -o part of a usage line.
const outputArgs = "[-o table|json|jsonl]"

// formatValue is the flag.Value of -o.
type formatValue struct{ f *format }

func (v formatValue) String() string {
	if v.f == nil {
		return ""
	}
	return string(*v.f)
}

func (v formatValue) Set(s string) error {
	switch f := format(s); f {
	case formatTable, formatJSON, formatJSONL:
		*v.f = f
		return nil
	}
	return fmt.Errorf("want table, json or jsonl")
}

// legacyJSON is the deprecated boolean --json, which means -o to.
type legacyJSON struct {
	f  *format
	to format
}

func (v legacyJSON) String() string   { return "false" }
func (v legacyJSON) IsBoolFlag() bool { return true }

func (v legacyJSON) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	if b {
		*v.f = v.to
	}
	return nil
}

// outputFlag declares -o on fs with default def. A legacy format other
// than "" also declares the deprecated --json, meaning -o legacy: the
// spelling tests and docs used before -o existed.
func outputFlag(fs *flag.FlagSet, def, legacy format) *format {
	f := def
	fs.Var(formatValue{&f}, "o", "output `format`: table, json (one document) or jsonl (one JSON value a line)")
	if legacy != "" {
		fs.Var(legacyJSON{&f, legacy}, "json", "deprecated: use -o "+string(legacy))
	}
	return &f
}

// writeJSON writes v as one JSON document, indented for json and on one
// line for jsonl.
func writeJSON(w io.Writer, f format, v any) error {
	enc := json.NewEncoder(w)
	if f == formatJSON {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(v)
}

// writeList writes items as one indented JSON array (json) or one line
// each (jsonl).
func writeList[T any](w io.Writer, f format, items []T) error {
	if f == formatJSON {
		if items == nil {
			items = []T{}
		}
		return writeJSON(w, f, items)
	}
	enc := json.NewEncoder(w)
	for _, it := range items {
		if err := enc.Encode(it); err != nil {
			return err
		}
	}
	return nil
}

// fmtTime shows an instant in tables: RFC 3339 in UTC, with the fraction
// of a second only when it has one.
func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// fmtMillis is fmtTime of Unix milliseconds.
func fmtMillis(ms int64) string { return fmtTime(time.UnixMilli(ms)) }

// fmtTimeString is fmtTime of a time the engine recorded as text (RFC 3339
// with a fraction); text that does not parse is shown as it is.
func fmtTimeString(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return fmtTime(t)
}
