package batch

import (
	"context"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

const exprBenchRows = 1 << 20

// exprBenchRecord is exprBenchRows rows of moneySchema; with nulls, 1 in 16 amounts
// is null.
func exprBenchRecord(b *testing.B, mem memory.Allocator, nulls bool) arrow.RecordBatch {
	b.Helper()
	r := rand.New(rand.NewPCG(7, 8))
	rb := array.NewRecordBuilder(mem, moneySchema)
	defer rb.Release()
	ids := rb.Field(0).(*array.Int64Builder)
	amounts := rb.Field(1).(*array.Int64Builder)
	fees := rb.Field(2).(*array.Int64Builder)
	names := rb.Field(3).(*array.StringBuilder)
	for i := range exprBenchRows {
		ids.Append(int64(i))
		if nulls && i%16 == 0 {
			amounts.AppendNull()
		} else {
			amounts.Append(r.Int64N(2_000_000) - 1_000_000)
		}
		fees.Append(r.Int64N(100))
		names.Append([]string{"alice", "bob", "carol", "dave"}[i%4])
	}
	return rb.NewRecordBatch()
}

// exprCPU is the process's CPU time (user + system, all threads): on a
// shared machine rows per CPU second is steadier than rows per second.
func exprCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// exprReportRows reports rows/s and rows/cpu-s of the b.N runs since cpu0.
func exprReportRows(b *testing.B, cpu0 time.Duration) {
	total := float64(exprBenchRows) * float64(b.N)
	b.ReportMetric(total/b.Elapsed().Seconds(), "rows/s")
	if cpu := (exprCPU() - cpu0).Seconds(); cpu > 0 {
		b.ReportMetric(total/cpu, "rows/cpu-s")
	}
}

// BenchmarkProjection evaluates amount*100+fee (checked int64 arithmetic)
// over 1M rows.
func BenchmarkProjection(b *testing.B) {
	for _, nulls := range []bool{false, true} {
		name := "no-nulls"
		if nulls {
			name = "nulls"
		}
		b.Run(name, func(b *testing.B) {
			mem := memory.NewGoAllocator()
			rec := exprBenchRecord(b, mem, nulls)
			defer rec.Release()
			p, err := NewProjection(mem, moneySchema, []Named{As(Add(Mul(Col("amount"), Lit(100)), Col("fee")), "cents")})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ResetTimer()
			cpu0 := exprCPU()
			for b.Loop() {
				out, err := p.Apply(ctx, rec)
				if err != nil {
					b.Fatal(err)
				}
				out.Release()
			}
			exprReportRows(b, cpu0)
		})
	}
}

// BenchmarkProjectionMixed is a wider projection: a comparison, a string
// function, a float division and a pass-through column.
func BenchmarkProjectionMixed(b *testing.B) {
	mem := memory.NewGoAllocator()
	rec := exprBenchRecord(b, mem, true)
	defer rec.Release()
	p, err := NewProjection(mem, moneySchema, []Named{
		As(Col("id"), "id"),
		As(Gt(Col("amount"), Lit(0)), "credit"),
		As(Upper(Col("name")), "who"),
		As(Div(Col("fee"), Lit(100.0)), "fee_eur"),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ResetTimer()
	cpu0 := exprCPU()
	for b.Loop() {
		out, err := p.Apply(ctx, rec)
		if err != nil {
			b.Fatal(err)
		}
		out.Release()
	}
	exprReportRows(b, cpu0)
}

// BenchmarkFilter keeps the rows with amount > 0 (about half) of 1M rows,
// all four columns.
func BenchmarkFilter(b *testing.B) {
	mem := memory.NewGoAllocator()
	rec := exprBenchRecord(b, mem, true)
	defer rec.Release()
	f, err := NewFilter(mem, moneySchema, Gt(Col("amount"), Lit(0)))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ResetTimer()
	cpu0 := exprCPU()
	for b.Loop() {
		out, err := f.Apply(ctx, rec)
		if err != nil {
			b.Fatal(err)
		}
		out.Release()
	}
	exprReportRows(b, cpu0)
}

// BenchmarkPlainGoLoop is the baseline: amount*100+fee over two []int64
// into a preallocated []int64, unchecked, no nulls, no Arrow.
func BenchmarkPlainGoLoop(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	amount, fee, out := make([]int64, exprBenchRows), make([]int64, exprBenchRows), make([]int64, exprBenchRows)
	for i := range amount {
		amount[i], fee[i] = r.Int64N(2_000_000)-1_000_000, r.Int64N(100)
	}
	b.ResetTimer()
	cpu0 := exprCPU()
	for b.Loop() {
		for i := range out {
			out[i] = amount[i]*100 + fee[i]
		}
	}
	exprReportRows(b, cpu0)
}

// BenchmarkPlainGoFilter is the baseline of BenchmarkFilter: the ids and
// amounts of rows with amount > 0, appended to preallocated slices.
func BenchmarkPlainGoFilter(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	amount, ids := make([]int64, exprBenchRows), make([]int64, exprBenchRows)
	for i := range amount {
		amount[i], ids[i] = r.Int64N(2_000_000)-1_000_000, int64(i)
	}
	keptIDs, keptAmounts := make([]int64, 0, exprBenchRows), make([]int64, 0, exprBenchRows)
	b.ResetTimer()
	cpu0 := exprCPU()
	for b.Loop() {
		keptIDs, keptAmounts = keptIDs[:0], keptAmounts[:0]
		for i, a := range amount {
			if a > 0 {
				keptIDs = append(keptIDs, ids[i])
				keptAmounts = append(keptAmounts, a)
			}
		}
	}
	exprReportRows(b, cpu0)
}
