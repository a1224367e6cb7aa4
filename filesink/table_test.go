package filesink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/offsetlog"
)

var paySchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "day", Type: arrow.BinaryTypes.String},
	{Name: "merchant", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
}, nil)

func paths(files []File) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Path)
	}
	return out
}

func TestIdempotentAndDeterministic(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t)
	table, dir := openTable(t)
	s, err := New(table)
	if err != nil {
		t.Fatal(err)
	}
	addBatch(t, ctx, s, mem, paySchema, 0, 0, 100, 100)
	files, _ := Committed(ctx, table)
	want := []string{"part-00000000000000000000-00000-00000.zstd.parquet"}
	if !slices.Equal(paths(files), want) {
		t.Fatalf("files %v, want %v", paths(files), want)
	}
	// Second call for batch 0, with other rows: a no-op.
	addBatch(t, ctx, s, mem, paySchema, 0, 500, 600, 100)
	// A fresh sink on the same table also sees batch 0 as committed.
	s2, _ := New(table)
	if err := s2.Start(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	addBatch(t, ctx, s2, mem, paySchema, 0, 700, 800, 100)
	rows, _ := readAll(t, table)
	if len(rows) != 100 || rows[0] == nil || rows[500] != nil || rows[700] != nil {
		t.Fatalf("rows after repeats: %d", len(rows))
	}
	// A re-run of an uncommitted batch overwrites its own file: simulate
	// an attempt at batch 1 that wrote its file and died before the log.
	stray := filepath.Join(dir, "part-00000000000000000001-00000-00000.zstd.parquet")
	if err := os.WriteFile(stray, []byte("garbage of a failed attempt"), 0o644); err != nil {
		t.Fatal(err)
	}
	if files, _ := Committed(ctx, table); len(files) != 1 {
		t.Fatalf("stray file listed: %v", paths(files))
	}
	addBatch(t, ctx, s2, mem, paySchema, 1, 100, 200, 100)
	files, _ = Committed(ctx, table)
	want = append(want, "part-00000000000000000001-00000-00000.zstd.parquet")
	if !slices.Equal(paths(files), want) {
		t.Fatalf("files %v, want %v", paths(files), want)
	}
	if rows, _ := readAll(t, table); len(rows) != 200 {
		t.Fatalf("rows = %d", len(rows))
	}
	// Empty batch: committed, no file.
	if err := s2.AddBatch(ctx, 2, paySchema, nil); err != nil {
		t.Fatal(err)
	}
	if v, _ := Version(ctx, table); v != 2 {
		t.Fatalf("version %d", v)
	}
}

