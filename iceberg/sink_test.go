package iceberg

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

func newTestSink(t testing.TB, cat *Catalog, name, query string, opts ...SinkOption) *Sink {
	t.Helper()
	s, err := NewSink(cat, name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ValidateSchema(testSchema); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background(), query); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSinkReplayedBatchIsSkipped(t *testing.T) {
	ctx := context.Background()
	cat := sqliteCatalog(t)
	s := newTestSink(t, cat, "lake.pay", "q1")
	if _, ok, err := s.LastBatchID(ctx); err != nil || ok {
		t.Fatalf("LastBatchID of a missing table = %v, %v", ok, err)
	}
	addBatch(t, s, 0, 0, 10)
	addBatch(t, s, 1, 10, 25)
	addBatch(t, s, 1, 10, 25) // a replay after a crash
	addBatch(t, s, 2, 25, 30)
	if got := tableInts(t, cat, "lake.pay", "i"); !slices.Equal(got, seq(0, 30)) {
		t.Fatalf("rows = %v, want 0..29 once each", got)
	}
	if s.Skipped() != 1 {
		t.Fatalf("Skipped = %d, want 1", s.Skipped())
	}
	id, ok, err := s.LastBatchID(ctx)
	if err != nil || !ok || id != 2 {
		t.Fatalf("LastBatchID = %d, %v, %v; want 2", id, ok, err)
	}
	tbl, _ := cat.LoadTable(ctx, "lake.pay")
	snap := tbl.CurrentSnapshot()
	if snap.Summary.Properties[PropQueryID] != "q1" || snap.Summary.Properties[PropBatchID] != "2" {
		t.Fatalf("head snapshot summary = %v", snap.Summary.Properties)
	}
	// Data file names carry the batch's write id.
	files, err := liveDataFiles(ctx, tbl)
	if err != nil {
		t.Fatal(err)
	}
	want := WriteID("q1", 2).String()
	n := 0
	for _, f := range files {
		if strings.Contains(f.FilePath(), want) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d files carry batch 2's write id %s; files: %d", n, want, len(files))
	}
}

func TestSinkEmptyBatchMovesPosition(t *testing.T) {
	ctx := context.Background()
	cat := sqliteCatalog(t)
	s := newTestSink(t, cat, "lake.pay", "q1")
	addBatch(t, s, 0, 0, 3)
	if err := s.AddBatch(ctx, 1, testSchema, nil); err != nil {
		t.Fatal(err)
	}
	if id, ok, err := s.LastBatchID(ctx); err != nil || !ok || id != 1 {
		t.Fatalf("LastBatchID = %d, %v, %v; want 1", id, ok, err)
	}
}

func TestSinkPartitionSpecs(t *testing.T) {
	for name, spec := range map[string][]Partition{
		"identity": {Identity("key")},
		"day":      {Day("ts")},
		"hour":     {Hour("ts")},
		"bucket":   {Bucket("i", 4)},
		"mixed":    {Day("ts"), Bucket("key", 3)},
	} {
		t.Run(name, func(t *testing.T) {
			cat := sqliteCatalog(t)
			s := newTestSink(t, cat, "lake.p", "q", WithPartitionSpec(spec...))
			addBatch(t, s, 0, 0, 60)
			addBatch(t, s, 1, 60, 100)
			if got := tableInts(t, cat, "lake.p", "i"); !slices.Equal(got, seq(0, 100)) {
				t.Fatalf("rows = %v", got)
			}
			tbl, _ := cat.LoadTable(context.Background(), "lake.p")
			spec2 := tbl.Spec()
			if n := spec2.NumFields(); n != len(spec) {
				t.Fatalf("spec has %d fields, want %d", n, len(spec))
			}
		})
	}
}

func TestSinkRejectsBadOptions(t *testing.T) {
	cat := sqliteCatalog(t)
	for name, opts := range map[string][]SinkOption{
		"update without keys": {WithMode(Update)},
		"keys in append":      {WithKeys("key")},
		"zero buckets":        {WithPartitionSpec(Bucket("i", 0))},
	} {
		if _, err := NewSink(cat, "lake.x", opts...); err == nil {
			t.Errorf("%s: NewSink accepted it", name)
		}
	}
	if _, err := NewSink(cat, "nonamespace"); err == nil {
		t.Error("a table name without namespace was accepted")
	}
	s, _ := NewSink(cat, "lake.x", WithPartitionSpec(Identity("nope")))
	if err := s.ValidateSchema(testSchema); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("ValidateSchema with a missing partition column: %v", err)
	}
}

func TestSinkSchemaEvolution(t *testing.T) {
	ctx := context.Background()
	cat := sqliteCatalog(t)
	s := newTestSink(t, cat, "lake.ev", "q")
	addBatch(t, s, 0, 0, 5)

	// A new nullable column evolves the table.
	wider := arrow.NewSchema(append(slices.Clone(testSchema.Fields()), arrow.Field{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true}), nil)
	if err := s.ValidateSchema(wider); err != nil {
		t.Fatalf("adding a nullable column refused: %v", err)
	}
	rec := rows(t, 5, 8)
	defer rec.Release()
	w := widen(t, rec, wider)
	defer w.Release()
	if err := s.AddBatch(ctx, 1, wider, []arrow.RecordBatch{w}); err != nil {
		t.Fatal(err)
	}
	tbl, _ := cat.LoadTable(ctx, "lake.ev")
	if _, ok := tbl.Schema().FindFieldByName("note"); !ok {
		t.Fatal("column note not added")
	}
	if got := tableInts(t, cat, "lake.ev", "i"); !slices.Equal(got, seq(0, 8)) {
		t.Fatalf("rows = %v", got)
	}

	// A type change is refused with a diff.
	changed := arrow.NewSchema([]arrow.Field{
		{Name: "i", Type: arrow.BinaryTypes.String},
		{Name: "key", Type: arrow.BinaryTypes.String},
	}, nil)
	err := s.ValidateSchema(changed)
	var sce *SchemaChangeError
	if !errors.As(err, &sce) || !errors.Is(err, ErrSchemaChange) {
		t.Fatalf("type change: %v", err)
	}
	if !strings.Contains(err.Error(), "~ i: long (table) → string (query)") {
		t.Fatalf("diff does not name the column: %v", err)
	}
}

func TestSinkConcurrentWritersEachOnce(t *testing.T) {
	cat := sqliteCatalog(t)
	a := newTestSink(t, cat, "lake.c", "qa")
	addBatch(t, a, 0, 0, 1) // create the table first
	b := newTestSink(t, cat, "lake.c", "qb")
	errs := make(chan error, 2)
	run := func(s *Sink, base int64) {
		for id := int64(1); id <= 6; id++ {
			rec := rows(t, base+id*10, base+id*10+10)
			err := s.AddBatch(context.Background(), id, testSchema, []arrow.RecordBatch{rec})
			rec.Release()
			if err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}
	go run(a, 0)
	go run(b, 1000)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want := append(seq(0, 1), seq(10, 70)...)
	want = append(want, seq(1010, 1070)...)
	if got := tableInts(t, cat, "lake.c", "i"); !slices.Equal(got, want) {
		t.Fatalf("rows: got %d, want %d", len(got), len(want))
	}
}
