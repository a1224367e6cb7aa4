package filesink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"

	"github.com/onceflow/onceflow/storage"
)

var benchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: "merchant", Type: arrow.BinaryTypes.String},
	{Name: "amount", Type: arrow.PrimitiveTypes.Float64},
	{Name: "qty", Type: arrow.PrimitiveTypes.Int32},
}, nil)

// benchRow is the same row as a struct, for parquet-go's generic writer.
type benchRow struct {
	ID       int64     `parquet:"id"`
	TS       time.Time `parquet:"ts,timestamp(microsecond)"`
	Merchant string    `parquet:"merchant"`
	Amount   float64   `parquet:"amount"`
	Qty      int32     `parquet:"qty"`
}

const benchRows = 200_000

func benchData(mem memory.Allocator) (arrow.RecordBatch, []benchRow) {
	b := array.NewRecordBuilder(mem, benchSchema)
	defer b.Release()
	rows := make([]benchRow, benchRows)
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for i := range rows {
		r := benchRow{
			ID: int64(i), TS: base.Add(time.Duration(i) * time.Millisecond),
			Merchant: fmt.Sprintf("merchant-%03d", i%500), Amount: float64(i%10000) / 100, Qty: int32(i % 17),
		}
		rows[i] = r
		b.Field(0).(*array.Int64Builder).Append(r.ID)
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(r.TS.UnixMicro()))
		b.Field(2).(*array.StringBuilder).Append(r.Merchant)
		b.Field(3).(*array.Float64Builder).Append(r.Amount)
		b.Field(4).(*array.Int32Builder).Append(r.Qty)
	}
	return b.NewRecordBatch(), rows
}