func TestPartitioningAndEscaping(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t)
	table, dir := openTable(t)
	s, err := New(table, WithPartitionBy("day", "merchant"))
	if err != nil {
		t.Fatal(err)
	}
	addBatch(t, ctx, s, mem, paySchema, 0, 0, 300, 70)
	files, err := Committed(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Path)
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f.Path))); err != nil {
			t.Fatal(err)
		}
	}
	// 3 days × {m1, a/b, x:y=z, "" , null}; "" and null share the default
	// folder but stay two partitions (two files) with exact values in the log.
	var want []string
	for _, d := range []string{"2026-11-28", "2026-11-29", "2026-11-30"} {
		for _, m := range []string{"__HIVE_DEFAULT_PARTITION__", "__HIVE_DEFAULT_PARTITION__", "a%2Fb", "m1", "x%3Ay%3Dz"} {
			want = append(want, "day="+d+"/merchant="+m)
		}
	}
	var gotDirs []string
	for _, p := range got {
		gotDirs = append(gotDirs, filepath.ToSlash(filepath.Dir(p)))
	}
	if !slices.Equal(gotDirs, want) {
		t.Fatalf("folders\n%v\nwant\n%v", gotDirs, want)
	}
	for i, f := range files {
		_, part, seq, ok := ParseFileName(f.Path)
		if !ok || part != i || seq != 0 {
			t.Errorf("file %s: rank %d seq %d ok %v, want rank %d", f.Path, part, seq, ok, i)
		}
	}
	rows, cols := readAll(t, table)
	if len(rows) != 300 {
		t.Fatalf("read %d rows", len(rows))
	}
	for id, r := range rows {
		for k, c := range cols {
			if w := value(paySchema.Field(paySchema.FieldIndices(c)[0]), int(id)); fmt.Sprint(r[k]) != fmt.Sprint(w) {
				t.Fatalf("row %d %s = %v, want %v", id, c, r[k], w)
			}
		}
	}
	// The partition columns are not inside the files.
	for _, f := range files {
		if len(f.Partition) != 2 || f.Partition[0].Column != "day" {
			t.Fatalf("partition values of %s: %+v", f.Path, f.Partition)
		}
		if st := statsOf(f, "day"); string(st.Min) != `"`+*f.Partition[0].Value+`"` {
			t.Fatalf("day stats of %s: %+v", f.Path, st)
		}
	}
	// A sink partitioned otherwise refuses the table.
	s2, _ := New(table, WithPartitionBy("day"))
	if err := s2.Start(ctx, "q"); !errors.Is(err, ErrBadSchema) {
		t.Fatalf("Start with other partitioning = %v", err)
	}
}

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain":        "plain",
		"a/b":          "a%2Fb",
		"x:y=z":        "x%3Ay%3Dz",
		"100%":         "100%25",
		"é{[]}^?*#\"'": "é%7B%5B%5D}%5E%3F%2A%23%22%27",
		"tab\there":    "tab%09here",
		"back\\slash":  "back%5Cslash",
	} {
		if got := EscapePartitionValue(in); got != want {
			t.Errorf("escape %q = %q, want %q", in, got, want)
		}
		if back := UnescapePartitionValue(want); back != in {
			t.Errorf("unescape %q = %q, want %q", want, back, in)
		}
	}
}

func TestRollingByTargetSize(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t)
	table, _ := openTable(t)
	s, err := New(table, WithTargetFileSize(16<<10), WithCompression(Uncompressed))
	if err != nil {
		t.Fatal(err)
	}
	s.cfg.chunkRows = 256
	addBatch(t, ctx, s, mem, paySchema, 7, 0, 20000, 3000)
	files, _ := Committed(ctx, table)
	if len(files) < 5 {
		t.Fatalf("%d files, want rolling", len(files))
	}
	var total int64
	for i, f := range files {
		if want := FileName(7, 0, i, Uncompressed); f.Path != want {
			t.Errorf("file %d = %s, want %s", i, f.Path, want)
		}
		if i < len(files)-1 && f.Size > 3*(16<<10) {
			t.Errorf("file %s is %d bytes, target 16 KiB", f.Path, f.Size)
		}
		total += f.Rows
	}
	if total != 20000 {
		t.Fatalf("rows %d", total)
	}
	if rows, _ := readAll(t, table); len(rows) != 20000 {
		t.Fatalf("read %d rows", len(rows))
	}
}

// TestMinFileSize checks that merging small files keeps every row exactly
// once at every committed version and bounds the number of small files.
func TestMinFileSize(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t)
	table, _ := openTable(t)
	s, err := New(table, WithPartitionBy("day"), WithMinFileSize(64<<10), WithCompactEvery(4))
	if err != nil {
		t.Fatal(err)
	}
	next := 0
	for b := int64(0); b < 12; b++ {
		addBatch(t, ctx, s, mem, paySchema, b, next, next+50, 50)
		next += 50
		rows, _ := readAll(t, table) // fails on a row seen twice
		if len(rows) != next {
			t.Fatalf("after batch %d: %d rows, want %d", b, len(rows), next)
		}
		files, _ := Committed(ctx, table)
		if len(files) != 3 {
			t.Fatalf("after batch %d: %d files, want one per day: %v", b, len(files), paths(files))
		}
	}
	// The log of the last batch lists removes then adds.
	e, err := s.log.Get(ctx, 11)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Actions) != 6 || e.Actions[0].Action != ActionRemove || e.Actions[5].Action != ActionAdd {
		t.Fatalf("batch 11 actions: %+v", e.Actions)
	}
}

