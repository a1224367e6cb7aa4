package files

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"

	"github.com/onceflow/onceflow/storage"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// payments is the schema most tests use.
func payments() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	}, nil)
}

// landing writes name with content into dir, modified at t0+age.
func landing(t *testing.T, dir, name, content string, age time.Duration) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	mt := t0.Add(age)
	if err := os.Chtimes(p, mt, mt); err != nil {
		t.Fatal(err)
	}
}

func checkpoint(t *testing.T) storage.Store { return checkpointB(t) }

func checkpointB(t testing.TB) storage.Store {
	t.Helper()
	st, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return storage.Sub(st, "sources/0")
}

func open(t *testing.T, store storage.Store, dir string, f Format, schema *arrow.Schema, opts ...Option) *Source {
	t.Helper()
	s, err := New(dir, f, schema, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.OpenCheckpoint(context.Background(), store); err != nil {
		t.Fatal(err)
	}
	return s
}

func latest(t *testing.T, s *Source, start int64) int64 {
	t.Helper()
	off, err := s.LatestOffset(context.Background(), EncodeOffset(start))
	if err != nil {
		t.Fatal(err)
	}
	k, err := DecodeOffset(off)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// rows reads [start, end) and renders each row as "v|v|…".
func rows(t *testing.T, s *Source, start, end int64) ([]string, error) {
	t.Helper()
	var out []string
	err := s.Read(context.Background(), EncodeOffset(start), EncodeOffset(end), func(rec arrow.RecordBatch) error {
		if !rec.Schema().Equal(s.Schema()) {
			t.Fatalf("record schema %v", rec.Schema())
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			var vals []string
			for _, c := range rec.Columns() {
				vals = append(vals, c.ValueStr(i))
			}
			out = append(out, strings.Join(vals, "|"))
		}
		return nil
	})
	return out, err
}

func mustRows(t *testing.T, s *Source, start, end int64) []string {
	t.Helper()
	out, err := rows(t, s, start, end)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestJSONTypes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "i", Type: arrow.PrimitiveTypes.Int64},
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "u", Type: arrow.PrimitiveTypes.Uint32, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
	}, nil)
	dir := t.TempDir()
	landing(t, dir, "a.json", strings.Join([]string{
		`{"i":1,"i8":-128,"u":4294967295,"f":1.5e3,"s":"plain","b":true,"ts":"2026-11-30T10:00:00.123Z","d":"2026-11-30"}`,
		`  {"s":"esc \"q\" \\ \/ \n\t \u00e9 \ud83d\ude00","i":2, "extra":{"deep":[1,{"x":"}"}],"n":null} ,"f":-0.25}  `,
		``,
		`{"i":3,"ts":"2026-11-30T11:00:00+01:00","b":false,"i8":null,"unknown":[true,false,null,"x"]}`,
		"{\"i\":4,\"ts\":1764496800123456}\r",
		`{"i":5,"ts":"2026-11-30T10:00:00Z","s":""}`,
	}, "\n"), 0)
	s := open(t, checkpoint(t), dir, JSON, schema, WithAllocator(mem))
	if k := latest(t, s, -1); k != 0 {
		t.Fatalf("latest %d", k)
	}
	got := mustRows(t, s, -1, 0)
	want := []string{
		"1|-128|4294967295|1500|plain|true|2026-11-30T10:00:00.123Z|2026-11-30",
		"2|(null)|(null)|-0.25|esc \"q\" \\ / \n\t é 😀|(null)|(null)|(null)",
		"3|(null)|(null)|(null)|(null)|false|2026-11-30T10:00:00Z|(null)",
		"4|(null)|(null)|(null)|(null)|(null)|2025-11-30T10:00:00.123456Z|(null)",
		"5|(null)|(null)|(null)||(null)|2026-11-30T10:00:00Z|(null)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestJSONBadLines(t *testing.T) {
	tests := []struct {
		line, column, reason string
	}{
		{`{"id":1,"amount_cents":"12x","ts":"2026-11-30T10:00:00Z"}`, "amount_cents", `"12x" is not an int64`},
		{`{"id":1,"amount_cents":12.5,"ts":"2026-11-30T10:00:00Z"}`, "amount_cents", `12.5 is not an int64`},
		{`{"id":1,"amount_cents":99999999999999999999,"ts":"2026-11-30T10:00:00Z"}`, "amount_cents", `99999999999999999999 is not an int64`},
		{`{"id":1,"amount_cents":[1],"ts":"2026-11-30T10:00:00Z"}`, "amount_cents", `an array is not an int64`},
		{`{"id":1,"amount_cents":true,"ts":"2026-11-30T10:00:00Z"}`, "amount_cents", `true is not an int64`},
		{`{"id":1,"ts":"2026-11-30T10:00:00Z"}`, "amount_cents", `missing (the column is not nullable)`},
		{`{"id":1,"amount_cents":null,"ts":"2026-11-30T10:00:00Z"}`, "amount_cents", `null (the column is not nullable)`},
		{`{"id":1,"id":2,"amount_cents":3,"ts":"2026-11-30T10:00:00Z"}`, "id", `appears twice in the object`},
		{`{"id":1,"amount_cents":3,"name":7,"ts":"2026-11-30T10:00:00Z"}`, "name", `7 is not a string`},
		{`{"id":1,"amount_cents":3,"ts":"yesterday"}`, "ts", `"yesterday" is not a timestamp in layout "2006-01-02T15:04:05.999999999Z07:00"`},
		{`{"id":1,"amount_cents":3,"ts":"2026-11-30T10:00:00Z"`, "", `malformed JSON at byte 53: expected ',' or '}'`},
		{`{"id":1,"amount_cents":3,"ts":"2026-11-30T10:00:00Z"} x`, "", `malformed JSON at byte 55: data after the object`},
		{`{"id":1,"amount_cents":3,"ts":"2026-11-30T10:00:00Z}`, "", `malformed JSON at byte 53: unterminated string`},
		{`[1,2]`, "", `malformed JSON at byte 1: expected '{'`},
		{"\u00a0", "", `malformed JSON at byte 1: expected '{'`},
		{`{"id":01,"amount_cents":3,"ts":"2026-11-30T10:00:00Z"}`, "", `malformed JSON at byte 8: expected ',' or '}'`},
		{`{"id":1,"amount_cents":3,"ts":"2026-11-30T10:00:00Z","x":1.}`, "", `malformed JSON at byte 60: bad number`},
		{`{"id":1 "amount_cents":3}`, "", `malformed JSON at byte 9: expected ',' or '}'`},
		{`{"x":{"y":tru},"id":1}`, "", `malformed JSON at byte 11: unexpected 't'`},
		{`{"id":1,"amount_cents":3,"name":"a\qb","ts":"2026-11-30T10:00:00Z"}`, "", `malformed JSON at byte 35: bad escape \q`},
		{"{\"id\":1,\"amount_cents\":3,\"name\":\"\xff\",\"ts\":\"2026-11-30T10:00:00Z\"}", "name", `string is not valid UTF-8`},
	}
	for _, tc := range tests {
		t.Run(tc.reason, func(t *testing.T) {
			dir := t.TempDir()
			good := `{"id":0,"amount_cents":1,"ts":"2026-11-30T10:00:00Z"}`
			landing(t, dir, "p-3.json", good+"\n"+tc.line+"\n"+good+"\n", 0)
			s := open(t, checkpoint(t), dir, JSON, payments())
			latest(t, s, -1)
			_, err := rows(t, s, -1, 0)
			var ie *InputError
			if !errors.As(err, &ie) || !errors.Is(err, ErrInput) {
				t.Fatalf("err %v, want *InputError", err)
			}
			want := InputError{File: filepath.Join(dir, "p-3.json"), Line: 2, Column: tc.column, Reason: tc.reason}
			if *ie != want {
				t.Fatalf("got  %+v\nwant %+v", *ie, want)
			}
		})
	}
}

