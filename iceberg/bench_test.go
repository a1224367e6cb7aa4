package iceberg

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/filesink"
	"github.com/onceflow/onceflow/storage"
)

const benchRows = 100_000

var benchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: "merchant", Type: arrow.BinaryTypes.String},
	{Name: "amount", Type: arrow.PrimitiveTypes.Float64},
	{Name: "qty", Type: arrow.PrimitiveTypes.Int32},
}, nil)

func benchRecord() arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, benchSchema)
	defer b.Release()
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for i := 0; i < benchRows; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(base.Add(time.Duration(i) * time.Millisecond).UnixMicro()))
		b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("merchant-%03d", i%500))
		b.Field(3).(*array.Float64Builder).Append(float64(i%10000) / 100)
		b.Field(4).(*array.Int32Builder).Append(int32(i % 17))
	}
	return b.NewRecordBatch()
}

// BenchmarkSinkVsFileSink writes the same 100,000-row batch with the
// Iceberg sink (SQLite catalog, local warehouse) and the file sink (local
// directory without fsync, as iceberg-go's local IO does not fsync either),
// one AddBatch per iteration, and reports rows per CPU-second of the
// process (rows/s per core, whatever else shares the machine).
func BenchmarkSinkVsFileSink(b *testing.B) {
	rec := benchRecord()
	defer rec.Release()
	ctx := context.Background()
	b.Run("iceberg", func(b *testing.B) {
		cat, err := OpenCatalog(ctx, "sqlite:"+filepath.Join(b.TempDir(), "catalog.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer cat.Close()
		s, err := NewSink(cat, "bench.t")
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Start(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
		runSinkBench(b, func(i int) error { return s.AddBatch(ctx, int64(i), benchSchema, []arrow.RecordBatch{rec}) })
	})
	b.Run("filesink", func(b *testing.B) {
		table, err := storage.OpenLocal(b.TempDir(), storage.LocalOptions{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		s, err := filesink.New(table, filesink.WithCompactEvery(1<<40))
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Start(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
		runSinkBench(b, func(i int) error { return s.AddBatch(ctx, int64(i), benchSchema, []arrow.RecordBatch{rec}) })
	})
}

func runSinkBench(b *testing.B, add func(int) error) {
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := add(i); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	rows := float64(b.N * benchRows)
	if cpu > 0 {
		b.ReportMetric(rows/cpu.Seconds(), "rows/cpu-s")
	}
	b.ReportMetric(rows/b.Elapsed().Seconds(), "rows/s")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