func TestCompactionAndRetention(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t)
	table, dir := openTable(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := New(table, WithCompactEvery(5), WithRetention(10*time.Hour), WithClock(fixedClock(&now)))
	if err != nil {
		t.Fatal(err)
	}
	for b := int64(0); b < 12; b++ {
		addBatch(t, ctx, s, mem, paySchema, b, int(b)*10, int(b)*10+10, 10)
		now = now.Add(time.Hour)
	}
	ll, err := listLog(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	// Compactions after batches 4 and 9; deltas up to 4 purged.
	if !slices.Equal(ll.compacts, []int64{4, 9}) || !slices.Equal(ll.deltas, []int64{5, 6, 7, 8, 9, 10, 11}) {
		t.Fatalf("log: compacts %v deltas %v", ll.compacts, ll.deltas)
	}
	// Batch 9 committed at +9h: nothing older than 10h yet.
	files, _ := Committed(ctx, table)
	if len(files) != 12 {
		t.Fatalf("%d files", len(files))
	}
	for b := int64(12); b < 15; b++ {
		addBatch(t, ctx, s, mem, paySchema, b, int(b)*10, int(b)*10+10, 10)
		now = now.Add(time.Hour)
	}
	// Compaction after batch 14 (at +14h) drops files of batches 0..3.
	files, _ = Committed(ctx, table)
	if len(files) != 11 || files[0].BatchID != 4 {
		t.Fatalf("after retention: %d files from batch %d", len(files), files[0].BatchID)
	}
	ll, _ = listLog(ctx, table)
	if !slices.Equal(ll.compacts, []int64{9, 14}) || ll.deltas[0] != 10 {
		t.Fatalf("log: compacts %v deltas %v", ll.compacts, ll.deltas)
	}
	// A reader of only the compact file agrees with the sink's state.
	cst := newTableState()
	if err := cst.readCompact(ctx, table, 14, false); err != nil {
		t.Fatal(err)
	}
	if len(cst.live) != 11 || len(cst.tombstones) != 4 {
		t.Fatalf("compact 14: %d adds, %d removes", len(cst.live), len(cst.tombstones))
	}
	// A fresh sink re-reads compact + deltas and sees batch 14 committed.
	s2, _ := New(table, WithCompactEvery(5))
	addBatch(t, ctx, s2, mem, paySchema, 14, 9000, 9010, 10)
	if rows, _ := readAll(t, table); len(rows) != 110 {
		t.Fatalf("rows %d", len(rows))
	}
	// Vacuum: the 4 dropped files (and a stray) are listed once old enough.
	stray := filepath.Join(dir, "part-00000000000000000000-00000-00099.zstd.parquet")
	if err := os.WriteFile(stray, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "README.txt")
	if err := os.WriteFile(foreign, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	wall := time.Now()
	if got, _ := Vacuum(ctx, table, time.Hour, wall, true); len(got) != 0 {
		t.Fatalf("vacuum of young files: %v", got)
	}
	got, err := Vacuum(ctx, table, time.Hour, wall.Add(2*time.Hour), true)
	if err != nil {
		t.Fatal(err)
	}
	// The removes were recorded at the table's clock (January), so their
	// removal is old at wall+2h.
	if len(got) != 5 || !slices.Contains(got, "part-00000000000000000000-00000-00099.zstd.parquet") {
		t.Fatalf("dry run: %v", got)
	}
	if _, err := os.Stat(stray); err != nil {
		t.Fatal("dry run deleted")
	}
	got2, err := Vacuum(ctx, table, time.Hour, wall.Add(2*time.Hour), false)
	if err != nil || !slices.Equal(got, got2) {
		t.Fatalf("vacuum = %v, %v", got2, err)
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatal("stray not deleted")
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Fatal("foreign file deleted")
	}
	if rows, _ := readAll(t, table); len(rows) != 110 {
		t.Fatalf("rows after vacuum %d", len(rows))
	}
}

func TestRemovedFileWaitsForVacuum(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t)
	table, _ := openTable(t)
	now := time.Now()
	s, err := New(table, WithMinFileSize(1<<20), WithClock(fixedClock(&now)))
	if err != nil {
		t.Fatal(err)
	}
	addBatch(t, ctx, s, mem, paySchema, 0, 0, 10, 10)
	addBatch(t, ctx, s, mem, paySchema, 1, 10, 20, 10)
	// Batch 0's file was removed by batch 1's rewrite just now: the file
	// is old enough by mtime in an hour, but its removal is not.
	got, err := Vacuum(ctx, table, time.Hour, now.Add(30*time.Minute), true)
	if err != nil || len(got) != 0 {
		t.Fatalf("vacuum = %v, %v", got, err)
	}
	got, _ = Vacuum(ctx, table, time.Hour, now.Add(2*time.Hour), true)
	if !slices.Equal(got, []string{"part-00000000000000000000-00000-00000.zstd.parquet"}) {
		t.Fatalf("vacuum = %v", got)
	}
}

func TestFileNames(t *testing.T) {
	n := FileName(42, 3, 7, Zstd)
	if n != "part-00000000000000000042-00003-00007.zstd.parquet" {
		t.Fatal(n)
	}
	if b, p, s, ok := ParseFileName("day=x/" + n); !ok || b != 42 || p != 3 || s != 7 {
		t.Fatal(b, p, s, ok)
	}
	for _, bad := range []string{"part-1-2-3.zstd.parquet", "part-00000000000000000042-00003-00007.lz4.parquet", "x.parquet", strings.Replace(n, "7.", "x.", 1)} {
		if _, _, _, ok := ParseFileName(bad); ok {
			t.Errorf("%s parsed", bad)
		}
	}
	if FileName(1, 0, 0, Uncompressed) != "part-00000000000000000001-00000-00000.parquet" {
		t.Fatal(FileName(1, 0, 0, Uncompressed))
	}
}

func TestToMicros(t *testing.T) {
	for _, c := range []struct {
		v    int64
		unit arrow.TimeUnit
		want int64
		err  bool
	}{
		{1, arrow.Second, 1_000_000, false},
		{-1, arrow.Millisecond, -1000, false},
		{-1, arrow.Nanosecond, -1, false},
		{1999, arrow.Nanosecond, 1, false},
		{-1001, arrow.Nanosecond, -2, false},
		{1 << 62, arrow.Second, 0, true},
	} {
		got, err := toMicros(c.v, c.unit)
		if (err != nil) != c.err || (!c.err && got != c.want) {
			t.Errorf("toMicros(%d, %s) = %d, %v; want %d", c.v, c.unit, got, err, c.want)
		}
	}
}

// TestParallelWritersSameOutput checks that the number of workers changes
// nothing in the output: names, sizes, rows.
func TestParallelWritersSameOutput(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t)
	var want []File
	for _, n := range []int{1, 3, 16} {
		table, _ := openTable(t)
		now := time.Unix(1_800_000_000, 0)
		s, err := New(table, WithPartitionBy("day", "merchant"), WithMaxOpenFiles(n), WithTargetFileSize(4<<10), WithClock(fixedClock(&now)))
		if err != nil {
			t.Fatal(err)
		}
		s.cfg.chunkRows = 64
		addBatch(t, ctx, s, mem, paySchema, 3, 0, 5000, 999)
		files, err := Committed(ctx, table)
		if err != nil {
			t.Fatal(err)
		}
		if want == nil {
			want = files
			if len(files) <= 15 {
				t.Fatalf("only %d files: no rolling", len(files))
			}
			continue
		}
		if len(files) != len(want) {
			t.Fatalf("%d workers: %d files, want %d", n, len(files), len(want))
		}
		for i := range files {
			if files[i].Path != want[i].Path || files[i].Size != want[i].Size || files[i].Rows != want[i].Rows {
				t.Fatalf("%d workers: file %d = %+v, want %+v", n, i, files[i], want[i])
			}
		}
	}
}