func TestInputErrorMessage(t *testing.T) {
	e := &InputError{File: "/landing/p-3.json", Line: 17, Column: "amount_cents", Reason: `"12x" is not an int64`}
	if got, want := e.Error(), `files: /landing/p-3.json line 17: column amount_cents: "12x" is not an int64`; got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	e = &InputError{File: "/landing/x.parquet", Reason: "not a readable Parquet file"}
	if got, want := e.Error(), `files: /landing/x.parquet: not a readable Parquet file`; got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

func TestCSV(t *testing.T) {
	tests := []struct {
		name    string
		opts    []Option
		content string
		want    []string
		err     *InputError // Line, Column, Reason; File is filled in
	}{
		{"header maps by name", nil,
			"ts,extra,amount_cents,id,name\n" +
				"2026-11-30T10:00:00.5Z,x,250,1,alice\n" +
				"2026-11-30T10:00:01Z,y,-3,2,\"b, \"\"quoted\"\"\nline\"\n",
			[]string{"1|250|alice|2026-11-30T10:00:00.5Z", "2|-3|b, \"quoted\"\nline|2026-11-30T10:00:01Z"}, nil},
		{"nullable column missing from header", nil,
			"\xef\xbb\xbfid,amount_cents,ts\n7,8,2026-11-30T10:00:00Z\n",
			[]string{"7|8|(null)|2026-11-30T10:00:00Z"}, nil},
		{"no header with delimiter", []Option{WithCSVHeader(false), WithCSVDelimiter(';')},
			"1;2;n;2026-11-30T10:00:00Z\n\n3;4;;2026-11-30T10:00:00Z\n",
			[]string{"1|2|n|2026-11-30T10:00:00Z", "3|4||2026-11-30T10:00:00Z"}, nil},
		{"timestamp layout", []Option{WithCSVHeader(false), WithTimestampLayout(time.DateTime)},
			"1,2,n,2026-11-30 10:00:00\n",
			[]string{"1|2|n|2026-11-30T10:00:00Z"}, nil},
		{"wrong column count", nil,
			"id,amount_cents,name,ts\n1,2,a,2026-11-30T10:00:00Z\n3,4,2026-11-30T10:00:00Z\n",
			nil, &InputError{Line: 3, Reason: "3 fields, want 4"}},
		{"bad value", nil,
			"id,amount_cents,name,ts\n1,12x,a,2026-11-30T10:00:00Z\n",
			nil, &InputError{Line: 2, Column: "amount_cents", Reason: `"12x" is not an int64`}},
		{"empty non-nullable", nil,
			"id,amount_cents,name,ts\n1,,a,2026-11-30T10:00:00Z\n",
			nil, &InputError{Line: 2, Column: "amount_cents", Reason: "empty (the column is not nullable)"}},
		{"required column missing from header", nil,
			"id,name,ts\n1,a,2026-11-30T10:00:00Z\n",
			nil, &InputError{Line: 1, Column: "amount_cents", Reason: "missing from the header (the column is not nullable)"}},
		{"bad quote", nil,
			"id,amount_cents,name,ts\n1,2,a\"b,2026-11-30T10:00:00Z\n",
			nil, &InputError{Line: 2, Reason: `bare " in non-quoted-field (at character 6)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			dir := t.TempDir()
			landing(t, dir, "a.csv", tc.content, 0)
			s := open(t, checkpoint(t), dir, CSV, payments(), append(tc.opts, WithAllocator(mem))...)
			latest(t, s, -1)
			got, err := rows(t, s, -1, 0)
			if tc.err != nil {
				var ie *InputError
				if !errors.As(err, &ie) {
					t.Fatalf("err %v, want *InputError", err)
				}
				want := *tc.err
				want.File = filepath.Join(dir, "a.csv")
				if *ie != want {
					t.Fatalf("got  %+v\nwant %+v", *ie, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
				t.Fatalf("rows %q\nwant %q", got, tc.want)
			}
		})
	}
}

type pqPayment struct {
	ID     int64   `parquet:"id"`
	Amount int64   `parquet:"amount_cents"`
	Name   *string `parquet:"name,optional"`
	TS     int64   `parquet:"ts,timestamp(millisecond)"`
	Other  float64 `parquet:"other"`
}

type pqWrongType struct {
	ID     int64  `parquet:"id"`
	Amount string `parquet:"amount_cents"`
	TS     int64  `parquet:"ts,timestamp(microsecond)"`
}

func writeParquet[T any](t *testing.T, dir, name string, rows []T) {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf, parquet.MaxRowsPerRowGroup(2))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	landing(t, dir, name, buf.String(), 0)
}

func TestParquet(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	alice := "alice"
	ms := t0.UnixMilli()
	writeParquet(t, dir, "a.parquet", []pqPayment{
		{1, 100, &alice, ms, 0.5}, {2, 200, nil, ms + 1, 0}, {3, 300, &alice, ms + 2, 0},
	})
	s := open(t, checkpoint(t), dir, Parquet, payments(), WithAllocator(mem), WithBatchSize(2))
	latest(t, s, -1)
	got := mustRows(t, s, -1, 0)
	want := []string{
		"1|100|alice|2026-11-30T10:00:00Z",
		"2|200|(null)|2026-11-30T10:00:00.001Z",
		"3|300|alice|2026-11-30T10:00:00.002Z",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rows %q\nwant %q", got, want)
	}

	writeParquet(t, dir, "b.parquet", []pqWrongType{{1, "x", 0}})
	if k := latest(t, s, 0); k != 1 {
		t.Fatalf("latest %d", k)
	}
	_, err := rows(t, s, 0, 1)
	var ie *InputError
	if !errors.As(err, &ie) || ie.Column != "amount_cents" || ie.File != filepath.Join(dir, "b.parquet") || !strings.Contains(ie.Reason, "declared an int64") {
		t.Fatalf("err %v, want an InputError naming amount_cents", err)
	}
	t.Log(err)
}

func TestLogReplay(t *testing.T) {
	dir := t.TempDir()
	line := func(id int) string {
		return fmt.Sprintf(`{"id":%d,"amount_cents":%d,"ts":"2026-11-30T10:00:00Z"}`+"\n", id, id*10)
	}
	landing(t, dir, "b.json", line(2), time.Second)
	landing(t, dir, "a.json", line(1), 2*time.Second)
	landing(t, dir, "c.json", line(3), time.Second) // same mod time as b: name breaks the tie
	store := checkpoint(t)
	s1 := open(t, store, dir, JSON, payments())
	if k := latest(t, s1, -1); k != 0 {
		t.Fatalf("latest %d", k)
	}
	first := mustRows(t, s1, -1, 0)
	if want := "[2|20|(null)|2026-11-30T10:00:00Z 3|30|(null)|2026-11-30T10:00:00Z 1|10|(null)|2026-11-30T10:00:00Z]"; fmt.Sprint(first) != want {
		t.Fatalf("rows %v\nwant %v", first, want)
	}

	// A crash after the files log took entry 0 but before the engine's WAL
	// recorded it: the restarted source answers entry 0 again, with the
	// same files, even though a new file landed meanwhile.
	landing(t, dir, "d.json", line(4), 0)
	s2 := open(t, store, dir, JSON, payments())
	if k := latest(t, s2, -1); k != 0 {
		t.Fatalf("after restart: latest %d, want the logged entry 0", k)
	}
	if again := mustRows(t, s2, -1, 0); fmt.Sprint(again) != fmt.Sprint(first) {
		t.Fatalf("replay rows %v\nwant %v", again, first)
	}
	if k := latest(t, s2, 0); k != 1 {
		t.Fatalf("latest after 0: %d", k)
	}
	if got := mustRows(t, s2, 0, 1); len(got) != 1 || !strings.HasPrefix(got[0], "4|") {
		t.Fatalf("entry 1 rows %v", got)
	}
	if k := latest(t, s2, 1); k != 1 {
		t.Fatalf("nothing new: latest %d, want 1", k)
	}
	// Both entries in one read, in log order.
	if got := mustRows(t, s2, -1, 1); len(got) != 4 {
		t.Fatalf("range read %v", got)
	}

	// A file name seen once is never taken again; rewritten, it fails the
	// listing rather than being skipped.
	landing(t, dir, "a.json", line(9), time.Hour)
	if off, err := s2.LatestOffset(context.Background(), EncodeOffset(1)); !errors.Is(err, ErrFileChanged) {
		t.Fatalf("rewritten taken name: LatestOffset %s, %v; want ErrFileChanged", off, err)
	}

	// Offsets the log cannot hold.
	if _, err := s2.LatestOffset(context.Background(), EncodeOffset(5)); !errors.Is(err, ErrBadOffset) {
		t.Fatalf("start beyond log: %v", err)
	}
	if _, err := rows(t, s2, 1, 3); !errors.Is(err, ErrBadOffset) {
		t.Fatalf("read beyond log: %v", err)
	}
	fresh, _ := New(dir, JSON, payments())
	if _, err := fresh.LatestOffset(context.Background(), EncodeOffset(-1)); !errors.Is(err, ErrNotOpen) {
		t.Fatalf("before OpenCheckpoint: %v", err)
	}

	// The entry on disk is the documented JSON.
	data, err := store.Get(context.Background(), "files/00000000000000000000")
	if err != nil {
		t.Fatal(err)
	}
	var e LogEntry
	if err := json.Unmarshal(bytes.SplitN(data, []byte("\n"), 2)[1], &e); err != nil || len(e.Files) != 3 || e.Files[0].Name != "b.json" || e.Files[2].Name != "a.json" {
		t.Fatalf("entry %s: %+v %v", data, e, err)
	}
}

func TestLandingContract(t *testing.T) {
	dir := t.TempDir()
	rec := `{"id":1,"amount_cents":1,"ts":"2026-11-30T10:00:00Z"}` + "\n"
	for _, n := range []string{"ok.json", ".hidden.json", "_SUCCESS.json", "part.json.tmp", "other.csv", "young.json"} {
		landing(t, dir, n, rec, 0)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	landing(t, dir, "young.json", rec, time.Minute)
	now := t0.Add(90 * time.Second)
	s := open(t, checkpoint(t), dir, JSON, payments(), WithMinFileAge(time.Minute), WithClock(func() time.Time { return now }))
	latest(t, s, -1)
	if names := loggedNames(s, 0); names != "[ok.json]" {
		t.Fatalf("took %s, want [ok.json]", names)
	}
	now = now.Add(time.Minute)
	if k := latest(t, s, 0); k != 1 || loggedNames(s, 1) != "[young.json]" {
		t.Fatalf("after aging: %d %s", k, loggedNames(s, 1))
	}
}

func loggedNames(s *Source, k int64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for _, f := range s.mu.entries[k].Files {
		names = append(names, f.Name)
	}
	return fmt.Sprint(names)
}

func TestMaxFilesPerTriggerAndAvailableNow(t *testing.T) {
	dir := t.TempDir()
	rec := `{"id":1,"amount_cents":1,"ts":"2026-11-30T10:00:00Z"}` + "\n"
	for i := range 5 {
		landing(t, dir, fmt.Sprintf("f%d.json", i), rec, time.Duration(i)*time.Second)
	}
	s := open(t, checkpoint(t), dir, JSON, payments(), WithMaxFilesPerTrigger(2))
	if err := s.PrepareAvailableNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	landing(t, dir, "late.json", rec, -time.Hour) // oldest, but after the AvailableNow listing
	var got []string
	for k := int64(-1); ; {
		next := latest(t, s, k)
		if next == k {
			break
		}
		got = append(got, loggedNames(s, next))
		k = next
	}
	if want := "[[f0.json f1.json] [f2.json f3.json] [f4.json]]"; fmt.Sprint(got) != want {
		t.Fatalf("batches %v, want %s", got, want)
	}
}

func TestCleanup(t *testing.T) {
	rec := `{"id":1,"amount_cents":1,"ts":"2026-11-30T10:00:00Z"}` + "\n"
	tests := []struct {
		name    string
		cleanup func(archive string) Cleanup
	}{
		{"archive", Archive},
		{"delete", func(string) Cleanup { return Delete() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir, archive := t.TempDir(), filepath.Join(t.TempDir(), "done")
			for i := range 4 {
				landing(t, dir, fmt.Sprintf("f%d.json", i), rec, time.Duration(i)*time.Second)
			}
			store := checkpoint(t)
			opts := []Option{WithMaxFilesPerTrigger(2), WithCleanup(tc.cleanup(archive))}
			s := open(t, store, dir, JSON, payments(), opts...)
			latest(t, s, -1)
			latest(t, s, 0)
			// A crash in the middle of cleaning entry 0: f0 is already gone.
			gone := filepath.Join(dir, "f0.json")
			if tc.name == "archive" {
				if err := os.MkdirAll(archive, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(gone, filepath.Join(archive, "f0.json")); err != nil {
					t.Fatal(err)
				}
				// An entry whose files were archived can still be read.
				if got := mustRows(t, s, -1, 0); len(got) != 2 {
					t.Fatalf("read after archive: %v", got)
				}
			} else if err := os.Remove(gone); err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(ctx, EncodeOffset(0)); err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(ctx, EncodeOffset(0)); err != nil {
				t.Fatalf("second commit: %v", err)
			}
			// Restart, a file under a taken name reappears, commit again.
			landing(t, dir, "f1.json", rec+rec, time.Hour)
			s2 := open(t, store, dir, JSON, payments(), opts...)
			if err := s2.Commit(ctx, EncodeOffset(0)); err != nil {
				t.Fatal(err)
			}
			if err := s2.Commit(ctx, EncodeOffset(1)); err != nil {
				t.Fatal(err)
			}
			if err := s2.Commit(ctx, EncodeOffset(1)); err != nil {
				t.Fatal(err)
			}
			if got := listDir(t, dir); got != "[f1.json]" {
				t.Fatalf("landing holds %s, want only the reappeared f1.json", got)
			}
			if st, _ := os.Stat(filepath.Join(dir, "f1.json")); st.Size() != int64(2*len(rec)) {
				t.Fatalf("the reappeared f1.json was touched")
			}
			want := "[f0.json f1.json f2.json f3.json]"
			if tc.name == "delete" {
				want = "[]"
			}
			if got := listDir(t, archive); got != want {
				t.Fatalf("archive holds %s, want %s", got, want)
			}
		})
	}
}

func listDir(t *testing.T, dir string) string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, d := range des {
		names = append(names, d.Name())
	}
	return fmt.Sprint(names)
}

func TestDeadLetter(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir, dead := t.TempDir(), t.TempDir()
	landing(t, dir, "a.json", strings.Join([]string{
		`{"id":1,"amount_cents":10,"ts":"2026-11-30T10:00:00Z"}`,
		`{"id":2,"amount_cents":"12x","ts":"2026-11-30T10:00:00Z"}`,
		`{"id":3,"amount_cents":30,"ts":"2026-11-30T10:00:00Z"}`,
		`not json`,
		`{"id":5,"amount_cents":50,"ts":"2026-11-30T10:00:00Z"}`,
	}, "\n"), 0)
	landing(t, dir, "b.csv", "id,amount_cents,name,ts\n6,60,x,2026-11-30T10:00:00Z\n7,70\n8,80,y,2026-11-30T10:00:00Z\n", time.Second)
	js := open(t, checkpoint(t), dir, JSON, payments(), WithDeadLetter(dead), WithAllocator(mem), WithBatchSize(2))
	latest(t, js, -1)
	for range 2 { // a replay overwrites, it does not append
		got := mustRows(t, js, -1, 0)
		if want := "[1|10|(null)|2026-11-30T10:00:00Z 3|30|(null)|2026-11-30T10:00:00Z 5|50|(null)|2026-11-30T10:00:00Z]"; fmt.Sprint(got) != want {
			t.Fatalf("rows %v\nwant %s", got, want)
		}
	}
	data, err := os.ReadFile(filepath.Join(dead, DeadLetterName(0)))
	if err != nil {
		t.Fatal(err)
	}
	a := filepath.Join(dir, "a.json")
	want := fmt.Sprintf(`{"file":%q,"line":2,"column":"amount_cents","reason":"\"12x\" is not an int64","raw":"{\"id\":2,\"amount_cents\":\"12x\",\"ts\":\"2026-11-30T10:00:00Z\"}"}
{"file":%q,"line":4,"reason":"malformed JSON at byte 1: expected '{'","raw":"not json"}
`, a, a)
	if string(data) != want {
		t.Fatalf("dead letters:\n%s\nwant:\n%s", data, want)
	}

	cs := open(t, checkpoint(t), dir, CSV, payments(), WithDeadLetter(dead), WithAllocator(mem))
	latest(t, cs, -1)
	if got := mustRows(t, cs, -1, 0); len(got) != 2 || !strings.HasPrefix(got[1], "8|") {
		t.Fatalf("csv rows %v", got)
	}
	data, err = os.ReadFile(filepath.Join(dead, DeadLetterName(0)))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`{"file":%q,"line":3,"reason":"2 fields, want 4","raw":"7,70"}`+"\n", filepath.Join(dir, "b.csv")); string(data) != want {
		t.Fatalf("csv dead letters:\n%s\nwant:\n%s", data, want)
	}
}

func TestTakenFileGoneFailsTheBatch(t *testing.T) {
	dir := t.TempDir()
	landing(t, dir, "a.json", `{"id":1,"amount_cents":1,"ts":"2026-11-30T10:00:00Z"}`+"\n", 0)
	s := open(t, checkpoint(t), dir, JSON, payments())
	latest(t, s, -1)
	if err := os.Remove(filepath.Join(dir, "a.json")); err != nil {
		t.Fatal(err)
	}
	_, err := rows(t, s, -1, 0)
	var ce *ChangedError
	if !errors.Is(err, ErrFileChanged) || !errors.As(err, &ce) || ce.Size != -1 || !strings.Contains(err.Error(), "a.json, recorded by files log entry 0 with 54 bytes, is gone") {
		t.Fatalf("err %v, want a *ChangedError saying a.json is gone", err)
	}
}

func TestNewRejects(t *testing.T) {
	list := arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)}}, nil)
	for name, fn := range map[string]func() error{
		"unsupported type": func() error { _, err := New("d", JSON, list); return err },
		"no schema":        func() error { _, err := New("d", JSON, nil); return err },
		"bad glob":         func() error { _, err := New("d", JSON, payments(), WithGlob("[")); return err },
		"bad format":       func() error { _, err := New("d", Format(9), payments()); return err },
		"compact interval 0": func() error {
			_, err := New("d", JSON, payments(), WithLogCompactInterval(0))
			return err
		},
		"negative max file age": func() error {
			_, err := New("d", JSON, payments(), WithMaxFileAge(-time.Second))
			return err
		},
	} {
		if err := fn(); !errors.Is(err, ErrBadOption) {
			t.Errorf("%s: err %v, want ErrBadOption", name, err)
		}
	}
}

type pqOptionalAmount struct {
	ID     int64  `parquet:"id"`
	Amount *int64 `parquet:"amount_cents,optional"`
	TS     int64  `parquet:"ts,timestamp(nanosecond)"`
}

func TestParquetBadRows(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir, dead := t.TempDir(), t.TempDir()
	v := int64(5)
	ns := t0.UnixNano() + 1999 // rounds down to the microsecond
	writeParquet(t, dir, "a.parquet", []pqOptionalAmount{{1, &v, ns}, {2, nil, ns}, {3, &v, ns}})
	landing(t, dir, "b.parquet", "PAR1 this is not parquet", time.Second)

	s := open(t, checkpoint(t), dir, Parquet, payments(), WithAllocator(mem))
	latest(t, s, -1)
	_, err := rows(t, s, -1, 0)
	var ie *InputError
	if !errors.As(err, &ie) || ie.Line != 2 || ie.Column != "amount_cents" || ie.Reason != "null (the column is not nullable)" {
		t.Fatalf("err %v, want row 2 column amount_cents null", err)
	}

	s = open(t, checkpoint(t), dir, Parquet, payments(), WithAllocator(mem), WithDeadLetter(dead))
	latest(t, s, -1)
	got := mustRows(t, s, -1, 0)
	if want := "[1|5|(null)|2026-11-30T10:00:00.000001Z 3|5|(null)|2026-11-30T10:00:00.000001Z]"; fmt.Sprint(got) != want {
		t.Fatalf("rows %v\nwant %s", got, want)
	}
	data, err := os.ReadFile(filepath.Join(dead, DeadLetterName(0)))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"line":2,"column":"amount_cents"`) ||
		!strings.Contains(lines[1], `b.parquet","line":0,"reason":"not a readable Parquet file`) {
		t.Fatalf("dead letters:\n%s", data)
	}
}

func TestRecordsSpanFiles(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	for i := range 3 {
		var b strings.Builder
		for j := range 3 {
			fmt.Fprintf(&b, `{"id":%d,"amount_cents":0,"ts":"2026-11-30T10:00:00Z"}`+"\n", i*3+j)
		}
		landing(t, dir, fmt.Sprintf("f%d.json", i), b.String(), time.Duration(i)*time.Second)
	}
	s := open(t, checkpoint(t), dir, JSON, payments(), WithAllocator(mem), WithBatchSize(4))
	latest(t, s, -1)
	var sizes []int64
	var ids []int64
	err := s.Read(context.Background(), EncodeOffset(-1), EncodeOffset(0), func(rec arrow.RecordBatch) error {
		sizes = append(sizes, rec.NumRows())
		for i := 0; i < int(rec.NumRows()); i++ {
			ids = append(ids, rec.Column(0).(interface{ Value(int) int64 }).Value(i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(sizes) != "[4 4 1]" || fmt.Sprint(ids) != "[0 1 2 3 4 5 6 7 8]" {
		t.Fatalf("record sizes %v ids %v", sizes, ids)
	}
}

func TestTimestampUnits(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: &arrow.TimestampType{Unit: arrow.Second}},
		{Name: "ms", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}},
		{Name: "ns", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}},
	}, nil)
	dir := t.TempDir()
	ts := `"1969-12-31T23:59:59.123456789Z"`
	landing(t, dir, "a.json", `{"s":`+ts+`,"ms":`+ts+`,"ns":`+ts+"}\n", 0)
	s := open(t, checkpoint(t), dir, JSON, schema)
	latest(t, s, -1)
	var got []int64
	err := s.Read(context.Background(), EncodeOffset(-1), EncodeOffset(0), func(rec arrow.RecordBatch) error {
		for _, c := range rec.Columns() {
			got = append(got, int64(c.(interface{ Value(int) arrow.Timestamp }).Value(0)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "[-1 -877 -876543211]"; fmt.Sprint(got) != want {
		t.Fatalf("got %v, want %s", got, want)
	}
	for _, tc := range []struct {
		v        int64
		from, to arrow.TimeUnit
		want     int64
		wantFits bool
	}{
		{-1, arrow.Microsecond, arrow.Millisecond, -1, true},
		{1999, arrow.Microsecond, arrow.Millisecond, 1, true},
		{2, arrow.Second, arrow.Nanosecond, 2_000_000_000, true},
		{1 << 62, arrow.Second, arrow.Millisecond, 0, false},
	} {
		if got, ok := convertUnit(tc.v, tc.from, tc.to); got != tc.want || ok != tc.wantFits {
			t.Errorf("convertUnit(%d, %v, %v) = %d, %v", tc.v, tc.from, tc.to, got, ok)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	rec := `{"id":1,"amount_cents":1,"ts":"2026-11-30T10:00:00Z"}` + "\n"
	s := open(t, checkpoint(t), dir, JSON, payments(), WithAllocator(mem), WithMaxFilesPerTrigger(3), WithCleanup(Delete()))
	const files = 20
	written := make(chan error, 1)
	go func() { // a writer keeping the landing contract: temp name, then rename
		for i := range files {
			tmp := filepath.Join(dir, fmt.Sprintf("f%02d.json.tmp", i))
			if err := os.WriteFile(tmp, []byte(rec), 0o644); err != nil {
				written <- err
				return
			}
			if err := os.Rename(tmp, strings.TrimSuffix(tmp, ".tmp")); err != nil {
				written <- err
				return
			}
		}
		written <- nil
	}()
	k, n, writerDone := int64(-1), 0, false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		if !writerDone {
			select {
			case err := <-written:
				if err != nil {
					t.Fatal(err)
				}
				writerDone = true
			default:
			}
		}
		next := latest(t, s, k)
		if next == k {
			if writerDone {
				break
			}
			continue
		}
		got, err := rows(t, s, k, next)
		if err != nil {
			t.Fatal(err)
		}
		n += len(got)
		if err := s.Commit(context.Background(), EncodeOffset(next)); err != nil {
			t.Fatal(err)
		}
		k = next
	}
	if n != files {
		t.Fatalf("read %d rows, want %d", n, files)
	}
	if left := listDir(t, dir); left != "[]" {
		t.Fatalf("landing not cleaned: %s", left)
	}
}

func TestArchiveAcrossFileSystems(t *testing.T) {
	shm, err := os.MkdirTemp("/dev/shm", "onceflow-archive-")
	if err != nil {
		t.Skip("no /dev/shm to archive into from another file system")
	}
	defer os.RemoveAll(shm)
	dir := t.TempDir()
	rec := `{"id":1,"amount_cents":1,"ts":"2026-11-30T10:00:00Z"}` + "\n"
	landing(t, dir, "a.json", rec, 0)
	s := open(t, checkpoint(t), dir, JSON, payments(), WithCleanup(Archive(filepath.Join(shm, "done"))))
	latest(t, s, -1)
	if err := s.Commit(context.Background(), EncodeOffset(0)); err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, dir); got != "[]" {
		t.Fatalf("landing holds %s", got)
	}
	if data, err := os.ReadFile(filepath.Join(shm, "done", "a.json")); err != nil || string(data) != rec {
		t.Fatalf("archived copy %q, %v", data, err)
	}
	if st, err := os.Stat(filepath.Join(shm, "done", "a.json")); err != nil || !st.ModTime().Equal(t0) {
		t.Fatalf("archived copy modified at %v (%v), want the original's %v", st.ModTime(), err, t0)
	}
	if got := mustRows(t, s, -1, 0); len(got) != 1 {
		t.Fatalf("read from the archive: %v", got)
	}
}