// BenchmarkWrite compares the sink (Arrow → Parquet column writers, file
// Put to local disk with fsync, log entry) with parquet-go's generic writer
// fed the same rows as structs (Write, Close, same Put). Run with -cpu 1
// for rows/s per core.
func BenchmarkWrite(b *testing.B) {
	mem := memory.NewGoAllocator()
	rec, rows := benchData(mem)
	defer rec.Release()
	ctx := context.Background()
	b.Run("sink-partitioned-nosync", func(b *testing.B) {
		// 17 partitions by qty: grouping rows by index, 17 files a batch.
		table, err := storage.OpenLocal(b.TempDir(), storage.LocalOptions{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		s, err := New(table, WithPartitionBy("qty"), WithCompactEvery(1<<40))
		if err != nil {
			b.Fatal(err)
		}
		cpu0 := cpuTime()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := s.AddBatch(ctx, int64(i), benchSchema, []arrow.RecordBatch{rec}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportCPU(b, cpu0, b.N*benchRows)
		b.ReportMetric(float64(b.N*benchRows)/b.Elapsed().Seconds(), "rows/s")
	})
	for _, disk := range []struct {
		name   string
		noSync bool
	}{{"fsync", false}, {"nosync", true}} {
		benchWrite(ctx, b, disk.name, disk.noSync, rec, rows)
	}
}

func benchWrite(ctx context.Context, b *testing.B, disk string, noSync bool, rec arrow.RecordBatch, rows []benchRow) {
	b.Run("sink-"+disk, func(b *testing.B) {
		table, err := storage.OpenLocal(b.TempDir(), storage.LocalOptions{NoSync: noSync})
		if err != nil {
			b.Fatal(err)
		}
		s, err := New(table, WithCompactEvery(1<<40))
		if err != nil {
			b.Fatal(err)
		}
		var size int64
		cpu0 := cpuTime()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := s.AddBatch(ctx, int64(i), benchSchema, []arrow.RecordBatch{rec}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportCPU(b, cpu0, b.N*benchRows)
		files, _ := Committed(ctx, table)
		for _, f := range files {
			size += f.Size
		}
		b.ReportMetric(float64(b.N*benchRows)/b.Elapsed().Seconds(), "rows/s")
		b.ReportMetric(float64(size)/float64(len(files)), "file-bytes")
	})
	b.Run("generic-"+disk, func(b *testing.B) {
		table, err := storage.OpenLocal(b.TempDir(), storage.LocalOptions{NoSync: noSync})
		if err != nil {
			b.Fatal(err)
		}
		var size int
		codec := Zstd.codec()
		cpu0 := cpuTime()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			var buf bytes.Buffer
			w := parquet.NewGenericWriter[benchRow](&buf, parquet.Compression(codec))
			if _, err := w.Write(rows); err != nil {
				b.Fatal(err)
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			size = buf.Len()
			if err := table.Put(ctx, fmt.Sprintf("g-%d.parquet", i), buf.Bytes()); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportCPU(b, cpu0, b.N*benchRows)
		b.ReportMetric(float64(b.N*benchRows)/b.Elapsed().Seconds(), "rows/s")
		b.ReportMetric(float64(size), "file-bytes")
	})
}

// compactionState builds a table state of n live files in 100 day folders,
// each with partition values and stats for every column.
func compactionState(n int) *tableState {
	st := newTableState()
	st.version, st.versionTime = int64(n), time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC).UnixMilli()
	st.schema = []Column{{Name: "id", Type: "int64"}, {Name: "day", Type: "string"}, {Name: "merchant", Type: "string", Nullable: true}, {Name: "amount", Type: "int64"}}
	st.partCols = []string{"day"}
	for i := 0; i < n; i++ {
		day := fmt.Sprintf("2026-%02d-%02d", 1+i/100%12, 1+i%28)
		p := fmt.Sprintf("day=%s/%s", day, FileName(int64(i), 0, 0, Zstd))
		num := func(v int) json.RawMessage { return json.RawMessage(fmt.Sprint(v)) }
		f := File{
			Path: p, Size: 1 << 20, Rows: 10000, BatchID: int64(i), Time: st.versionTime - int64(n-i)*1000,
			Partition: []PartitionValue{{Column: "day", Value: &day}},
			Stats: []ColumnStats{
				{Column: "id", Min: num(i * 10000), Max: num(i*10000 + 9999)},
				{Column: "day", Min: json.RawMessage(`"` + day + `"`), Max: json.RawMessage(`"` + day + `"`)},
				{Column: "merchant", Min: json.RawMessage(`"m000"`), Max: json.RawMessage(`"m499"`), NullCount: 12},
				{Column: "amount", Min: num(0), Max: num(99999)},
			},
		}
		if err := st.applyAction(Action{Action: ActionAdd, File: f}, nil); err != nil {
			panic(err)
		}
	}
	return st
}

// BenchmarkCompaction100k measures writing the compact file of a table of
// 100,000 live files from the in-memory state (what a compacting batch
// pays), and loading it back (what a reader or a restarted sink pays once).
func BenchmarkCompaction100k(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	st := compactionState(n)
	table, err := storage.OpenLocal(b.TempDir(), storage.LocalOptions{})
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(table)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.compact(ctx, st); err != nil {
		b.Fatal(err)
	}
	b.Run("write", func(b *testing.B) {
		cpu0 := cpuTime()
		defer func() { b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op") }()
		for i := 0; i < b.N; i++ {
			if err := s.compact(ctx, st); err != nil {
				b.Fatal(err)
			}
		}
		data, _ := table.Get(ctx, compactName(st.version))
		b.ReportMetric(float64(len(data)), "compact-bytes")
	})
	b.Run("load-sink", func(b *testing.B) {
		cpu0 := cpuTime()
		defer func() { b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op") }()
		for i := 0; i < b.N; i++ {
			got, err := loadState(ctx, table, true)
			if err != nil {
				b.Fatal(err)
			}
			if len(got.live) != n {
				b.Fatalf("%d files", len(got.live))
			}
		}
	})
	b.Run("load-reader", func(b *testing.B) {
		cpu0 := cpuTime()
		defer func() { b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op") }()
		for i := 0; i < b.N; i++ {
			got, err := loadState(ctx, table, false)
			if err != nil {
				b.Fatal(err)
			}
			if len(got.live) != n {
				b.Fatalf("%d files", len(got.live))
			}
		}
	})
	b.Run("bytes-only", func(b *testing.B) {
		cpu0 := cpuTime()
		defer func() { b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op") }()
		for i := 0; i < b.N; i++ {
			if _, err := st.compactBytes(0); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports rows per CPU-second: rows/s per core, whatever else
// shares the machine.
func reportCPU(b *testing.B, since time.Duration, rows int) {
	if d := cpuTime() - since; d > 0 {
		b.ReportMetric(float64(rows)/d.Seconds(), "rows/cpu-s")
	}
}