func TestRecordSchemaMismatch(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t)
	table, _ := openTable(t)
	s, _ := New(table)
	rec := makeRecord(t, mem, paySchema, 0, 10)
	defer rec.Release()
	err := s.AddBatch(ctx, 0, allTypes, []arrow.RecordBatch{rec})
	if !errors.Is(err, ErrBadSchema) {
		t.Fatalf("AddBatch = %v", err)
	}
	if v, _ := Version(ctx, table); v != -1 {
		t.Fatalf("version %d after a failed batch", v)
	}
}

// TestCorruptLog checks that a damaged log object fails reads with a
// corruption error naming the object, never an empty or partial table.
func TestCorruptLog(t *testing.T) {
	ctx := context.Background()
	for name, damage := range map[string]func(data []byte) []byte{
		"empty":   func([]byte) []byte { return nil },
		"torn":    func(d []byte) []byte { return d[:len(d)-40] },
		"count":   func(d []byte) []byte { return append(d, []byte(`{"action":"add","path":"x"}`+"\n")...) },
		"version": func(d []byte) []byte { return append([]byte("v9"), d[2:]...) },
		"unknownAction": func(d []byte) []byte {
			return []byte(strings.Replace(string(d), `"action":"add"`, `"action":"move"`, 1))
		},
	} {
		t.Run(name, func(t *testing.T) {
			mem := newMem(t)
			table, dir := openTable(t)
			s, _ := New(table, WithCompactEvery(2))
			addBatch(t, ctx, s, mem, paySchema, 0, 0, 10, 10)
			addBatch(t, ctx, s, mem, paySchema, 1, 10, 20, 10)
			p := filepath.Join(dir, filepath.FromSlash(compactName(1)))
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, damage(data), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = Committed(ctx, table)
			if !errors.Is(err, offsetlog.ErrCorrupt) || !strings.Contains(err.Error(), compactName(1)) {
				t.Fatalf("Committed = %v, want a corruption error naming %s", err, compactName(1))
			}
		})
	}
}

