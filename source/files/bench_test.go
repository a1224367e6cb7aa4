package files

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

type benchPayment struct {
	ID          int64     `json:"id"`
	AmountCents int64     `json:"amount_cents"`
	Name        *string   `json:"name"`
	TS          time.Time `json:"ts"`
}

func benchLines(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"id":%d,"amount_cents":%d,"name":"customer-%d","ts":"2026-11-30T10:%02d:%02d.%06dZ","channel":"web"}`+"\n",
			i, i*37%100000, i%1000, i/60%60, i%60, i%1000000)
	}
	return b.Bytes()
}

// BenchmarkJSONLines compares the source's JSON-lines path with
// encoding/json decoding the same lines into a Go struct.
func BenchmarkJSONLines(b *testing.B) {
	const n = 100_000
	data := benchLines(n)
	b.Run("files.Read", func(b *testing.B) {
		dir := b.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "a.json"), data, 0o644); err != nil {
			b.Fatal(err)
		}
		s, err := New(dir, JSON, payments(), WithAllocator(memory.NewGoAllocator()))
		if err != nil {
			b.Fatal(err)
		}
		st := checkpointB(b)
		if err := s.OpenCheckpoint(context.Background(), st); err != nil {
			b.Fatal(err)
		}
		if _, err := s.LatestOffset(context.Background(), EncodeOffset(-1)); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			got := 0
			err := s.Read(context.Background(), EncodeOffset(-1), EncodeOffset(0), func(rec arrow.RecordBatch) error {
				got += int(rec.NumRows())
				return nil
			})
			if err != nil || got != n {
				b.Fatalf("read %d rows: %v", got, err)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("encoding/json-struct", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			sc := bufio.NewScanner(bytes.NewReader(data))
			got := 0
			for sc.Scan() {
				var p benchPayment
				if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
					b.Fatal(err)
				}
				got++
			}
			if got != n {
				b.Fatalf("decoded %d rows", got)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}