// TestReadersDuringWrites reads the table while batches commit, merge small
// files and compact (purging old log objects): every read is some committed
// version, with every row of it exactly once.
func TestReadersDuringWrites(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t)
	table, _ := openTable(t)
	s, err := New(table, WithPartitionBy("day"), WithCompactEvery(2), WithMinFileSize(8<<10))
	if err != nil {
		t.Fatal(err)
	}
	const per, batches = 40, 16
	done := make(chan struct{})
	errs := make(chan error, 2)
	for r := 0; r < 2; r++ {
		lazy := r == 0
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				st, err := loadState(ctx, table, lazy)
				if err != nil {
					errs <- err
					return
				}
				var rows int64
				for _, f := range st.live {
					rows += f.Rows
				}
				if rows != (st.version+1)*per {
					errs <- fmt.Errorf("version %d has %d rows, want %d", st.version, rows, (st.version+1)*per)
					return
				}
			}
		}()
	}
	for b := 0; b < batches; b++ {
		addBatch(t, ctx, s, mem, paySchema, int64(b), b*per, (b+1)*per, per)
	}
	close(done)
	for r := 0; r < 2; r++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if rows, _ := readAll(t, table); len(rows) != per*batches {
		t.Fatalf("%d rows", len(rows))
	}
}

// TestWideRowsRoll checks that rows much wider than the chunk budget still
// give files near the target size.
func TestWideRowsRoll(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "blob", Type: arrow.BinaryTypes.Binary}}, nil)
	b := array.NewRecordBuilder(mem, schema)
	blob := make([]byte, 32<<10)
	for i := 0; i < 600; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		blob[0], blob[1] = byte(i), byte(i>>8) // incompressible enough: vary it
		for j := 2; j < len(blob); j += 97 {
			blob[j] = byte(i*j + j>>3)
		}
		b.Field(1).(*array.BinaryBuilder).Append(blob)
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	table, _ := openTable(t)
	s, err := New(table, WithTargetFileSize(1<<20), WithCompression(Uncompressed))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddBatch(ctx, 0, schema, []arrow.RecordBatch{rec}); err != nil {
		t.Fatal(err)
	}
	files, _ := Committed(ctx, table)
	var rows int64
	for i, f := range files {
		rows += f.Rows
		if i < len(files)-1 && (f.Size > 2<<20 || f.Size < 1<<19) {
			t.Errorf("file %s is %d bytes, target 1 MiB", f.Path, f.Size)
		}
	}
	if rows != 600 || len(files) < 10 {
		t.Fatalf("%d files, %d rows", len(files), rows)
	}
}
